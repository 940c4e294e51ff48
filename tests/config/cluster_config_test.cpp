// The cluster file: the examples parse into what they say; a node's plan lists what it
// runs; the one-process form gives the same settings as today's flags; every kind of bad
// file gives a message naming the key and file:line; the secret rule holds.
#include "config/cluster_config.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "config/load.h"
#include "kernels/check.h"
#include "support/error_of.h"
#include "model/temp_dir.h"
#include "support/test_paths.h"

namespace troupe::config {
namespace {

const std::string kExamples = std::string(TROUPE_TEST_DATA) + "/../../config/examples/";

std::string read(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream os;
  os << in.rdbuf();
  return os.str();
}

using test::error_of;

// A valid two-host cluster; tests break one line of it.
const std::string kValid =
    "cluster-secret: 0123456789abcdef\n"  // line 1
    "nodes:\n"
    "  - {name: a, host: 10.0.0.1, port: 7100}\n"  // line 3
    "  - {name: b, host: 10.0.0.2, port: 7100, model: /m}\n"
    "router: {node: a, http-port: 8000, tcp-port: 8001}\n"  // line 5
    "instances:\n"
    "  - {name: i, role: mixed, ranks: [a, b], threads: 2}\n"  // line 7
    "serve:\n"
    "  max-num-seqs: 16\n";  // line 9

std::string replace(std::string text, const std::string& from, const std::string& to) {
  const size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  return text.replace(at, from.size(), to);
}

TEST(ClusterConfig, TheLocalExampleParsesIntoWhatItSays) {
  const std::string path = kExamples + "cluster-local.yaml";
  EXPECT_TRUE(is_cluster_config(read(path)));
  const ClusterConfig c = load_cluster_config(path);
  ASSERT_EQ(c.nodes.size(), 3u);
  EXPECT_EQ(c.nodes[1].name, "rank0");
  EXPECT_EQ(c.nodes[1].host, "127.0.0.1");
  EXPECT_EQ(c.nodes[2].port, 7102);
  EXPECT_EQ(c.router.node, "router");
  EXPECT_EQ(c.router.http_port, 8000);
  EXPECT_EQ(c.router.tcp_port, 8001);
  ASSERT_EQ(c.instances.size(), 1u);
  EXPECT_EQ(c.instances[0].ranks, (std::vector<std::string>{"rank0", "rank1"}));
  EXPECT_EQ(c.instances[0].threads, 1);
  EXPECT_EQ(c.serve.max_num_seqs, 64);
  EXPECT_EQ(c.secret, "cluster-local-example-secret");
  EXPECT_TRUE(c.one_host());

  // Its two ranks are processes of their own: each node runs one rank of the group, which
  // forms at rank 0's node; the router dials both.
  for (int r = 0; r < 2; ++r) {
    const NodeRun run = plan_node(c, "rank" + std::to_string(r), false);
    ASSERT_TRUE(run.engine);
    EXPECT_TRUE(run.engine->group_member);
    EXPECT_EQ(run.engine->rank, r);
    EXPECT_EQ(run.engine->ranks, 2);
    EXPECT_EQ(run.engine->leader, "rank0");
    EXPECT_EQ(run.engine->serve.data_parallel_size, 1);
    EXPECT_TRUE(run.engine->serve.enable_expert_parallel);
    EXPECT_EQ(run.engine->serve.threads, 1);
  }
  const NodeRun router = plan_node(c, "router", false);
  EXPECT_FALSE(router.engine);
  ASSERT_EQ(router.remote.size(), 2u);
  EXPECT_TRUE(router.remote[1].group_member);
  EXPECT_NE(error_of([&] { plan_node(c, "rank2", false); }).find("did you mean 'rank0'"),
            std::string::npos);
}

TEST(ClusterConfig, WithoutExpertParallelEachRankIsAnEngineOfItsOwn) {
  const ClusterConfig c = load_cluster_config(kExamples + "cluster-local-dp.yaml");
  const std::vector<ClusterEngine> engines = cluster_engines(c);
  ASSERT_EQ(engines.size(), 2u);
  EXPECT_EQ(engines[1].instance, "dp2");
  EXPECT_EQ(engines[1].rank, 1);
  EXPECT_EQ(engines[1].ranks, 2);
  EXPECT_EQ(engines[1].node, "rank1");
  EXPECT_EQ(engines[1].serve.data_parallel_size, 1);
  EXPECT_FALSE(engines[1].serve.enable_expert_parallel);
  EXPECT_EQ(engines[1].serve.max_num_seqs, 64);
  EXPECT_EQ(engines[1].describe(c), "instance dp2 rank 1 on node rank1 (127.0.0.1:7102)");

  const NodeRun router = plan_node(c, "router", false);
  EXPECT_TRUE(router.router);
  EXPECT_FALSE(router.engine);
  EXPECT_FALSE(router.single_process());
  ASSERT_EQ(router.remote.size(), 2u);
  EXPECT_EQ(router.remote[0].node, "rank0");
  EXPECT_EQ(router.serve.port, 8000);
  EXPECT_EQ(router.serve.tcp_port, 8001);
  const NodeRun rank0 = plan_node(c, "rank0", false);
  EXPECT_FALSE(rank0.router);
  ASSERT_TRUE(rank0.engine);
  EXPECT_EQ(rank0.engine->rank, 0);
  EXPECT_TRUE(rank0.remote.empty());  // only the router connects to the others
}

// Each rank owns its KV tiers (runtime/dep/rank_tiers.h): the ranks of a spread instance
// without expert parallelism are one-rank engines, so the cluster file names their disk
// folders; a group member's folder is named by spawn_engine from its membership; an
// instance on one node gets the folder itself and splits it among its ranks at spawn.
TEST(ClusterConfig, EveryRankOfASpreadInstanceHasItsOwnDiskFolder) {
  const std::string tiers = "  kv-offload-bytes: 1MiB\n  kv-disk-dir: /kv\n  kv-disk-bytes: 8MiB\n";
  const std::string plain = replace(kValid, "threads: 2}", "threads: 2, enable-expert-parallel: false}");
  const std::vector<ClusterEngine> dp = cluster_engines(parse_cluster_config(plain + tiers, "c.yaml"));
  ASSERT_EQ(dp.size(), 2u);
  EXPECT_EQ(dp[0].serve.kv_disk_dir, "/kv/rank-0");
  EXPECT_EQ(dp[1].serve.kv_disk_dir, "/kv/rank-1");
  EXPECT_EQ(dp[1].serve.kv_disk_bytes, 8 << 20);  // a process of its own: all of it
  const std::vector<ClusterEngine> members = cluster_engines(parse_cluster_config(kValid + tiers, "c.yaml"));
  ASSERT_EQ(members.size(), 2u);
  EXPECT_TRUE(members[1].group_member);
  EXPECT_EQ(members[1].serve.kv_disk_dir, "/kv");
}

TEST(ClusterConfig, OneProcessServesWhatTheFlagsServe) {
  const ClusterConfig c = load_cluster_config(kExamples + "cluster-one-process.yaml");
  const NodeRun run = plan_node(c, "local", false);
  ASSERT_TRUE(run.single_process());
  const ServeConfig want = resolve_serve_config({{"data-parallel-size", "2"},
                                                 {"enable-expert-parallel", "1"},
                                                 {"threads", "2"},
                                                 {"host", "127.0.0.1"},
                                                 {"port", "8000"},
                                                 {"tcp-port", "8001"},
                                                 {"max-num-seqs", "64"}});
  EXPECT_TRUE(run.serve == want);
  EXPECT_EQ(run.serve.data_parallel_size, 2);
  EXPECT_TRUE(run.serve.enable_expert_parallel);
}

TEST(ClusterConfig, ANodeRunsOneEngineSoFar) {
  const std::string text =
      "nodes: [{name: a, host: h, port: 1}, {name: b, host: h, port: 2}]\n"
      "router: {node: a}\n"
      "instances:\n"
      "  - {name: x, ranks: [b]}\n"
      "  - {name: y, ranks: [b, a], enable-expert-parallel: false}\n";
  const ClusterConfig c = parse_cluster_config(text, "c.yaml");
  EXPECT_NE(error_of([&] { cluster_engines(c); })
                .find("c.yaml:5: node 'b' would run instance x on node b (h:2) and instance y "
                      "rank 0 on node b (h:2)"),
            std::string::npos);
}

TEST(ClusterConfig, TheTwoNodeExampleParsesWithItsSecretFile) {
  test::TempDir dir;
  const std::string secret = dir.file("secret");
  std::ofstream(secret) << "a-secret-of-twenty-chars\n";
  const std::string text = replace(read(kExamples + "cluster-two-nodes.yaml"),
                                   "/etc/troupe/cluster-secret", secret);
  const ClusterConfig c = parse_cluster_config(text, "two.yaml");
  EXPECT_EQ(c.secret, "a-secret-of-twenty-chars");  // the newline is not part of it
  EXPECT_FALSE(c.one_host());
  EXPECT_EQ(c.nodes[1].model, "/models/deepseek-v4.1-flash");
  // Node a holds the router and rank 0, where the group forms; node b holds rank 1.
  const NodeRun a = plan_node(c, "a", false), b = plan_node(c, "b", false);
  EXPECT_TRUE(a.router);
  ASSERT_TRUE(a.engine && b.engine);
  EXPECT_TRUE(a.engine->group_member && b.engine->group_member);
  EXPECT_EQ(b.engine->rank, 1);
  EXPECT_EQ(b.engine->leader, "a");
  ASSERT_EQ(a.remote.size(), 1u);
  EXPECT_EQ(a.remote[0].node, "b");
}

TEST(ClusterConfig, AClusterAcrossHostsNeedsASecretUnlessInsecure) {
  const ClusterConfig c = parse_cluster_config(
      replace(kValid, "cluster-secret: 0123456789abcdef\n", ""), "c.yaml");
  EXPECT_TRUE(c.secret.empty());
  EXPECT_NE(error_of([&] { check_cluster_secret(c, false); }).find("cluster-secret"),
            std::string::npos);
  EXPECT_NO_THROW(check_cluster_secret(c, true));
  EXPECT_NO_THROW(check_cluster_secret(parse_cluster_config(kValid, "c.yaml"), false));
  EXPECT_NE(error_of([&] { plan_node(c, "a", false); }).find("cluster-secret"), std::string::npos);
}

TEST(ClusterConfig, ASingleNodeServeConfigIsNotAClusterFile) {
  EXPECT_FALSE(is_cluster_config(read(kExamples + "single-node.yaml")));
  EXPECT_FALSE(is_cluster_config("nodes: [unterminated"));
  EXPECT_FALSE(is_cluster_config("- nodes\n"));
  EXPECT_TRUE(is_cluster_config(kValid));
}

// P/D (docs/pd.md): the example's two instances carry their roles to their engines.
TEST(ClusterConfig, ThePdExampleHasAPrefillAndADecodeEngine) {
  const ClusterConfig c = load_cluster_config(kExamples + "pd-local.yaml");
  ASSERT_EQ(c.instances.size(), 2u);
  EXPECT_EQ(c.instances[0].role, InstanceRole::Prefill);
  EXPECT_EQ(c.instances[1].role, InstanceRole::Decode);
  EXPECT_EQ(c.serve.max_kv_loads_per_step, 4);
  const NodeRun prefill = plan_node(c, "prefill", false), decode = plan_node(c, "decode", false);
  ASSERT_TRUE(prefill.engine && decode.engine);
  EXPECT_EQ(prefill.engine->role, InstanceRole::Prefill);
  EXPECT_EQ(decode.engine->role, InstanceRole::Decode);
  EXPECT_EQ(plan_node(c, "router", false).remote.size(), 2u);  // the router dials both
}

// A decode instance whose ranks are processes of their own (an expert-parallel group over
// two nodes) beside a one-node prefill instance: each decode rank is a group member with
// the decode role, and the router dials all three engines.
TEST(ClusterConfig, ADecodeInstanceMaySpreadItsRanksOverNodes) {
  const std::string text =
      "cluster-secret: 0123456789abcdef\n"
      "nodes:\n"
      "  - {name: a, host: 10.0.0.1, port: 7100}\n"
      "  - {name: b, host: 10.0.0.2, port: 7100}\n"
      "  - {name: c, host: 10.0.0.3, port: 7100}\n"
      "router: {node: a, http-port: 8000, tcp-port: 8001}\n"
      "instances:\n"
      "  - {name: p, role: prefill, ranks: [a]}\n"
      "  - {name: d, role: decode, ranks: [b, c]}\n";
  const ClusterConfig c = parse_cluster_config(text, "c.yaml");
  for (int r = 0; r < 2; ++r) {
    const NodeRun run = plan_node(c, r == 0 ? "b" : "c", false);
    ASSERT_TRUE(run.engine);
    EXPECT_EQ(run.engine->role, InstanceRole::Decode);
    EXPECT_TRUE(run.engine->group_member);
    EXPECT_EQ(run.engine->rank, r);
    EXPECT_EQ(run.engine->leader, "b");
  }
  const NodeRun router = plan_node(c, "a", false);
  ASSERT_TRUE(router.engine);
  EXPECT_EQ(router.engine->role, InstanceRole::Prefill);
  EXPECT_EQ(router.remote.size(), 2u);
  // Without expert parallelism each decode rank is a decode engine of its own.
  const std::string plain =
      replace(text, "ranks: [b, c]}", "ranks: [b, c], enable-expert-parallel: false}");
  const std::vector<ClusterEngine> engines = cluster_engines(parse_cluster_config(plain, "c.yaml"));
  ASSERT_EQ(engines.size(), 3u);
  EXPECT_FALSE(engines[2].group_member);
  EXPECT_EQ(engines[2].role, InstanceRole::Decode);
}

struct BadFile {
  std::string from, to;  // the edit of kValid
  std::string message;   // what the error must contain
};

TEST(ClusterConfig, BadFilesAreRefusedNamingTheKeyAndLine) {
  const std::vector<BadFile> cases = {
      {"port: 7100}\n  - {name: b", "prot: 7100}\n  - {name: b",
       "c.yaml:3: unknown key 'prot' in a node (did you mean 'port'?)"},
      {"name: b,", "name: a,", "c.yaml:4: node 'a' is defined twice (first on line 3)"},
      {"ranks: [a, b]", "ranks: [a, c]", "c.yaml:7: instance 'i': rank 1's node 'c' is not in"},
      {"ranks: [a, b]", "ranks: []", "'ranks' expects a list of node names"},
      {"role: mixed", "role: prefill", "is a prefill instance, and no instance is a decode one"},
      {"role: mixed", "role: decode", "is a decode instance, and no instance is a prefill one"},
      {"role: mixed", "role: both", "role expects mixed, prefill or decode, got 'both'"},
      {"threads: 2", "threads: 0", "c.yaml:7: key 'threads' expects an integer in [1, 1024]"},
      {"node: a,", "node: z,", "c.yaml:5: the router's node 'z' is not in 'nodes'"},
      {"http-port: 8000", "http-port: 7100",
       "the router's http-port and node 'a' (line 3) both use 10.0.0.1:7100"},
      {"10.0.0.2, port: 7100", "10.0.0.1, port: 7100", "both use 10.0.0.1:7100"},
      {"port: 7100}\n  - {name: b", "port: 70000}\n  - {name: b",
       "c.yaml:3: key 'port' expects an integer in [1, 65535], got '70000'"},
      {"max-num-seqs: 16", "port: 9000", "c.yaml:9: key 'port' is the router's 'http-port'"},
      {"max-num-seqs: 16", "data-parallel-size: 2", "is set per instance"},
      {"max-num-seqs: 16", "max-num-seq: 16", "c.yaml:9: unknown key 'max-num-seq'"},
      {"max-num-seqs: 16", "max-num-seqs: lots", "c.yaml:9: key 'max-num-seqs' expects"},
      {"0123456789abcdef", "short", "c.yaml:1: the cluster secret must be at least 16"},
      {"cluster-secret: 0123456789abcdef", "cluster-secret: 0123456789abcdef\nrouters: {}",
       "c.yaml:2: unknown key 'routers' in the cluster file (did you mean 'router'?)"},
      {"ranks: [a, b]", "ranks: [a]", "c.yaml:4: node 'b' runs neither the router nor a rank"},
      {"host: 10.0.0.2", "host: \"has space\"", "host 'has space' must be a host name"},
      {"{name: a,", "{name: \"a/b\",", "node name 'a/b' must be 1-64 characters"},
      {"instances:\n  - {name: i, role: mixed, ranks: [a, b], threads: 2}\n",
       "instances: 3\n", "'instances' expects a list of maps"},
      {"router: {node: a, http-port: 8000, tcp-port: 8001}\n", "",
       "the cluster file needs 'router'"},
      {"threads: 2}", "threads: 2, num-redundant-experts: 2, enable-expert-parallel: false}",
       "num-redundant-experts needs enable-expert-parallel"},
  };
  for (const BadFile& b : cases) {
    const std::string text = replace(kValid, b.from, b.to);
    const std::string got = error_of([&] { parse_cluster_config(text, "c.yaml"); });
    EXPECT_NE(got.find(b.message), std::string::npos)
        << "edit '" << b.from << "' -> '" << b.to << "'\n  got: " << got
        << "\n want: " << b.message;
  }
  EXPECT_NE(error_of([] { parse_cluster_config("nodes: [", "c.yaml"); })
                .find("c.yaml:1:"),
            std::string::npos);
  EXPECT_NE(error_of([] { load_cluster_config("/nonexistent/cluster.yaml"); })
                .find("cannot be read"),
            std::string::npos);
}

TEST(ClusterConfig, ASecretFileMustBeShortAndReadable) {
  test::TempDir dir;
  const std::string big = dir.file("big");
  std::ofstream(big) << std::string(5000, 'x');
  const std::string with_file =
      replace(kValid, "cluster-secret: 0123456789abcdef", "cluster-secret-file: " + big);
  EXPECT_NE(error_of([&] { parse_cluster_config(with_file, "c.yaml"); })
                .find("holds more than 4096 bytes"),
            std::string::npos);
  const std::string missing =
      replace(kValid, "cluster-secret: 0123456789abcdef", "cluster-secret-file: /nonexistent");
  EXPECT_NE(error_of([&] { parse_cluster_config(missing, "c.yaml"); }).find("cannot be read"),
            std::string::npos);
  const std::string both = replace(kValid, "cluster-secret: 0123456789abcdef",
                                   "cluster-secret: 0123456789abcdef\ncluster-secret-file: " + big);
  EXPECT_NE(error_of([&] { parse_cluster_config(both, "c.yaml"); }).find("not both"),
            std::string::npos);
}

}  // namespace
}  // namespace troupe::config

// `troupe serve x.gguf` on R = 2 ranks (issue 15): --data-parallel-size 2 on a dense
// file (each rank the whole model, its own requests and KV, stepping on its own), and
// --enable-expert-parallel on a Mixtral-style file (the routed experts spread over the
// two ranks, lockstep steps with DP sync, redundant slots and live EPLB switches):
// concurrent completions get the greedy tokens of LlamaForward's own one-sequence run.
// A dense file with --enable-expert-parallel is refused at
// start-up, naming the flag and the file. The same Mixtral file as a cluster instance
// whose two expert-parallel ranks are processes of their own (the exchange over UCX,
// docs/cluster.md), behind a router: the same tokens.
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <thread>

#include "model/temp_dir.h"
#include "net/cluster_test_support.h"
#include "net/http_test_client.h"
#include "support/llama_greedy.h"
#include "support/llama_ref.h"
#include "support/prometheus_text.h"

namespace troupe::testing {
namespace {

using nlohmann::json;

// A q8_0 file with the abc test vocabulary (serve needs a tokenizer); experts = 0: dense.
std::string write_served_file(const std::string& name, int64_t experts, uint32_t seed) {
  static test::TempDir* dir = new test::TempDir;  // lives as long as the suites' daemons
  TinyLlamaSpec s;
  s.type = model::GgmlType::Q8_0;
  s.experts = experts, s.top_k = experts > 0 ? 2 : 0, s.seed = seed;
  s.vocab = 3 + 256 + int64_t(abc_pieces().size());
  s.context = 256;
  s.more_metadata = [](model::GgufWriter& w) { add_spm_test_vocabulary(w, abc_pieces()); };
  const std::string path = dir->file(name);
  write_tiny_llama(s, path);
  return path;
}

const std::string& dense_path() {
  static const std::string p = write_served_file("dense.gguf", 0, 61);
  return p;
}

const std::string& mixtral_path() {
  static const std::string p = write_served_file("mixtral.gguf", 8, 62);
  return p;
}

std::vector<std::string> args(const std::string& model, std::vector<std::string> more) {
  std::vector<std::string> a = {model, "--port", "0", "--tcp-port", "0", "--threads", "2",
                                "--max-num-batched-tokens", "32", "--data-parallel-size", "2"};
  a.insert(a.end(), more.begin(), more.end());
  return a;
}

// Six completions of token-id prompts (lengths 9, 22, ..., 74) at once: each answers 200
// with the reference's greedy tokens.
void concurrent_completions_are_the_references(uint16_t port, const std::string& model) {
  constexpr int kRequests = 6, kTokens = 12;
  std::vector<std::vector<int32_t>> prompts(kRequests);
  for (int i = 0; i < kRequests; ++i)
    for (int j = 0; j < 9 + 13 * i; ++j) prompts[i].push_back(3 + (j * 41 + i * 17) % 265);
  std::vector<HttpResponse> got(kRequests);
  std::vector<std::thread> clients;
  for (int i = 0; i < kRequests; ++i)
    clients.emplace_back([&, i] {
      got[i] = http(port, "POST", "/v1/completions",
                    json{{"prompt", prompts[i]}, {"max_tokens", kTokens}, {"temperature", 0},
                         {"ignore_eos", true}, {"return_token_ids", true}}
                        .dump());
    });
  for (std::thread& t : clients) t.join();
  for (int i = 0; i < kRequests; ++i) {
    ASSERT_EQ(got[i].status, 200) << got[i].body;
    EXPECT_EQ(json::parse(got[i].body)["choices"][0]["token_ids"].get<std::vector<int32_t>>(),
              llama_greedy(model, prompts[i], kTokens))
        << "request " << i;
  }
}

class ServeGgufDataParallel : public DaemonSuite<ServeGgufDataParallel> {
 public:
  static std::vector<std::string> daemon_args() { return args(dense_path(), {}); }
};

TEST_F(ServeGgufDataParallel, ConcurrentCompletionsGetTheOneRankTokens) {
  ASSERT_TRUE(daemon_->wait_output("2 ranks, each holding every expert")) << daemon_->output();
  concurrent_completions_are_the_references(port_, dense_path());
}

class ServeGgufExpertParallel : public DaemonSuite<ServeGgufExpertParallel> {
 public:
  static std::vector<std::string> daemon_args() {
    return args(mixtral_path(), {"--enable-expert-parallel", "--num-redundant-experts", "2",
                                 "--enable-eplb", "--eplb-config",
                                 R"({"window_size": 4, "step_interval": 3})"});
  }
};

TEST_F(ServeGgufExpertParallel, ConcurrentCompletionsGetTheOneRankTokens) {
  ASSERT_TRUE(daemon_->wait_output("expert parallel")) << daemon_->output();
  // Rounds until the placement has switched at least once (the planner plans every 3
  // steps; a round of six short requests may end before the switch is agreed), each
  // round with the reference's tokens.
  double rebalances = -1;  // -1: no series yet (none so far)
  for (int round = 0; round < 5 && rebalances < 1 && !HasFatalFailure(); ++round) {
    concurrent_completions_are_the_references(port_, mixtral_path());
    rebalances = series_with(http(port_, "GET", "/metrics").body, "troupe:eplb_rebalances_total", "");
  }
  EXPECT_GE(rebalances, 1) << daemon_->output();
}

TEST(ServeGgufRanks, ADenseFileWithExpertParallelIsRefusedNamingTheFile) {
  Daemon d(args(dense_path(), {"--enable-expert-parallel"}));
  EXPECT_EQ(d.wait_exit(std::chrono::seconds(60)), 2) << d.output();
  const std::string out = d.output();
  EXPECT_NE(out.find("enable-expert-parallel"), std::string::npos) << out;
  EXPECT_NE(out.find(dense_path()), std::string::npos) << out;
  EXPECT_NE(out.find("no routed experts"), std::string::npos) << out;
}

#ifdef TROUPE_HAVE_UCX
TEST(ServeGgufRanks, AMixtralInstanceWithItsRanksInTwoProcesses) {
  test::TempDir dir;
  const std::vector<uint16_t> ports = free_ports(3);
  auto node = [&](const char* name, uint16_t port) {
    return std::string("  - {name: ") + name + ", host: 127.0.0.1, port: " + std::to_string(port) + "}\n";
  };
  const std::string file = dir.file("cluster.yaml");
  std::ofstream(file) << "cluster-secret: test-cluster-secret-0123\nnodes:\n" + node("router", ports[0]) +
                             node("rank0", ports[1]) + node("rank1", ports[2]) +
                             "router: {node: router, http-port: 0, tcp-port: 0}\n"
                             "instances:\n  - {name: dep2, ranks: [rank0, rank1], threads: 1}\n"
                             "serve:\n  model: " + mixtral_path() + "\n  max-model-len: 256\n"
                             "  block-size: 16\n  kv-cache-memory-bytes: 16MiB\n  max-num-seqs: 8\n";
  auto start = [&](const char* name) {
    return std::make_unique<Daemon>(std::vector<std::string>{"--config", file, "--node", name});
  };
  auto rank1 = start("rank1");
  auto router = start("router");
  auto rank0 = start("rank0");
  const uint16_t port = router->port();
  ASSERT_NE(port, 0) << router->output();
  ASSERT_TRUE(router->wait_ready(port, 120s))
      << health_message(port) << rank0->output() << rank1->output();
  for (Daemon* d : {rank0.get(), rank1.get()})
    ASSERT_TRUE(d->wait_output("group formed; serving", 60s)) << d->output();
  concurrent_completions_are_the_references(port, mixtral_path());
  // Seen twice under TROUPE_CPU=avx2 (2026-12-07): 503 "no engine is up (2 of 2 engines
  // not up ...)" right after both ranks formed and the router was ready; the logs say why.
  if (HasFailure())
    ADD_FAILURE() << "router:\n"
                  << router->output() << "\nrank0:\n"
                  << rank0->output() << "\nrank1:\n"
                  << rank1->output();
}
#endif

}  // namespace
}  // namespace troupe::testing

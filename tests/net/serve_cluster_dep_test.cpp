// An expert-parallel instance whose two ranks are processes of their own (docs/cluster.md),
// beside a one-rank instance, behind a router: four `troupe serve --config FILE --node
// NAME` processes on loopback, started in an order that is not the file's. The group
// forms over UCX (each rank says which transport); completions get the greedy tokens of
// DEP-2 in one process (runtime::DepEngine) and of the plain Engine. Killing one rank
// process (SIGKILL) mid-stream ends the instance's stream with an error event, /health
// names the lost rank, new requests go to the other instance, and a restarted process
// rejoins its group without restarting the survivor.
#include <gtest/gtest.h>

#include <signal.h>

#include <chrono>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <thread>

#include "model/temp_dir.h"
#include "net/cluster_test_support.h"
#include "runtime/golden_engine_config.h"
#include "support/golden.h"
#include "support/prometheus_text.h"

namespace troupe::testing {
namespace {

using json = nlohmann::json;

std::string dep_cluster_yaml(const std::vector<uint16_t>& ports) {
  auto node = [&](const char* name, uint16_t port) {
    return std::string("  - {name: ") + name + ", host: 127.0.0.1, port: " + std::to_string(port) +
           "}\n";
  };
  return "cluster-secret: test-cluster-secret-0123\n"
         "nodes:\n" +
         node("router", ports[0]) + node("rank0", ports[1]) + node("rank1", ports[2]) +
         node("solo", ports[3]) +
         "router: {node: router, http-port: 0, tcp-port: 0}\n"
         "instances:\n"
         "  - {name: dep2, ranks: [rank0, rank1], threads: 1}\n"  // expert parallel: the default
         "  - {name: one, ranks: [solo], threads: 1}\n"
             + cluster_serve_section();
}

// The same cluster with DSpark drafting on every engine (the serve section's
// speculative-config): the dep2 group's draft experts are spread over its two processes as
// the target's are, and each step's draft exchange crosses them.
std::string speculative_dep_cluster_yaml(const std::vector<uint16_t>& ports) {
  return dep_cluster_yaml(ports) +
         "  speculative-config: '{\"method\": \"dspark\", \"num_speculative_tokens\": 3}'\n";
}

std::vector<int32_t> dep2_greedy(const std::vector<int32_t>& prompt, int64_t n) {
  return runtime::dep_engine_greedy(*golden_model().forward, 2, prompt, n);
}

std::vector<int32_t> token_ids(const HttpResponse& r) {
  return json::parse(r.body)["choices"][0]["token_ids"].get<std::vector<int32_t>>();
}

// Six prompts of 9, 20, ..., 64 tokens from seeds seed .. seed + 5.
std::vector<std::vector<int32_t>> six_prompts(uint32_t seed) {
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < 6; ++i) prompts.push_back(random_tokens(9 + 11 * i, seed + uint32_t(i)));
  return prompts;
}

// Greedy completions of n tokens for every prompt at once, the answers in prompt order.
std::vector<HttpResponse> complete_concurrently(uint16_t port, const std::vector<std::vector<int32_t>>& prompts,
                                                int n) {
  std::vector<HttpResponse> responses(prompts.size());
  std::vector<std::thread> clients;
  for (size_t i = 0; i < prompts.size(); ++i)
    clients.emplace_back([&, i] {
      responses[i] = http(port, "POST", "/v1/completions", completion(prompts[i], n, false).dump());
    });
  for (auto& t : clients) t.join();
  return responses;
}

TEST(ServeClusterDep, AnExpertParallelInstanceWithItsRanksInTwoProcesses) {
  test::TempDir dir;
  const std::string file = dir.file("cluster.yaml");
  std::ofstream(file) << dep_cluster_yaml(free_ports(4));
  auto node = [&](const char* name) {
    return std::make_unique<Daemon>(std::vector<std::string>{"--config", file, "--node", name});
  };
  // Any order: rank 1 before its leader, the router in between.
  auto rank1 = node("rank1");
  auto router = node("router");
  const uint16_t port = router->port();
  ASSERT_NE(port, 0) << router->output();
  auto solo = node("solo");
  auto rank0 = node("rank0");
  ASSERT_TRUE(router->wait_ready(port, 120s))
      << health_message(port) << rank0->output() << rank1->output();
  for (Daemon* d : {rank0.get(), rank1.get()}) {
    EXPECT_TRUE(d->wait_output("UCX transports rank [01]: \\S+", 30s)) << d->output();
    EXPECT_TRUE(d->wait_output("group formed; serving", 30s)) << d->output();
  }

  // Concurrent completions spread over the three engines: DEP-2's tokens everywhere.
  const std::vector<std::vector<int32_t>> prompts = six_prompts(900);
  const std::vector<HttpResponse> responses = complete_concurrently(port, prompts, 14);
  for (size_t i = 0; i < prompts.size(); ++i) {
    ASSERT_EQ(responses[i].status, 200) << responses[i].body;
    const std::vector<int32_t> want = dep2_greedy(prompts[i], 14);
    EXPECT_EQ(token_ids(responses[i]), want) << "request " << i;
    EXPECT_EQ(want, runtime::engine_greedy(*golden_model().forward, prompts[i], 14));
  }

  // A long stream on the instance (the first engine, idle: rank 0 takes it), then rank 1's
  // process dies: rank 0's step fails, the stream ends with an error event.
  const std::vector<int32_t> long_prompt = random_tokens(24, 990);
  Stream s(port, completion(long_prompt, 480, true));
  ASSERT_TRUE(s.first_event());
  ASSERT_EQ(kill(rank1->pid(), SIGKILL), 0);
  const StreamOutcome lost = stream_outcome(s.events());
  EXPECT_TRUE(lost.done);
  EXPECT_NE(lost.error, "") << "the stream ended without an error event";
  EXPECT_LT(lost.tokens.size(), 480u);
  const std::vector<int32_t> full = dep2_greedy(long_prompt, 480);
  ASSERT_LE(lost.tokens.size(), full.size());
  EXPECT_TRUE(std::equal(lost.tokens.begin(), lost.tokens.end(), full.begin()))
      << "the tokens before the failure are DEP-2's";
  EXPECT_TRUE(wait_health(port, "1 of 3 engines not up: instance dep2 rank 1", 10s))
      << health_message(port);
  EXPECT_TRUE(rank0->wait_output("another rank of instance 'dep2' went away", 10s)) << rank0->output();

  // The other instance serves on; the survivor gets nothing new while its group is broken.
  for (int i = 0; i < 3; ++i) {
    const HttpResponse r = http(port, "POST", "/v1/completions", completion(prompts[i], 14, false).dump());
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(token_ids(r), dep2_greedy(prompts[i], 14));
  }

  // The restarted process rejoins; rank 0's process was never restarted.
  const pid_t survivor = rank0->pid();
  rank1 = node("rank1");
  ASSERT_TRUE(router->wait_ready(port, 120s)) << health_message(port) << rank1->output();
  ASSERT_TRUE(rank1->wait_output("group formed; serving", 60s)) << rank1->output();
  EXPECT_EQ(kill(survivor, 0), 0);
  Stream again(port, completion(long_prompt, 120, true));  // the first engine again: dep2
  const StreamOutcome back = stream_outcome(again.events());
  EXPECT_EQ(back.error, "");
  EXPECT_EQ(back.tokens, dep2_greedy(long_prompt, 120));
  EXPECT_NE(rank0->output().find("group 2 has every rank"), std::string::npos) << rank0->output();
  for (Daemon* d : {rank0.get(), rank1.get(), solo.get(), router.get()})
    EXPECT_EQ(d->stop(SIGTERM), 0) << d->output();
}

// Speculative decoding across rank processes (issue 13; docs/dspark.md said no test ran
// it): the group forms, every step drafts k = 3 for each running request (the random
// tiny draft accepts none), and greedy completions on either instance still get DEP-2's
// tokens, which are the plain Engine's.
TEST(ServeClusterDep, ASpeculativeExpertParallelInstanceWithItsRanksInTwoProcesses) {
  test::TempDir dir;
  const std::string file = dir.file("cluster.yaml");
  std::ofstream(file) << speculative_dep_cluster_yaml(free_ports(4));
  auto node = [&](const char* name) {
    return std::make_unique<Daemon>(std::vector<std::string>{"--config", file, "--node", name});
  };
  auto router = node("router");
  const uint16_t port = router->port();
  ASSERT_NE(port, 0) << router->output();
  auto rank0 = node("rank0");
  auto rank1 = node("rank1");
  auto solo = node("solo");
  ASSERT_TRUE(router->wait_ready(port, 120s))
      << health_message(port) << rank0->output() << rank1->output() << solo->output();
  for (Daemon* d : {rank0.get(), rank1.get()})
    EXPECT_TRUE(d->wait_output("group formed; serving", 30s)) << d->output();

  const std::vector<std::vector<int32_t>> prompts = six_prompts(930);
  const std::vector<HttpResponse> responses = complete_concurrently(port, prompts, 14);
  for (size_t i = 0; i < prompts.size(); ++i) {
    ASSERT_EQ(responses[i].status, 200) << responses[i].body << rank0->output() << rank1->output();
    EXPECT_EQ(token_ids(responses[i]), dep2_greedy(prompts[i], 14)) << "request " << i;
  }
  // A long stream on the group (the first engine), to run many speculative steps there.
  const std::vector<int32_t> long_prompt = random_tokens(24, 991);
  const HttpResponse one = http(port, "POST", "/v1/completions", completion(long_prompt, 60, false).dump());
  ASSERT_EQ(one.status, 200) << one.body;
  EXPECT_EQ(token_ids(one), dep2_greedy(long_prompt, 60));
  // Every engine drafted at each decode step of each request but its last (one token
  // left: nothing to draft), the group's ranks included: n - 2 drafts for n tokens.
  const std::string m = http(port, "GET", "/metrics").body;
  double want = 60 - 2;
  for (size_t i = 0; i < prompts.size(); ++i) want += 14 - 2;
  EXPECT_EQ(prometheus_value(m, "troupe:spec_decode_num_drafts_total"), want) << m;
  EXPECT_GT(prometheus_value(m, "troupe:spec_decode_num_draft_tokens_total"), want) << m;
  EXPECT_EQ(prometheus_value(m, "troupe:spec_decode_num_accepted_tokens_total"), 0) << m;
  for (Daemon* d : {rank0.get(), rank1.get(), solo.get(), router.get()})
    EXPECT_EQ(d->stop(SIGTERM), 0) << d->output();
}

}  // namespace
}  // namespace troupe::testing

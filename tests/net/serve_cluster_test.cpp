// A cluster on loopback (docs/cluster.md): `troupe serve --config FILE --node NAME` for a
// router and two rank processes of one data-parallel instance without expert
// parallelism, started router first. /health names the missing ranks until both joined;
// completions through the router get the plain one-rank Engine's greedy tokens; a rank
// killed with SIGKILL mid-stream ends its stream with an error event while the other
// rank's stream completes, /health names it, new requests go to the other rank, and a
// restarted process rejoins.
#include <gtest/gtest.h>

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <thread>

#include "model/temp_dir.h"
#include "net/cluster_test_support.h"
#include "net/http_test_client.h"
#include "runtime/golden_engine_config.h"
#include "support/golden.h"
#include "support/run_troupe.h"

namespace troupe::testing {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;

std::string cluster_yaml(uint16_t router, uint16_t rank0, uint16_t rank1) {
  return "cluster-secret: test-cluster-secret-0123\n"
         "nodes:\n"
         "  - {name: router, host: 127.0.0.1, port: " + std::to_string(router) + "}\n"
         "  - {name: rank0, host: 127.0.0.1, port: " + std::to_string(rank0) + "}\n"
         "  - {name: rank1, host: 127.0.0.1, port: " + std::to_string(rank1) + "}\n"
         "router: {node: router, http-port: 0, tcp-port: 0}\n"
         "instances:\n"
         "  - {name: dp2, ranks: [rank0, rank1], enable-expert-parallel: false, threads: 1}\n"
             + cluster_serve_section();
}

std::vector<int32_t> plain_greedy(const std::vector<int32_t>& prompt, int64_t n) {
  return runtime::engine_greedy(*golden_model().forward, prompt, n);
}

TEST(ServeCluster, RanksInProcessesOfTheirOwnServeJoinAndRejoin) {
  test::TempDir dir;
  const std::string file = dir.file("cluster.yaml");
  const std::vector<uint16_t> ports = free_ports(3);
  const uint16_t rank0_port = ports[1];
  std::ofstream(file) << cluster_yaml(ports[0], ports[1], ports[2]);
  auto node = [&](const char* name) {
    return std::make_unique<Daemon>(std::vector<std::string>{"--config", file, "--node", name});
  };

  // The router first: it serves /health at once and names what is missing.
  auto router = node("router");
  const uint16_t port = router->port();
  ASSERT_NE(port, 0) << router->output();
  ASSERT_TRUE(wait_health(port, "2 of 2 engines not up", 60s)) << router->output();
  EXPECT_NE(health_message(port).find("instance dp2 rank 1 on node rank1"), std::string::npos);
  auto rank0 = node("rank0");
  auto rank1 = node("rank1");
  ASSERT_TRUE(router->wait_ready(port, 120s)) << router->output() << rank0->output()
                                              << rank1->output();

  // troupe cluster status dials each engine node and asks for its figures.
  const RunResult up = run_troupe("cluster status --config " + file);
  EXPECT_EQ(up.status, 0) << up.out;
  EXPECT_NE(up.out.find("instance dp2 rank 0 on node rank0 (127.0.0.1:"), std::string::npos) << up.out;
  EXPECT_NE(up.out.find(")  up: 0 running, 0 waiting"), std::string::npos) << up.out;

  // Concurrent completions: the plain Engine's tokens, whichever rank ran them.
  const int kRequests = 4;
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < kRequests; ++i) prompts.push_back(random_tokens(10 + 13 * i, 700 + i));
  std::vector<HttpResponse> responses(kRequests);
  std::vector<std::thread> clients;
  for (int i = 0; i < kRequests; ++i)
    clients.emplace_back([&, i] {
      responses[i] = http(port, "POST", "/v1/completions", completion(prompts[i], 12, false).dump());
    });
  for (auto& t : clients) t.join();
  for (int i = 0; i < kRequests; ++i) {
    ASSERT_EQ(responses[i].status, 200) << responses[i].body;
    EXPECT_EQ(json::parse(responses[i].body)["choices"][0]["token_ids"].get<std::vector<int32_t>>(),
              plain_greedy(prompts[i], 12))
        << "request " << i;
  }

  // Two long streams: the first goes to rank 0, the second (rank 0 busy) to rank 1.
  const std::vector<int32_t> p0 = random_tokens(20, 801), p1 = random_tokens(20, 802);
  Stream a(port, completion(p0, 450, true));
  ASSERT_TRUE(a.first_event());
  Stream b(port, completion(p1, 450, true));
  ASSERT_TRUE(b.first_event());
  ASSERT_EQ(kill(rank0->pid(), SIGKILL), 0);
  const std::vector<std::string> ea = a.events(), eb = b.events();
  ASSERT_FALSE(ea.empty());
  std::string a_error;  // the error event (an error stream ends with it, then [DONE])
  for (const std::string& e : ea)
    if (e.find("\"error\"") != std::string::npos) a_error = e;
  EXPECT_NE(a_error.find("instance dp2 rank 0 on node rank0 (127.0.0.1:"), std::string::npos)
      << ea.back();
  EXPECT_NE(a_error.find("went away"), std::string::npos) << a_error;
  ASSERT_GE(eb.size(), 2u);
  EXPECT_EQ(eb.back(), "[DONE]");
  std::vector<int32_t> got;
  for (const std::string& e : eb)
    if (e != "[DONE]") {
      const json chunk = json::parse(e);  // a named value: the loop reads into it
      for (const auto& t : chunk["choices"][0]["token_ids"]) got.push_back(t.get<int32_t>());
    }
  EXPECT_EQ(got, plain_greedy(p1, 450)) << eb.front() << "\n" << eb[eb.size() / 2];

  // The router names the lost rank and serves on with the other.
  EXPECT_TRUE(wait_health(port, "1 of 2 engines not up: instance dp2 rank 0", 10s))
      << health_message(port);
  const RunResult lost = run_troupe("cluster status --config " + file);
  EXPECT_EQ(lost.status, 1) << lost.out;
  EXPECT_NE(lost.out.find("on node rank0 (127.0.0.1:" + std::to_string(rank0_port) + ")  unreachable"),
            std::string::npos)
      << lost.out;
  const HttpResponse after = http(port, "POST", "/v1/completions", completion(prompts[0], 12, false).dump());
  ASSERT_EQ(after.status, 200) << after.body;
  EXPECT_EQ(json::parse(after.body)["choices"][0]["token_ids"].get<std::vector<int32_t>>(),
            plain_greedy(prompts[0], 12));

  // A restarted rank process rejoins; nothing else restarted.
  rank0 = node("rank0");
  EXPECT_TRUE(router->wait_ready(port, 120s)) << health_message(port) << rank0->output();
  std::vector<HttpResponse> again(2);
  std::vector<std::thread> more;
  for (int i = 0; i < 2; ++i)
    more.emplace_back([&, i] {
      again[i] = http(port, "POST", "/v1/completions", completion(prompts[i + 1], 12, false).dump());
    });
  for (auto& t : more) t.join();
  for (int i = 0; i < 2; ++i) {
    ASSERT_EQ(again[i].status, 200) << again[i].body;
    EXPECT_EQ(json::parse(again[i].body)["choices"][0]["token_ids"].get<std::vector<int32_t>>(),
              plain_greedy(prompts[i + 1], 12));
  }
  EXPECT_NE(router->output().find("instance dp2 rank 0 on node rank0"), std::string::npos);
  for (auto* d : {rank0.get(), rank1.get(), router.get()}) EXPECT_EQ(d->stop(SIGTERM), 0) << d->output();
}

TEST(ServeCluster, ANodeThatCannotRunYetSaysWhy) {
  test::TempDir dir;
  const std::string file = dir.file("cluster.yaml");
  const std::vector<uint16_t> ports = free_ports(3);
  std::string text = cluster_yaml(ports[0], ports[1], ports[2]);
  text.replace(text.find("serve:\n"), 0, "  - {name: two, ranks: [rank0], threads: 1}\n");
  std::ofstream(file) << text;
  Daemon d({"--config", file, "--node", "rank0"});
  EXPECT_NE(d.wait_exit(60s), 0);
  EXPECT_NE(d.output().find("one engine per process so far"), std::string::npos) << d.output();
  Daemon stranger({"--config", file, "--node", "rank9"});
  EXPECT_NE(stranger.wait_exit(60s), 0);
  EXPECT_NE(stranger.output().find("--node 'rank9' is not a node of"), std::string::npos)
      << stranger.output();
}

// A rank whose control port another process holds exits 2 naming the port. It used to
// hang: the error was thrown with its engine running, and the actor system's destructor
// waited for the engine forever (SIGTERM unheard, the error unsaid).
TEST(ServeCluster, ARankWhoseControlPortIsTakenExitsSayingSo) {
  test::TempDir dir;
  const std::string file = dir.file("cluster.yaml");
  const std::vector<uint16_t> ports = free_ports(3);
  std::ofstream(file) << cluster_yaml(ports[0], ports[1], ports[2]);
  const int holder = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(ports[2]);
  ASSERT_EQ(bind(holder, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(listen(holder, 1), 0);
  Daemon rank1({"--config", file, "--node", "rank1"});
  EXPECT_EQ(rank1.wait_exit(60s), 2) << rank1.output();
  close(holder);
  EXPECT_NE(rank1.output().find("node 'rank1': cannot listen on its control port 127.0.0.1:" +
                                std::to_string(ports[2])),
            std::string::npos)
      << rank1.output();
}

}  // namespace
}  // namespace troupe::testing

// P/D disaggregation on loopback (issue 12, docs/pd.md): `troupe serve --config FILE
// --node NAME` for a router, a prefill instance and a decode instance (the shape of
// config/examples/pd-local.yaml). Concurrent completions, streamed and not, get the plain
// one-rank Engine's greedy tokens: the first token from the prefill process, the rest
// from the decode process after the KV moved between them (over the control ports). A
// completion of one token never moves. With two decode instances (1P2D) a move that fails
// falls back: one decode process killed while the hand-off to it is pending (it stalls on
// it, an injected fault), and the request ends with the same tokens, recomputed by the
// other decode process. A decode instance whose two ranks are processes of their own
// (DEP-2 over UCX) takes hand-offs and drained requests like a one-process one, and a
// prefill instance of two rank processes hands off from either rank.
#include <gtest/gtest.h>

#include <atomic>
#include <csignal>
#include <functional>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <thread>

#include "model/temp_dir.h"
#include "net/cluster_test_support.h"
#include "net/http_test_client.h"
#include "runtime/golden_engine_config.h"
#include "support/golden.h"
#include "support/prometheus_text.h"
#include "support/run_troupe.h"

namespace troupe::testing {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;

std::string pd_yaml(uint16_t router, uint16_t prefill, uint16_t decode) {
  return "cluster-secret: test-cluster-secret-0123\n"
         "nodes:\n"
         "  - {name: router, host: 127.0.0.1, port: " + std::to_string(router) + "}\n"
         "  - {name: prefill, host: 127.0.0.1, port: " + std::to_string(prefill) + "}\n"
         "  - {name: decode, host: 127.0.0.1, port: " + std::to_string(decode) + "}\n"
         "router: {node: router, http-port: 0, tcp-port: 0}\n"
         "instances:\n"
         "  - {name: p, role: prefill, ranks: [prefill], threads: 1}\n"
         "  - {name: d, role: decode, ranks: [decode], threads: 1}\n"
             + cluster_serve_section();
}

// `troupe cluster status`'s line of one engine ("" when absent).
std::string status_line(const std::string& file, const std::string& engine) {
  const RunResult status = run_troupe("cluster status --config " + file);
  const size_t at = status.out.find(engine);
  return at == std::string::npos ? std::string()
                                 : status.out.substr(at, status.out.find('\n', at) - at);
}

constexpr const char* kIdle = "up: 0 running, 0 waiting, KV 0.0%, ";

// status_line once it holds `want`, or its last line after 10 s: an engine may free blocks
// a moment after the client has its last token (a prefill engine releases a handed-off
// request's blocks when the answer to its move reaches it), so one look can come early.
std::string status_line_once(const std::string& file, const std::string& engine,
                             const std::string& want = kIdle) {
  std::string line;
  for (int i = 0; i < 100; ++i) {
    line = status_line(file, engine);
    if (line.find(want) != std::string::npos) break;
    std::this_thread::sleep_for(100ms);
  }
  return line;
}

// The count before " tokens computed" in a status line; -1: none.
int64_t tokens_computed(const std::string& line) {
  const size_t end = line.find(" tokens computed");
  if (end == std::string::npos) return -1;
  const size_t begin = line.rfind(", ", end) + 2;
  return std::stoll(line.substr(begin, end - begin));
}

std::vector<int32_t> tokens_of(const json& body) {
  return body["choices"][0]["token_ids"].get<std::vector<int32_t>>();
}

std::string one_p_two_d_yaml(const std::vector<uint16_t>& ports) {
  return "cluster-secret: test-cluster-secret-0123\n"
         "nodes:\n"
         "  - {name: router, host: 127.0.0.1, port: " + std::to_string(ports[0]) + "}\n"
         "  - {name: prefill, host: 127.0.0.1, port: " + std::to_string(ports[1]) + "}\n"
         "  - {name: decode1, host: 127.0.0.1, port: " + std::to_string(ports[2]) + "}\n"
         "  - {name: decode2, host: 127.0.0.1, port: " + std::to_string(ports[3]) + "}\n"
         "router: {node: router, http-port: 0, tcp-port: 0}\n"
         "instances:\n"
         "  - {name: p, role: prefill, ranks: [prefill], threads: 1}\n"
         "  - {name: d1, role: decode, ranks: [decode1], threads: 1}\n"
         "  - {name: d2, role: decode, ranks: [decode2], threads: 1}\n"
             + cluster_serve_section();
}

TEST(ServeClusterPd, ADecodeProcessKilledMidTransferFallsBackToTheOther) {
  test::TempDir dir;
  const std::string file = dir.file("pd2.yaml");
  std::ofstream(file) << one_p_two_d_yaml(free_ports(4));
  auto node = [&](const char* name, std::vector<std::string> wrapper = {}) {
    return std::make_unique<Daemon>(std::vector<std::string>{"--config", file, "--node", name},
                                    wrapper);
  };
  auto router = node("router");
  auto prefill = node("prefill");
  // decode1 is the first choice (the lower slot); it sleeps on the first hand-off it gets.
  auto decode1 = node("decode1", {"env", "TROUPE_INJECT_FAULTS=kv-import-stall@1:30000"});
  auto decode2 = node("decode2");
  const uint16_t port = router->port();
  ASSERT_NE(port, 0) << router->output();
  ASSERT_TRUE(router->wait_ready(port, 120s)) << router->output() << prefill->output()
                                              << decode1->output() << decode2->output();
  const std::vector<int32_t> prompt = random_tokens(41, 950);
  HttpResponse response;
  std::thread client([&] {
    response = http(port, "POST", "/v1/completions", completion(prompt, 8, false).dump());
  });
  const bool stalled = decode1->wait_output("injected fault kv-import-stall", 60s);
  decode1->stop(SIGKILL);
  client.join();
  ASSERT_TRUE(stalled) << decode1->output();
  ASSERT_EQ(response.status, 200) << response.body << router->output() << prefill->output()
                                  << decode2->output();
  const json got = json::parse(response.body);
  EXPECT_EQ(tokens_of(got), runtime::engine_greedy(*golden_model().forward, prompt, 8));
  EXPECT_EQ(got["usage"]["completion_tokens"], 8);
  EXPECT_NE(router->output().find("recomputes it"), std::string::npos) << router->output();

  // The counts on the router's /metrics: one failed transfer (the receiver gone, or its
  // lease out, whichever the prefill side saw first), one recompute.
  std::string metrics = http(port, "GET", "/metrics").body;
  auto value = [&](const std::string& series) {  // the first sample of the series; -1: none
    const size_t at = metrics.find(series);
    return at == std::string::npos ? -1.0 : std::stod(metrics.substr(metrics.find(' ', at) + 1));
  };
  EXPECT_EQ(value("troupe:kv_transfer_fallbacks_total{"), 1.0) << metrics;
  EXPECT_EQ(value("troupe:kv_transfer_failures_total{cause=\"receiver_down\"") +
                value("troupe:kv_transfer_failures_total{cause=\"timeout\""),
            1.0)
      << metrics;

  // The next request goes to decode2 alone, with its KV; the prefill side holds nothing.
  const HttpResponse next =
      http(port, "POST", "/v1/completions", completion(prompt, 5, false).dump());
  ASSERT_EQ(next.status, 200) << next.body;
  EXPECT_EQ(tokens_of(json::parse(next.body)),
            runtime::engine_greedy(*golden_model().forward, prompt, 5));
  metrics = http(port, "GET", "/metrics").body;
  EXPECT_GT(value("troupe:kv_transfer_bytes_total{"), 0.0) << metrics;
  EXPECT_NE(metrics.find("troupe:kv_transfer_seconds_count{"), std::string::npos) << metrics;
  EXPECT_GT(value("troupe:kv_transfer_seconds_count{"), 0.0) << metrics;
}

// `troupe drain` while a long completion decodes on decode1: it goes on on decode2 with
// its KV (no recompute), the client gets the undisturbed run's tokens, decode1 ends with
// nothing held and takes nothing new.
TEST(ServeClusterPd, DrainMovesADecodingRequestToTheOtherDecodeInstance) {
  test::TempDir dir;
  const std::string file = dir.file("pd2.yaml");
  std::ofstream(file) << one_p_two_d_yaml(free_ports(4));
  auto node = [&](const char* name) {
    return std::make_unique<Daemon>(std::vector<std::string>{"--config", file, "--node", name});
  };
  auto router = node("router");
  auto prefill = node("prefill");
  auto decode1 = node("decode1");
  auto decode2 = node("decode2");
  const uint16_t port = router->port();
  ASSERT_NE(port, 0) << router->output();
  ASSERT_TRUE(router->wait_ready(port, 120s)) << router->output();
  const std::vector<int32_t> prompt = random_tokens(23, 960);
  const int n = 400;
  Stream stream(port, completion(prompt, n, /*stream=*/true));
  // Some tokens first (the prefill side's, then decode1's), then the drain.
  ASSERT_TRUE(stream.wait_events(6));
  const RunResult drained = run_troupe("drain --config " + file + " --instance d1 --url http://127.0.0.1:" +
                                       std::to_string(port));
  EXPECT_EQ(drained.status, 0) << drained.out;
  EXPECT_NE(drained.out.find(R"("object":"drain")"), std::string::npos) << drained.out;
  const StreamOutcome out = stream_outcome(stream.events());
  EXPECT_TRUE(out.done);
  EXPECT_TRUE(out.error.empty()) << out.error;
  EXPECT_EQ(out.tokens, runtime::engine_greedy(*golden_model().forward, prompt, n));
  EXPECT_TRUE(router->wait_output("went on on instance d2", 10s)) << router->output();

  // decode1 holds nothing and steps no more; the next request decodes on decode2.
  const HttpResponse next = http(port, "POST", "/v1/completions", completion(prompt, 4, false).dump());
  ASSERT_EQ(next.status, 200) << next.body;
  const std::string line = status_line_once(file, "instance d1 on node decode1");
  EXPECT_NE(line.find(kIdle), std::string::npos) << line;
  // Refused: an instance the file does not have (a usage error, 2); the last decode
  // instance up (the router says no, 1).
  const RunResult unknown = run_troupe("drain --config " + file + " --instance zz --url http://127.0.0.1:" +
                                       std::to_string(port));
  EXPECT_EQ(unknown.status, 2) << unknown.out;
  EXPECT_NE(unknown.out.find("no instance 'zz'"), std::string::npos) << unknown.out;
  const RunResult last = run_troupe("drain --config " + file + " --instance d2 --url http://127.0.0.1:" +
                                    std::to_string(port));
  EXPECT_EQ(last.status, 1) << last.out;
  EXPECT_NE(last.out.find("no other decode instance"), std::string::npos) << last.out;
}

// The prefill process killed after its push started (the decode side stalls on it, an
// injected fault): the router has the decode side recompute the request from the tokens
// its HandedOff event brought, so the client still gets the plain engine's tokens; the
// hand-off the decode side takes late is aborted there and everything is freed.
TEST(ServeClusterPd, APrefillProcessKilledMidTransferIsRecomputedOnTheDecodeSide) {
  test::TempDir dir;
  const std::string file = dir.file("pd.yaml");
  const std::vector<uint16_t> ports = free_ports(3);
  std::ofstream(file) << pd_yaml(ports[0], ports[1], ports[2]);
  auto router = std::make_unique<Daemon>(std::vector<std::string>{"--config", file, "--node", "router"});
  auto prefill = std::make_unique<Daemon>(std::vector<std::string>{"--config", file, "--node", "prefill"});
  auto decode = std::make_unique<Daemon>(std::vector<std::string>{"--config", file, "--node", "decode"},
                                         std::vector<std::string>{"env", "TROUPE_INJECT_FAULTS=kv-import-stall@1:3000"});
  const uint16_t port = router->port();
  ASSERT_NE(port, 0) << router->output();
  ASSERT_TRUE(router->wait_ready(port, 120s)) << router->output();
  // The move can also fail before the decode side takes it (on a loaded machine the
  // agent's put or the lease may run out first); the router then recomputes it there and
  // the fault, armed for the first import, has not fired. That request must still get the
  // plain engine's tokens, and the test asks again with a new prompt (at most 3 times).
  bool stalled = false;
  HttpResponse response;
  std::vector<int32_t> prompt;
  for (int attempt = 0; attempt < 3 && !stalled; ++attempt) {
    prompt = random_tokens(30, 970 + attempt);
    std::atomic<bool> answered{false};
    std::thread client([&] {
      response = http(port, "POST", "/v1/completions", completion(prompt, 6, false).dump());
      answered = true;
    });
    for (int s = 0; s < 60 && !answered && !stalled; ++s)
      stalled = decode->wait_output("injected fault kv-import-stall", 1s);
    stalled = stalled || decode->wait_output("injected fault kv-import-stall", 0s);
    if (stalled) prefill->stop(SIGKILL);
    client.join();
    if (!stalled) {
      ASSERT_EQ(response.status, 200) << response.body << router->output() << prefill->output();
      EXPECT_EQ(tokens_of(json::parse(response.body)),
                runtime::engine_greedy(*golden_model().forward, prompt, 6));
    }
  }
  ASSERT_TRUE(stalled) << decode->output() << router->output() << prefill->output();
  ASSERT_EQ(response.status, 200) << response.body << router->output();
  EXPECT_EQ(tokens_of(json::parse(response.body)),
            runtime::engine_greedy(*golden_model().forward, prompt, 6));
  EXPECT_NE(router->output().find("recomputes it"), std::string::npos) << router->output();
  // The decode side wakes after 3 s, takes the hand-off, then the router's abort.
  bool freed = false;
  std::string line;
  for (int i = 0; i < 100 && !freed; ++i) {
    std::this_thread::sleep_for(100ms);
    const RunResult status = run_troupe("cluster status --config " + file);
    const size_t at = status.out.find("instance d on node decode");
    if (at == std::string::npos) continue;
    line = status.out.substr(at, status.out.find('\n', at) - at);
    freed = line.find(kIdle) != std::string::npos &&
            decode->output().find("injected fault kv-import-stall") != std::string::npos &&
            i >= 35;  // past the stall
  }
  EXPECT_TRUE(freed) << line << decode->output();
}

TEST(ServeClusterPd, RequestsPrefillOnOneInstanceAndDecodeOnTheOther) {
  test::TempDir dir;
  const std::string file = dir.file("pd.yaml");
  const std::vector<uint16_t> ports = free_ports(3);
  std::ofstream(file) << pd_yaml(ports[0], ports[1], ports[2]);
  auto node = [&](const char* name) {
    return std::make_unique<Daemon>(std::vector<std::string>{"--config", file, "--node", name});
  };
  auto router = node("router");
  auto prefill = node("prefill");
  auto decode = node("decode");
  const uint16_t port = router->port();
  ASSERT_NE(port, 0) << router->output();
  ASSERT_TRUE(router->wait_ready(port, 120s)) << router->output() << prefill->output()
                                              << decode->output();

  const int kRequests = 4;
  std::vector<std::vector<int32_t>> prompts;
  std::vector<int> lengths;
  for (int i = 0; i < kRequests; ++i) {
    prompts.push_back(random_tokens(9 + 29 * i, 900 + i));
    lengths.push_back(6 + i);
  }
  std::vector<HttpResponse> responses(kRequests);
  std::vector<std::thread> clients;
  for (int i = 0; i < kRequests; ++i)
    clients.emplace_back([&, i] {
      responses[size_t(i)] = http(port, "POST", "/v1/completions",
                                  completion(prompts[size_t(i)], lengths[size_t(i)], false).dump());
    });
  for (auto& t : clients) t.join();
  for (int i = 0; i < kRequests; ++i) {
    ASSERT_EQ(responses[size_t(i)].status, 200) << responses[size_t(i)].body << router->output()
                                                << prefill->output() << decode->output();
    const json got = json::parse(responses[size_t(i)].body);
    EXPECT_EQ(tokens_of(got), runtime::engine_greedy(*golden_model().forward, prompts[size_t(i)],
                                                     lengths[size_t(i)]))
        << "request " << i;
    EXPECT_EQ(got["choices"][0]["finish_reason"], "length");
    EXPECT_EQ(got["usage"]["completion_tokens"], lengths[size_t(i)]);
  }

  // Streamed: one stream, whichever process sent each token.
  {
    Stream stream(port, completion(prompts[1], 7, /*stream=*/true));
    const StreamOutcome out = stream_outcome(stream.events());
    EXPECT_TRUE(out.done);
    EXPECT_TRUE(out.error.empty()) << out.error;
    EXPECT_EQ(out.tokens, runtime::engine_greedy(*golden_model().forward, prompts[1], 7));
  }

  // n = 2: both choices prefilled once on the prefill side, each moved on its own.
  {
    nlohmann::json body = completion(prompts[2], 6, false);
    body["n"] = 2;
    const HttpResponse r = http(port, "POST", "/v1/completions", body.dump());
    ASSERT_EQ(r.status, 200) << r.body;
    const json got = json::parse(r.body);
    ASSERT_EQ(got["choices"].size(), 2u) << r.body;
    for (const json& c : got["choices"])
      EXPECT_EQ(c["token_ids"].get<std::vector<int32_t>>(),
                runtime::engine_greedy(*golden_model().forward, prompts[2], 6));
    EXPECT_EQ(got["usage"]["completion_tokens"], 12);
  }

  // One token: the prefill instance finishes it; nothing moves.
  const HttpResponse single =
      http(port, "POST", "/v1/completions", completion(prompts[0], 1, false).dump());
  ASSERT_EQ(single.status, 200) << single.body;
  EXPECT_EQ(tokens_of(json::parse(single.body)),
            runtime::engine_greedy(*golden_model().forward, prompts[0], 1));

  // The router's /metrics has each instance's series: p queried its prefix cache for
  // every prompt; nothing is running or held anywhere now.
  const std::string m = http(port, "GET", "/metrics").body;
  EXPECT_GT(series_with(m, "troupe:prefix_cache_queries_total", "instance=\"p\""), 0) << m;
  EXPECT_GE(series_with(m, "troupe:prefix_cache_hits_total", "instance=\"p\""), 0) << m;
  for (const char* instance : {"instance=\"p\"", "instance=\"d\""}) {
    EXPECT_EQ(series_with(m, "troupe:num_requests_running", instance), 0) << m;
    EXPECT_EQ(series_with(m, "troupe:kv_cache_used_blocks", instance), 0) << m;
  }
  EXPECT_EQ(series_with(m, "troupe:num_requests_running", "rank=\""), -1) << m;  // no rank series
#ifdef TROUPE_HAVE_UCX
  // The regions went from the prefill process to the decode process by RMA puts, one each.
  const double rma = series_with(m, "troupe:kv_transfers_total", "by=\"rma\"");
  EXPECT_GT(rma, 0) << m;
  EXPECT_EQ(series_with(m, "troupe:kv_transfer_descriptors_total", "model_name"), rma) << m;
  EXPECT_EQ(series_with(m, "troupe:kv_transfers_total", "by=\"message\""), 0) << m;
#endif
  // The router split each move's time: prefill (to the first token), the move, the
  // decode side's first tokens.
  const double moves = series_with(m, "troupe:kv_handoff_phased_total", "model_name");
  EXPECT_GT(moves, 0) << m;
  EXPECT_GT(series_with(m, "troupe:kv_handoff_phase_seconds_total", "phase=\"prefill\""), 0) << m;
  EXPECT_GT(series_with(m, "troupe:kv_handoff_phase_seconds_total", "phase=\"transfer\""), 0) << m;
  EXPECT_GE(series_with(m, "troupe:kv_handoff_phase_seconds_total", "phase=\"first_decode\""), 0) << m;

  // Where the work ran (troupe cluster status: each engine's figures). The decode engine
  // ran steps, so it decoded; both hold no block now, so the prefill side released every
  // request it handed off.
  const RunResult status = run_troupe("cluster status --config " + file);
  EXPECT_EQ(status.status, 0) << status.out;
  for (const std::string engine : {"instance p on node prefill", "instance d on node decode"}) {
    const std::string line = status_line_once(file, engine);
    ASSERT_FALSE(line.empty()) << status.out;
    EXPECT_NE(line.find(kIdle), std::string::npos) << line;
    const size_t steps = line.rfind(", ") + 2;
    EXPECT_GT(std::stoll(line.substr(steps)), 0) << line;
  }

  // Every process shuts down on SIGTERM, the ones whose transfer agents moved KV included
  // (a detached agent once kept the decode process waiting for its thread forever).
  EXPECT_EQ(decode->stop(SIGTERM, std::chrono::seconds(20)), 0) << decode->output();
  EXPECT_EQ(prefill->stop(SIGTERM, std::chrono::seconds(20)), 0) << prefill->output();
}

// P/D with a decode instance whose ranks are processes of their own: d2 is an
// expert-parallel group of two rank processes (DEP-2 over UCX), fed by the one-process
// prefill instance p; d1 is a one-process decode instance, started later.
std::string spread_decode_yaml(const std::vector<uint16_t>& ports) {
  auto node = [&](const char* name, uint16_t port) {
    return std::string("  - {name: ") + name + ", host: 127.0.0.1, port: " + std::to_string(port) +
           "}\n";
  };
  return "cluster-secret: test-cluster-secret-0123\n"
         "nodes:\n" +
         node("router", ports[0]) + node("prefill", ports[1]) + node("solo", ports[2]) +
         node("rank0", ports[3]) + node("rank1", ports[4]) +
         "router: {node: router, http-port: 0, tcp-port: 0}\n"
         "instances:\n"
         "  - {name: p, role: prefill, ranks: [prefill], threads: 1}\n"
         "  - {name: d1, role: decode, ranks: [solo], threads: 1}\n"
         "  - {name: d2, role: decode, ranks: [rank0, rank1], threads: 1}\n"  // expert parallel
             + cluster_serve_section();
}

// Sends request i (prompt random_tokens(first_len + len_step * i, seed + i), max_tokens
// tokens(i) = first_tokens + i) concurrently; each must answer 200 with the plain Engine's
// greedy tokens. Returns the decode tokens they imply (all but each first token, which
// is the prefill side's); logs() goes with a failed status.
int64_t concurrent_completions_match(uint16_t port, int requests, int64_t first_len, int64_t len_step,
                                     uint32_t seed, int first_tokens,
                                     const std::function<std::string()>& logs) {
  std::vector<std::vector<int32_t>> prompts;
  std::vector<int> lengths;
  int64_t decode_tokens = 0;
  for (int i = 0; i < requests; ++i) {
    prompts.push_back(random_tokens(first_len + len_step * i, seed + uint32_t(i)));
    lengths.push_back(first_tokens + i);
    decode_tokens += lengths.back() - 1;
  }
  std::vector<HttpResponse> responses(static_cast<size_t>(requests));
  std::vector<std::thread> clients;
  for (int i = 0; i < requests; ++i)
    clients.emplace_back([&, i] {
      responses[size_t(i)] = http(port, "POST", "/v1/completions",
                                  completion(prompts[size_t(i)], lengths[size_t(i)], false).dump());
    });
  for (auto& t : clients) t.join();
  for (int i = 0; i < requests; ++i) {
    EXPECT_EQ(responses[size_t(i)].status, 200) << responses[size_t(i)].body << logs();
    if (responses[size_t(i)].status != 200) continue;
    EXPECT_EQ(tokens_of(json::parse(responses[size_t(i)].body)),
              runtime::engine_greedy(*golden_model().forward, prompts[size_t(i)], lengths[size_t(i)]))
        << "request " << i;
  }
  return decode_tokens;
}

TEST(ServeClusterPd, ADecodeInstanceWhoseRanksAreProcessesOfTheirOwn) {
  test::TempDir dir;
  const std::string file = dir.file("pd-ranks.yaml");
  std::ofstream(file) << spread_decode_yaml(free_ports(5));
  auto node = [&](const char* name) {
    return std::make_unique<Daemon>(std::vector<std::string>{"--config", file, "--node", name});
  };
  auto router = node("router");
  auto prefill = node("prefill");
  auto rank0 = node("rank0");
  auto rank1 = node("rank1");
  const uint16_t port = router->port();
  ASSERT_NE(port, 0) << router->output();
  // Everything but d1 (not started yet): hand-offs can only go to d2's ranks.
  ASSERT_TRUE(wait_health(port, "1 of 4 engines not up: instance d1", 120s))
      << health_message(port) << rank0->output() << rank1->output();
  for (Daemon* d : {rank0.get(), rank1.get()})
    ASSERT_TRUE(d->wait_output("group formed; serving", 60s)) << d->output();

  // Concurrent requests: prefilled on p, each moved to one of d2's rank processes (the
  // one with fewer in flight) and decoded there in lockstep with the other rank.
  const int kRequests = 4;
  const int64_t decode_tokens = concurrent_completions_match(
      port, kRequests, 11, 23, 800, 6, [&] { return router->output() + rank0->output() + rank1->output(); });
  ASSERT_FALSE(::testing::Test::HasFailure());
  const std::string m = http(port, "GET", "/metrics").body;
#ifdef TROUPE_HAVE_UCX
  // Every region went by one RMA put into a rank process's staging memory.
  EXPECT_EQ(series_with(m, "troupe:kv_transfers_total", "by=\"rma\""), kRequests) << m;
  EXPECT_EQ(series_with(m, "troupe:kv_transfer_descriptors_total", "model_name"), kRequests) << m;
  EXPECT_EQ(series_with(m, "troupe:kv_transfers_total", "by=\"message\""), 0) << m;
#endif
  EXPECT_EQ(series_with(m, "troupe:kv_transfer_fallbacks_total", "model_name"), 0) << m;
  // d2's ranks computed decode tokens only: one a decode step, no prompt, no replay; both
  // ranks stepped (the one without a request ran dummy steps, which compute nothing).
  int64_t computed = 0;
  for (const char* engine : {"instance d2 rank 0 on node rank0", "instance d2 rank 1 on node rank1"}) {
    const std::string line = status_line_once(file, engine);
    EXPECT_NE(line.find(kIdle), std::string::npos) << line;
    computed += tokens_computed(line);
  }
  EXPECT_EQ(computed, decode_tokens);

  // d1 joins; a long stream goes to it (the first decode engine, all idle), then d1 is
  // drained onto d2: the stream goes on on one of d2's ranks with its KV.
  auto solo = node("solo");
  ASSERT_TRUE(router->wait_ready(port, 120s)) << health_message(port) << solo->output();
  const std::vector<int32_t> prompt = random_tokens(23, 960);
  const int n = 400;
  Stream stream(port, completion(prompt, n, /*stream=*/true));
  ASSERT_TRUE(stream.wait_events(6));
  const RunResult drained = run_troupe("drain --config " + file + " --instance d1 --url http://127.0.0.1:" +
                                       std::to_string(port));
  EXPECT_EQ(drained.status, 0) << drained.out;
  const StreamOutcome out = stream_outcome(stream.events());
  EXPECT_TRUE(out.done);
  EXPECT_TRUE(out.error.empty()) << out.error;
  EXPECT_EQ(out.tokens, runtime::engine_greedy(*golden_model().forward, prompt, n));
  EXPECT_TRUE(router->wait_output("went on on instance d2 rank [01]", 10s)) << router->output();
  const std::string d1 = status_line_once(file, "instance d1 on node solo");
  EXPECT_NE(d1.find(kIdle), std::string::npos) << d1;
  EXPECT_GT(tokens_computed(d1), 0) << d1;  // it decoded before the drain

  // d1 restarted (no longer draining); two streams, one on d1 and one on a rank of d2
  // (the decode engine with fewer in flight takes each move); then d2 is drained: its
  // rank processes park their requests, which go on on d1. Both streams end with the
  // undisturbed run's tokens, and d2's ranks hold nothing.
  ASSERT_EQ(solo->stop(SIGTERM, std::chrono::seconds(20)), 0) << solo->output();
  solo = node("solo");
  ASSERT_TRUE(router->wait_ready(port, 120s)) << health_message(port) << solo->output();
  const std::vector<int32_t> other = random_tokens(19, 961);
  Stream first(port, completion(prompt, n, /*stream=*/true));
  Stream second(port, completion(other, n, /*stream=*/true));
  ASSERT_TRUE(first.wait_events(6) && second.wait_events(6));
  const RunResult spread = run_troupe("drain --config " + file + " --instance d2 --url http://127.0.0.1:" +
                                      std::to_string(port));
  EXPECT_EQ(spread.status, 0) << spread.out;
  const StreamOutcome a = stream_outcome(first.events()), b = stream_outcome(second.events());
  EXPECT_TRUE(a.error.empty() && b.error.empty()) << a.error << b.error;
  EXPECT_EQ(a.tokens, runtime::engine_greedy(*golden_model().forward, prompt, n));
  EXPECT_EQ(b.tokens, runtime::engine_greedy(*golden_model().forward, other, n));
  EXPECT_TRUE(router->wait_output("went on on instance d1 on node solo", 10s)) << router->output();
  for (const char* engine : {"instance d2 rank 0 on node rank0", "instance d2 rank 1 on node rank1"}) {
    const std::string line = status_line_once(file, engine);
    EXPECT_NE(line.find(kIdle), std::string::npos) << line;
  }
  const std::string after = http(port, "GET", "/metrics").body;
  EXPECT_EQ(series_with(after, "troupe:kv_transfer_fallbacks_total", "model_name"), 0) << after;
  for (Daemon* d : {rank0.get(), rank1.get(), solo.get(), prefill.get(), router.get()})
    EXPECT_EQ(d->stop(SIGTERM, std::chrono::seconds(20)), 0) << d->output();
}

// P/D with a prefill instance whose ranks are processes of their own: p2 is an
// expert-parallel group of two rank processes (DEP-2 over UCX) whose ranks each prefill
// and hand off their own requests to the one-process decode instance d.
TEST(ServeClusterPd, APrefillInstanceWhoseRanksAreProcessesOfTheirOwn) {
  test::TempDir dir;
  const std::string file = dir.file("pd-prefill-ranks.yaml");
  const std::vector<uint16_t> ports = free_ports(4);
  auto node_line = [&](const char* name, uint16_t port) {
    return std::string("  - {name: ") + name + ", host: 127.0.0.1, port: " + std::to_string(port) + "}\n";
  };
  std::ofstream(file) << "cluster-secret: test-cluster-secret-0123\n"
                         "nodes:\n" +
                             node_line("router", ports[0]) + node_line("rank0", ports[1]) +
                             node_line("rank1", ports[2]) + node_line("decode", ports[3]) +
                             "router: {node: router, http-port: 0, tcp-port: 0}\n"
                             "instances:\n"
                             "  - {name: p2, role: prefill, ranks: [rank0, rank1], threads: 1}\n"
                             "  - {name: d, role: decode, ranks: [decode], threads: 1}\n" +
                             cluster_serve_section();
  auto node = [&](const char* name) {
    return std::make_unique<Daemon>(std::vector<std::string>{"--config", file, "--node", name});
  };
  auto router = node("router");
  auto rank0 = node("rank0");
  auto rank1 = node("rank1");
  auto decode = node("decode");
  const uint16_t port = router->port();
  ASSERT_NE(port, 0) << router->output();
  ASSERT_TRUE(router->wait_ready(port, 120s))
      << health_message(port) << rank0->output() << rank1->output() << decode->output();

  // Concurrent requests with prompts long enough that each is still prefilling when the
  // next arrives, so both prefill rank processes take some (the router sends each to the
  // rank slot with fewer in flight).
  const int kRequests = 6;
  const int64_t decode_tokens = concurrent_completions_match(
      port, kRequests, 160, 17, 900, 5, [&] { return router->output() + rank0->output() + rank1->output(); });
  ASSERT_FALSE(::testing::Test::HasFailure());
  const std::string m = http(port, "GET", "/metrics").body;
#ifdef TROUPE_HAVE_UCX
  EXPECT_EQ(series_with(m, "troupe:kv_transfers_total", "by=\"rma\""), kRequests) << m;
  EXPECT_EQ(series_with(m, "troupe:kv_transfers_total", "by=\"message\""), 0) << m;
#endif
  EXPECT_EQ(series_with(m, "troupe:kv_transfer_fallbacks_total", "model_name"), 0) << m;
  // Both prefill ranks computed prompts; the decode engine computed decode tokens only.
  for (const char* engine : {"instance p2 rank 0 on node rank0", "instance p2 rank 1 on node rank1"}) {
    const std::string line = status_line_once(file, engine, "up: 0 running, 0 waiting, KV ");
    EXPECT_NE(line.find("up: 0 running, 0 waiting, KV "), std::string::npos) << line;
    EXPECT_GT(tokens_computed(line), 0) << line;
  }
  EXPECT_EQ(tokens_computed(status_line(file, "instance d on node decode")), decode_tokens);
  for (Daemon* d : {decode.get(), rank1.get(), rank0.get(), router.get()})
    EXPECT_EQ(d->stop(SIGTERM, std::chrono::seconds(20)), 0) << d->output();
}

}  // namespace
}  // namespace troupe::testing

// `troupe bench serve` end to end: a `troupe serve` daemon on the golden tiny model, the
// benchmark pointed at it; the report has its lines and the latency table, every request
// succeeds with the asked token counts (no timing assertions); the multi-turn workload
// sends the requests and tokens it implies, its cached input is what the server's
// prefix-cache counter moved by, and the engine-only run beside it counts the same; bad
// flags and an unreachable server exit 2 naming the flag.
#include <gtest/gtest.h>

#include <chrono>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "net/http_test_client.h"
#include "support/golden.h"
#include "support/markdown_table.h"
#include "support/prometheus_text.h"
#include "support/run_troupe.h"

namespace troupe::testing {
namespace {

using Row = std::vector<std::string>;

// The integer after "NAME:" on its report line, or -1.
long long report_int(const std::string& out, const std::string& name) {
  const std::regex re(name + R"(:\s+(\d+))");
  std::smatch m;
  return std::regex_search(out, m, re) ? std::stoll(m[1]) : -1;
}

TEST(BenchServeCli, ReportsEveryRequestOfARunAgainstTheDaemon) {
  Daemon daemon({golden_dir(), "--port", "0", "--tcp-port", "0"});
  const uint16_t port = daemon.port();
  ASSERT_NE(port, 0) << daemon.output();
  ASSERT_TRUE(daemon.wait_ready(port)) << daemon.output();

  const RunResult r = run_troupe("bench serve --base-url http://127.0.0.1:" + std::to_string(port) +
                                 " --num-prompts 6 --max-concurrency 3 --random-input-len 16"
                                 " --random-output-len 4");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_EQ(report_int(r.out, "Successful requests"), 6) << r.out;
  EXPECT_EQ(report_int(r.out, "Failed requests"), 0) << r.out;
  EXPECT_EQ(report_int(r.out, "Total input tokens"), 6 * 16) << r.out;  // token-id prompts: no BOS
  EXPECT_EQ(report_int(r.out, "Total generated tokens"), 6 * 4) << r.out;  // ignore_eos
  EXPECT_GE(report_int(r.out, "Total cached input tokens"), 0) << r.out;
  for (const char* name : {"Benchmark duration (s)", "Request throughput (req/s)",
                           "Input token throughput (tok/s)", "Output token throughput (tok/s)"})
    EXPECT_NE(r.out.find(name), std::string::npos) << name << "\n" << r.out;
  EXPECT_NE(r.out.find("6/6"), std::string::npos) << r.out;  // the progress line

  const auto tables = markdown_tables(r.out);
  ASSERT_EQ(tables.size(), 1u) << r.out;
  EXPECT_EQ(tables[0][0], (Row{"metric", "samples", "mean ms", "p50 ms", "p90 ms", "p99 ms"}));
  ASSERT_EQ(tables[0].size(), 5u) << r.out;
  const std::vector<std::string> metrics = {"TTFT", "TPOT", "ITL", "E2E"};
  for (size_t i = 0; i < metrics.size(); ++i) {
    const Row& row = tables[0][i + 1];
    ASSERT_EQ(row.size(), 6u) << r.out;
    EXPECT_EQ(row[0], metrics[i]);
    if (metrics[i] != "ITL") {
      EXPECT_EQ(row[1], "6") << metrics[i];  // one sample per request
    }
    for (size_t c = 2; c < row.size(); ++c) EXPECT_GE(std::stod(row[c]), 0.0) << metrics[i];
  }
  EXPECT_EQ(daemon.stop(SIGTERM), 0) << daemon.output();
}

double prefix_cache_hits(uint16_t port) {
  return prometheus_value(http(port, "GET", "/metrics").body, "troupe:prefix_cache_hits_total");
}

// 3 conversations x 3 turns, system 96, user 16, output 8 tokens; one request at a time,
// so the cache hits are fixed. Turn k's prompt is 96 + 16(k+1) + 8k tokens: 112, 136, 160
// (1224 in all). In 64-token blocks (the daemon's default): the first request hits
// nothing; every other turn 0 hits the system prompt's full block (64); turn 1 extends a
// 119-token KV history (turn 0's prompt + 7 outputs: the last output's KV is never
// computed) with one full block (64); turn 2 a 143-token one with two (128). Sum:
// 0 + 2·64 + 3·64 + 3·128 = 704. A wrong output id in a history would cut turn 2's hits.
TEST(BenchServeCli, MultiTurnRunCountsWhatTheWorkloadImplies) {
  Daemon daemon({golden_dir(), "--port", "0", "--tcp-port", "0"});
  const uint16_t port = daemon.port();
  ASSERT_NE(port, 0) << daemon.output();
  ASSERT_TRUE(daemon.wait_ready(port)) << daemon.output();
  const double hits_before = prefix_cache_hits(port);
  ASSERT_GE(hits_before, 0);

  const RunResult r = run_troupe(
      "bench serve --base-url http://127.0.0.1:" + std::to_string(port) +
      " --dataset-name agentic --conversations 3 --turns 3 --system-len 96 --user-len 16"
      " --output-len 8 --max-concurrency 1 --engine-model " + golden_dir());
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_EQ(report_int(r.out, "Successful requests"), 9) << r.out;
  EXPECT_EQ(report_int(r.out, "Failed requests"), 0) << r.out;
  EXPECT_EQ(report_int(r.out, "Total input tokens"), 1224) << r.out;
  EXPECT_EQ(report_int(r.out, "Total generated tokens"), 9 * 8) << r.out;
  const long long cached = report_int(r.out, "Total cached input tokens");
  EXPECT_EQ(cached, 704) << r.out;
  EXPECT_EQ(report_int(r.out, "Total uncached input tokens"), 1224 - cached) << r.out;
  EXPECT_NE(r.out.find("9/9"), std::string::npos) << r.out;  // the progress line

  // The server's counter catches up with its snapshot of the last step.
  double moved = prefix_cache_hits(port) - hits_before;
  for (int i = 0; i < 500 && moved != double(cached); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    moved = prefix_cache_hits(port) - hits_before;
  }
  EXPECT_EQ(moved, double(cached));

  // Served and engine-only rows: the same requests and tokens (greedy, EOS ignored, one
  // request at a time on both sides, so the same hits).
  const auto tables = markdown_tables(r.out);
  ASSERT_EQ(tables.size(), 2u) << r.out;
  const auto& cmp = tables[1];
  ASSERT_EQ(cmp.size(), 3u) << r.out;
  EXPECT_EQ(cmp[0][0], "run");
  EXPECT_EQ(cmp[0][3], "cached input");
  EXPECT_EQ(cmp[1][0], "served (HTTP)");
  EXPECT_EQ(cmp[2][0], "engine (in-process)");
  for (const Row* row : {&cmp[1], &cmp[2]}) {
    ASSERT_EQ(row->size(), 13u) << r.out;
    EXPECT_EQ((*row)[1], "9") << r.out;
    EXPECT_EQ((*row)[2], "1224") << r.out;
    EXPECT_EQ((*row)[3], "704") << r.out;
    EXPECT_EQ((*row)[4], "520") << r.out;
    EXPECT_EQ((*row)[5], "72") << r.out;
  }
  EXPECT_NE(r.out.find("serving overhead: served wall / engine wall = "), std::string::npos)
      << r.out;
  EXPECT_EQ(daemon.stop(SIGTERM), 0) << daemon.output();
}

// A failed turn ends its conversation: a model name the server does not serve fails
// every first turn (HTTP 404), the later turns are never sent and count as failed.
TEST(BenchServeCli, MultiTurnFailedTurnEndsItsConversation) {
  Daemon daemon({golden_dir(), "--port", "0", "--tcp-port", "0"});
  const uint16_t port = daemon.port();
  ASSERT_NE(port, 0) << daemon.output();
  ASSERT_TRUE(daemon.wait_ready(port)) << daemon.output();
  const RunResult r = run_troupe("bench serve --base-url http://127.0.0.1:" +
                                 std::to_string(port) +
                                 " --model nope --dataset-name agentic --conversations 2"
                                 " --turns 3 --system-len 8 --user-len 4 --output-len 2");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_EQ(report_int(r.out, "Successful requests"), 0) << r.out;
  EXPECT_EQ(report_int(r.out, "Failed requests"), 6) << r.out;
  EXPECT_NE(r.out.find("first failure: HTTP 404"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("6/6"), std::string::npos) << r.out;  // unsent turns count as done
  EXPECT_EQ(daemon.stop(SIGTERM), 0) << daemon.output();
}

TEST(BenchServeCli, BadFlagsExitTwoNamingTheFlag) {
  const std::vector<UsageError> cases = {
      {"--num-prompts 0", "--num-prompts"},
      {"--max-concurrency 0", "--max-concurrency"},
      {"--request-rate 0", "--request-rate"},
      {"--request-rate fast", "--request-rate"},
      {"--random-input-len 0", "--random-input-len"},
      {"--random-output-len x", "--random-output-len"},
      {"--base-url ftp://127.0.0.1:1", "--base-url"},
      {"--base-url http://127.0.0.1:99999", "--base-url"},
      {"--no-such-flag 1", "--no-such-flag"},
      {"--dataset-name sharegpt", "--dataset-name"},
      {"--conversations 2", "--conversations"},  // not a random-dataset flag
      {"--engine-model " + golden_dir(), "--engine-model"},
      {"--dataset-name agentic --conversations 0", "--conversations"},
      {"--dataset-name agentic --turns x", "--turns"},
      {"--dataset-name agentic --user-len 0", "--user-len"},
      {"--dataset-name agentic --output-len 0", "--output-len"},
      {"--dataset-name agentic --system-len -1", "--system-len"},
      {"--dataset-name agentic --num-prompts 4", "--num-prompts"},
      {"--dataset-name agentic --random-input-len 4", "--random-input-len"},
      {"--dataset-name agentic --request-rate 2", "--request-rate"},
      {"--dataset-name agentic --block-size 16", "--block-size"},  // needs --engine-model
      {"--dataset-name agentic --engine-model /no/such/dir", "--engine-model"},
      {"--dataset-name agentic --engine-model " + golden_dir() + " --prefix-replay fast",
       "--prefix-replay"},
      {"--dataset-name agentic --engine-model " + golden_dir() + " --max-token-id 5000",
       "--max-token-id"},
      {"--dataset-name agentic --engine-model " + golden_dir() + " --kv-budget-mb 0",
       "--kv-budget-mb"},
  };
  expect_usage_errors(cases, "bench serve --base-url http://127.0.0.1:1 ");
}

TEST(BenchServeCli, UnreachableServerIsAClearError) {
  // Port 1 on loopback: nothing listens there.
  const RunResult r = run_troupe("bench serve --base-url http://127.0.0.1:1 --num-prompts 2");
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("unreachable"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("127.0.0.1:1"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("Successful requests"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace troupe::testing

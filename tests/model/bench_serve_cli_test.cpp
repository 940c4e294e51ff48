// `troupe bench serve` end to end: a `troupe serve` daemon on the golden tiny model, the
// benchmark pointed at it; the report has its lines and the latency table, every request
// succeeds with the asked token counts (no timing assertions); bad flags and an
// unreachable server exit 2 naming the flag.
#include <gtest/gtest.h>

#include <regex>
#include <string>
#include <vector>

#include "net/http_test_client.h"
#include "support/golden.h"
#include "support/markdown_table.h"
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

TEST(BenchServeCli, BadFlagsExitTwoNamingTheFlag) {
  struct Case {
    std::string args, flag;
  };
  const std::vector<Case> cases = {
      {"--num-prompts 0", "--num-prompts"},
      {"--max-concurrency 0", "--max-concurrency"},
      {"--request-rate 0", "--request-rate"},
      {"--request-rate fast", "--request-rate"},
      {"--random-input-len 0", "--random-input-len"},
      {"--random-output-len x", "--random-output-len"},
      {"--base-url ftp://127.0.0.1:1", "--base-url"},
      {"--base-url http://127.0.0.1:99999", "--base-url"},
      {"--no-such-flag 1", "--no-such-flag"},
  };
  for (const Case& c : cases) {
    const RunResult r = run_troupe("bench serve --base-url http://127.0.0.1:1 " + c.args);
    EXPECT_EQ(r.status, 2) << c.args << "\n" << r.out;
    EXPECT_NE(r.out.find(c.flag), std::string::npos) << c.args << "\n" << r.out;
  }
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

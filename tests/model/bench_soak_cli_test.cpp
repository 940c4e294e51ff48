// `troupe bench soak` end to end: a 3-second soak with 8 clients against the daemon the
// bench starts on the golden tiny model; the report's counts add up per kind (sent =
// served + expected errors + unexpected, nothing unexpected, good kinds never "expected
// errors", bad kinds never "served"), the "all" row is the column sums, no KV block is in
// use at the end, the RSS rows are there, and it exits 0. Bad flags exit 2 naming the
// flag. No timing assertions: the throughput rows only have to be numbers.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "model/temp_dir.h"
#include "support/golden.h"
#include "support/llama_ref.h"
#include "support/markdown_table.h"
#include "support/run_troupe.h"

namespace troupe::testing {
namespace {

using Row = std::vector<std::string>;

// The text after "NAME:" on its report line ("" when absent).
std::string report_value(const std::string& out, const std::string& name) {
  const std::regex re(std::regex_replace(name, std::regex(R"([()])"), R"(\$&)") + R"(:\s+(.+))");
  std::smatch m;
  return std::regex_search(out, m, re) ? m[1].str() : "";
}

const std::set<std::string> kGoodKinds = {"completion",  "completion stream", "chat",
                                          "chat stream", "abort mid-stream",  "disconnect early"};

TEST(BenchSoakCli, ShortSoakAddsUpLeaksNothingAndExitsZero) {
  const RunResult r =
      run_troupe("bench soak --minutes 0.05 --concurrency 8 --seed 3 --model " + golden_dir());
  ASSERT_EQ(r.status, 0) << r.out;
  const auto tables = markdown_tables(r.out);
  ASSERT_EQ(tables.size(), 2u) << r.out;

  const auto& kinds = tables[0];
  ASSERT_EQ(kinds[0], (Row{"kind", "expected answer", "sent", "served", "expected errors",
                           "unexpected", "answers"}));
  ASSERT_EQ(kinds.size(), 1u + 12 + 1) << r.out;  // header, 12 kinds, all
  long long sums[4] = {0, 0, 0, 0};
  for (size_t i = 1; i + 1 < kinds.size(); ++i) {
    const Row& row = kinds[i];
    ASSERT_EQ(row.size(), 7u) << r.out;
    const long long sent = std::stoll(row[2]), served = std::stoll(row[3]),
                    expected = std::stoll(row[4]), unexpected = std::stoll(row[5]);
    EXPECT_EQ(served + expected + unexpected, sent) << row[0];
    EXPECT_EQ(unexpected, 0) << row[0] << ": " << row[6];
    if (kGoodKinds.count(row[0])) {
      EXPECT_EQ(expected, 0) << row[0];
    } else {
      EXPECT_EQ(served, 0) << row[0];
    }
    sums[0] += sent, sums[1] += served, sums[2] += expected, sums[3] += unexpected;
  }
  const Row& all = kinds.back();
  EXPECT_EQ(all[0], "all");
  for (int c = 0; c < 4; ++c) EXPECT_EQ(std::stoll(all[size_t(c) + 2]), sums[c]) << c;
  EXPECT_GT(sums[1], 0) << r.out;  // some good requests were served in 3 s
  EXPECT_GT(sums[2], 0) << r.out;  // and some bad ones refused

  const auto& phases = tables[1];
  ASSERT_EQ(phases.size(), 3u) << r.out;
  EXPECT_EQ(phases[1][1], "1");  // the reference: one client
  EXPECT_EQ(phases[2][1], "8");
  EXPECT_EQ(std::stoll(phases[2][3]), sums[1] - std::stoll(kinds[5][3]) - std::stoll(kinds[6][3]))
      << "the soak's good requests are the served completions and chats";
  for (const Row& row : {phases[1], phases[2]})
    for (size_t c = 2; c < row.size(); ++c) EXPECT_GE(std::stod(row[c]), 0.0) << row[0];

  EXPECT_EQ(report_value(r.out, "KV blocks in use at the end"), "0") << r.out;
  EXPECT_EQ(report_value(r.out, "Requests running at the end"), "0") << r.out;
  EXPECT_EQ(report_value(r.out, "Server alive at the end"), "yes") << r.out;
  for (const char* rss : {"Server RSS at the start (MiB)", "Server RSS at the end (MiB)"})
    EXPECT_GT(std::stod("0" + report_value(r.out, rss)), 0.0) << rss << "\n" << r.out;
  EXPECT_EQ(report_value(r.out, "troupe serve exit after SIGTERM"), "0") << r.out;
  EXPECT_EQ(report_value(r.out, "Result"), "PASS") << r.out;
}

// A .gguf with no chat template (a base model's): its server answers chat 400 by design,
// so the soak sends completions in chat's place, says so, and passes; the file's
// vocabulary covers the mix's token ids (< 4096) and its context the longest prompt.
TEST(BenchSoakCli, AGgufWithoutAChatTemplateSoaksOnCompletions) {
  test::TempDir dir;
  std::vector<std::string> pieces = abc_pieces();
  while (pieces.size() < 4096 - 3 - 256) pieces.push_back("w" + std::to_string(pieces.size()));
  TinyLlamaSpec spec;
  spec.vocab = 4096;
  spec.context = 2048;
  spec.type = model::GgmlType::Q8_0;
  spec.more_metadata = [&](model::GgufWriter& w) { add_spm_test_vocabulary(w, pieces); };
  write_tiny_llama(spec, dir.file("base.gguf"));
  const RunResult r =
      run_troupe("bench soak --minutes 0.05 --concurrency 8 --seed 3 --model " + dir.file("base.gguf"));
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(report_value(r.out, "Chat").find("left out: the model has no chat template"), std::string::npos)
      << r.out;
  const auto tables = markdown_tables(r.out);
  ASSERT_EQ(tables.size(), 2u) << r.out;
  long long completions = 0;
  for (const Row& row : tables[0]) {
    if (row[0] == "chat" || row[0] == "chat stream") {
      EXPECT_EQ(row[2], "0") << r.out;  // none sent
    }
    if (row[0] == "completion" || row[0] == "completion stream") completions += std::stoll(row[3]);
    if (row.size() == 7 && row[0] != "kind") {
      EXPECT_EQ(row[5], "0") << row[0] << ": " << row[6];  // nothing unexpected
    }
  }
  EXPECT_GT(completions, 0) << r.out;
  EXPECT_EQ(report_value(r.out, "Result"), "PASS") << r.out;
}

// Issue 14: eviction under memory pressure never frees a block a running request uses.
// The same soak against two ranks whose 1 MiB pools (about 200 16-token blocks each, four
// requests at once) keep evicting into their host and disk tiers, with the KV bookkeeping
// checked after every step of every rank (--kv-check-invariants: each block has exactly
// as many refs as the tables and pins holding it, so none a request holds is free). A
// broken invariant throws in the scheduler, the engine restarts and its requests fail:
// unexpected answers, and the soak exits 1.
TEST(BenchSoakCli, UnderMemoryPressureWithTiersTheKvInvariantsHoldEveryStep) {
  const std::string dir = std::filesystem::temp_directory_path().string() + "/troupe-soak-kv-" +
                          std::to_string(::getpid());
  std::filesystem::remove_all(dir);
  const RunResult r = run_troupe(
      "bench soak --minutes 0.05 --concurrency 8 --seed 4 --model " + golden_dir() +
      " --kv-check-invariants --data-parallel-size 2 --max-num-seqs 4 --block-size 16"
      " --max-model-len 1024 --kv-cache-memory-bytes 1MiB --kv-offload-bytes 256KiB"
      " --kv-disk-dir " + dir + " --kv-disk-bytes 2MiB");
  std::filesystem::remove_all(dir);
  ASSERT_EQ(r.status, 0) << r.out;
  const auto tables = markdown_tables(r.out);
  ASSERT_EQ(tables.size(), 2u) << r.out;
  const Row& all = tables[0].back();
  ASSERT_EQ(all[0], "all") << r.out;
  EXPECT_EQ(all[5], "0") << "unexpected answers\n" << r.out;
  EXPECT_GT(std::stoll(all[3]), 0) << r.out;  // requests were served
  EXPECT_EQ(report_value(r.out, "KV blocks in use at the end"), "0") << r.out;
  EXPECT_EQ(report_value(r.out, "Result"), "PASS") << r.out;
}

TEST(BenchSoakCli, BadFlagsExitTwoNamingTheFlag) {
  const std::vector<UsageError> cases = {
      {"--minutes 0", "--minutes"},
      {"--minutes soon", "--minutes"},
      {"--minutes inf", "--minutes"},
      {"--concurrency 0", "--concurrency"},
      {"--seed -1", "--seed"},
      {"--no-such-flag 1", "--no-such-flag"},
      {"extra", "unexpected argument 'extra'"},
      {"--base-url http://127.0.0.1:1", "--server-pid"},
      {"--server-pid 1", "--base-url"},
      {"--base-url ftp://127.0.0.1:1 --server-pid 1", "--base-url"},
      {"--base-url http://127.0.0.1:1 --server-pid 999999999", "--server-pid"},
      {"--base-url http://127.0.0.1:1 --server-pid 1", "--base-url"},  // nothing listens
      {"--base-url http://127.0.0.1:1 --server-pid 1 --max-num-seqs 4", "--max-num-seqs"},
      {"--port 8000", "--port"},
      {"--tcp-port 0", "--tcp-port"},
      {"--max-num-seqs 0", "--max-num-seqs"},    // checked as troupe serve checks it
      {"--model /no/such/dir", "/no/such/dir"},  // the daemon's own refusal, passed on
  };
  expect_usage_errors(cases, "bench soak ");
}

}  // namespace
}  // namespace troupe::testing

// `troupe bench serve --engine-model x.gguf` (issue 15): the multi-turn workload against a
// `troupe serve x.gguf` daemon and in-process on the Engine with the same LLaMA-family
// file the test writes; both sides send and cache what the workload implies (the counts
// of bench_serve_cli_test's golden run: they depend on the workload and block size only).
#include <gtest/gtest.h>

#include <regex>
#include <string>
#include <vector>

#include "model/temp_dir.h"
#include "net/http_test_client.h"
#include "support/llama_ref.h"
#include "support/markdown_table.h"
#include "support/run_troupe.h"

namespace troupe::testing {
namespace {

// The vocabulary `troupe serve` needs (it loads the file's tokenizer).
void add_vocabulary(model::GgufWriter& w) { add_spm_test_vocabulary(w, {"\xE2\x96\x81", "a", "b"}); }

TEST(BenchServeGguf, MultiTurnRunOnAGgufServerAndEngineCountsWhatTheWorkloadImplies) {
  test::TempDir dir;
  TinyLlamaSpec s;
  s.vocab = 3 + 256 + 3;
  s.context = 256;
  s.more_metadata = add_vocabulary;
  write_tiny_llama(s, dir.file("m.gguf"));
  Daemon daemon({dir.file("m.gguf"), "--port", "0", "--tcp-port", "0"});
  const uint16_t port = daemon.port();
  ASSERT_NE(port, 0) << daemon.output();
  ASSERT_TRUE(daemon.wait_ready(port)) << daemon.output();

  const RunResult r = run_troupe(
      "bench serve --base-url http://127.0.0.1:" + std::to_string(port) +
      " --dataset-name agentic --conversations 3 --turns 3 --system-len 96 --user-len 16"
      " --output-len 8 --max-concurrency 1 --max-token-id 262 --engine-model " + dir.file("m.gguf"));
  ASSERT_EQ(r.status, 0) << r.out;
  const auto tables = markdown_tables(r.out);
  ASSERT_EQ(tables.size(), 2u) << r.out;
  const auto& cmp = tables[1];
  ASSERT_EQ(cmp.size(), 3u) << r.out;
  EXPECT_EQ(cmp[1][0], "served (HTTP)");
  EXPECT_EQ(cmp[2][0], "engine (in-process)");
  for (const auto* row : {&cmp[1], &cmp[2]}) {
    ASSERT_EQ(row->size(), 13u) << r.out;
    EXPECT_EQ((*row)[1], "9") << r.out;     // requests
    EXPECT_EQ((*row)[2], "1224") << r.out;  // input tokens
    EXPECT_EQ((*row)[3], "704") << r.out;   // cached input (64-token blocks)
    EXPECT_EQ((*row)[5], "72") << r.out;    // generated
  }
  EXPECT_EQ(daemon.stop(SIGTERM), 0) << daemon.output();
}

}  // namespace
}  // namespace troupe::testing

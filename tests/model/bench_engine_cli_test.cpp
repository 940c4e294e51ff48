// `troupe bench engine` and `troupe bench replay` end to end on the golden tiny model and
// on a LLaMA-family .gguf the test writes:
// the tables have their columns and one row per run with the token counts the workload
// and the engine's rules imply (no timing assertions), and bad flags exit 2 naming the flag.
#include <gtest/gtest.h>

#include <algorithm>
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

TEST(BenchEngineCli, EnginePrintsPrefillAndDecodeTables) {
  // Prefix 64 = 4 blocks of 16; the golden model's SWA window is 16 tokens, so a hit
  // replays 16 tokens before the boundary and computes 16 + 8 per request (window
  // snapshots off: the warm-up request's snapshot at 64 would serve the hits).
  const RunResult r = run_troupe("bench engine --model " + golden_dir() +
                                 " --batch 2 --context 16,48 --new-tokens 8 --cached-prefix 64"
                                 " --decode-steps 2 --repeats 1 --block-size 16 --threads 2"
                                 " --prefix-replay window --snapshots off");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("machine limits"), std::string::npos) << r.out;
  const auto tables = markdown_tables(r.out);
  ASSERT_EQ(tables.size(), 2u) << r.out;  // prefill, decode
  Row header = tables[0][0];
  const std::vector<Row> prefill(tables[0].begin() + 1, tables[0].end());
  EXPECT_EQ(header, (Row{"prefix cache", "decoder", "requests", "prompt tokens", "cached tokens",
                         "computed tokens", "steps", "median ms", "min ms", "max ms",
                         "new tokens/s", "computed tokens/s", "sched CPU us/step"}));
  ASSERT_EQ(prefill.size(), 2u) << r.out;
  const Row want_on = {"on", "tail", "2", "144", "128", "48", "1"},
            want_off = {"off", "tail", "2", "144", "0", "144", "1"};
  for (int i = 0; i < 2; ++i) {
    const Row& row = prefill[i];
    const Row& want = i == 0 ? want_on : want_off;
    ASSERT_EQ(row.size(), header.size()) << r.out;
    for (size_t c = 0; c < want.size(); ++c)
      EXPECT_EQ(row[c], want[c]) << header[c] << "\n" << r.out;
    for (size_t c = 7; c < row.size(); ++c) EXPECT_GT(std::stod(row[c]), 0.0) << header[c];
  }
  header = tables[1][0];
  const std::vector<Row> decode(tables[1].begin() + 1, tables[1].end());
  EXPECT_EQ(header,
            (Row{"context", "batch", "steps", "median ms", "min ms", "max ms", "executor ms",
                 "sched CPU us", "sched share", "tokens/s", "vs first context"}));
  ASSERT_EQ(decode.size(), 2u) << r.out;
  for (int i = 0; i < 2; ++i) {
    ASSERT_EQ(decode[i].size(), header.size()) << r.out;
    EXPECT_EQ(decode[i][0], i == 0 ? "16" : "48");
    EXPECT_EQ(decode[i][1], "2");
    EXPECT_EQ(decode[i][2], "2");  // decode steps
    for (size_t c = 3; c <= 6; ++c) EXPECT_GT(std::stod(decode[i][c]), 0.0) << header[c];
  }
  EXPECT_EQ(decode[0][10], "1.00x");
}

// The token counts of one `bench replay` row, worked out from the workload and the
// engine's rules (docs/kv-cache.md), for the conversations' turns run in lockstep.
struct ReplayCounts {
  int64_t input = 0, cached = 0, computed = 0, replay = 0, hits = 0;
};

// Snapshot: the cache with window snapshots, either replay mode: every hit is at the
// previous turn's last block boundary, where its snapshot is, and replays nothing.
enum class Mode { Exact, Window, Snapshot, Off };

ReplayCounts expected_replay(Mode mode, int64_t conversations, int64_t turns, int64_t S, int64_t U,
                             int64_t O, int64_t bs) {
  const model::ModelConfig m = model::load_config(golden_dir() + "/config.json");
  const int64_t W = m.sliding_window, R = m.replay_tokens;
  const int64_t depth = (m.n_encoder_layers + 1) * (W - 1);  // exact, bounded replay
  ReplayCounts c;
  for (int64_t k = 0; k < turns; ++k) {
    const int64_t E = S + U + k * (O + U);  // turn k's prompt
    // The hit: the full blocks turn k-1 computed (its prompt + O - 1 decodes; the last
    // output token is never fed back), at most (E - 1) so one token is left to compute.
    // The first turns run in one step, so conversations share nothing.
    const int64_t prev = k == 0 ? 0 : E - U - 1;
    const int64_t B = mode == Mode::Off ? 0 : std::min(prev / bs, (E - 1) / bs) * bs;
    int64_t replay = 0;
    if (B > 0 && mode == Mode::Exact) replay = B - std::max<int64_t>(0, std::min(B, E - R) - depth);
    if (B > 0 && mode == Mode::Window) replay = std::min(B, W);
    c.input += conversations * E;
    c.cached += conversations * B;
    c.replay += conversations * replay;
    c.hits += B > 0 ? conversations : 0;
    c.computed += conversations * (E - B + replay + O - 1);
  }
  return c;
}

TEST(BenchEngineCli, ReplayPrintsExactWindowSnapshotAndBaselineRows) {
  // Prompts 132, 140, 148 per conversation; turns 1 and 2 hit 128 tokens. Exact replay of
  // turn 1 anchors at E - R = 124 < B (the decoder tail reaches before the hit): 128 - (124
  // - 105) = 109 tokens; turn 2 at B = 128: 105. Window replay: 16 per hit.
  const RunResult r = run_troupe("bench replay --model " + golden_dir() +
                                 " --conversations 2 --turns 3 --system-len 128 --user-len 4"
                                 " --output-len 4 --block-size 16 --threads 2");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("a hit at B replays: exact 105 tokens before min(B, E_prompt - 16); "
                       "window 16 before B"),
            std::string::npos)
      << r.out;
  const auto tables = markdown_tables(r.out);
  ASSERT_EQ(tables.size(), 1u) << r.out;
  const std::vector<Row>& rows = tables[0];
  ASSERT_EQ(rows.size(), 6u) << r.out;  // header, exact (snapshots on, off), window (same), off
  const Row header = {"prefix cache",      "replay",           "snapshots",     "tiers",
                      "turns",             "input tokens",     "cached input",   "uncached input",
                      "output tokens",     "hit rate",         "primary hits",   "host hits",
                      "disk hits",         "snapshot hits",
                      "snapshots from primary / host / disk",    "replay hits",    "computed tokens",
                      "SWA replay tokens", "steps",            "preemptions",    "sched ms/step",
                      "wall s",            "cached in tok/s",  "uncached in tok/s",
                      "output tok/s",      "total tok/s"};
  EXPECT_EQ(rows[0], header);
  const struct {
    Mode mode;
    Row label;
  } runs[] = {{Mode::Snapshot, {"on", "exact", "on", "off"}},
              {Mode::Exact, {"on", "exact", "off", "off"}},
              {Mode::Snapshot, {"on", "window", "on", "off"}},
              {Mode::Window, {"on", "window", "off", "off"}},
              {Mode::Off, {"off", "-", "-", "-"}}};
  // Hand-worked totals (both conversations) so the rule above is checked too.
  EXPECT_EQ(expected_replay(Mode::Exact, 2, 3, 128, 4, 4, 16).replay, 2 * (109 + 105));
  EXPECT_EQ(expected_replay(Mode::Window, 2, 3, 128, 4, 4, 16).computed, 2 * (132 + 28 + 36) + 18);
  EXPECT_EQ(expected_replay(Mode::Snapshot, 2, 3, 128, 4, 4, 16).computed,
            2 * (132 + 12 + 20) + 18);
  for (int i = 0; i < 5; ++i) {
    const Row& row = rows[i + 1];
    ASSERT_EQ(row.size(), header.size()) << r.out;
    const ReplayCounts want = expected_replay(runs[i].mode, 2, 3, 128, 4, 4, 16);
    EXPECT_EQ(Row(row.begin(), row.begin() + 4), runs[i].label) << r.out;
    EXPECT_EQ(row[4], "6") << r.out;  // turns
    EXPECT_EQ(row[5], std::to_string(want.input)) << r.out;
    EXPECT_EQ(row[6], std::to_string(want.cached)) << r.out;
    EXPECT_EQ(row[7], std::to_string(want.input - want.cached)) << r.out;
    EXPECT_EQ(row[8], "24") << r.out;  // output tokens
    EXPECT_EQ(row[9], row[10]) << r.out;  // every hit from the primary pool (no tiers)
    EXPECT_EQ(row[11], "0.0%") << r.out;
    EXPECT_EQ(row[12], "0.0%") << r.out;
    const bool snap = runs[i].mode == Mode::Snapshot;
    EXPECT_EQ(row[13], std::to_string(snap ? want.hits : 0)) << r.out;  // snapshot hits
    EXPECT_EQ(row[14], std::to_string(snap ? want.hits : 0) + " / 0 / 0") << r.out;  // no tiers
    EXPECT_EQ(row[15], std::to_string(snap ? 0 : want.hits)) << r.out;  // replay hits
    EXPECT_EQ(row[16], std::to_string(want.computed)) << r.out;
    EXPECT_EQ(row[17], std::to_string(want.replay)) << r.out;
    EXPECT_EQ(row[19], "0");  // preemptions: the default budget holds everything
    EXPECT_GT(std::stod(row[21]), 0.0);
  }
  for (const char* run : {"exact replay, snapshots on, tiers off",
                          "exact replay, snapshots off, tiers off",
                          "window replay, snapshots on, tiers off",
                          "window replay, snapshots off, tiers off"})
    EXPECT_NE(r.out.find(std::string("wall time without / with the prefix cache (") + run + ")"),
              std::string::npos)
        << run;
}

// --prefix-replay picks the run with the cache: one "on" row, then the baseline.
TEST(BenchEngineCli, ReplayRunsOneModeWhenAsked) {
  const RunResult r =
      run_troupe("bench replay --model " + golden_dir() +
                 " --conversations 1 --turns 2 --system-len 32 --user-len 8"
                 " --output-len 2 --block-size 16 --threads 2 --prefix-replay window"
                 " --snapshots off");
  ASSERT_EQ(r.status, 0) << r.out;
  const auto tables = markdown_tables(r.out);
  ASSERT_EQ(tables.size(), 1u) << r.out;
  ASSERT_EQ(tables[0].size(), 3u) << r.out;  // header, window, off
  EXPECT_EQ(Row(tables[0][1].begin(), tables[0][1].begin() + 4),
            (Row{"on", "window", "off", "off"}));
  EXPECT_EQ(Row(tables[0][2].begin(), tables[0][2].begin() + 4), (Row{"off", "-", "-", "-"}));
  const ReplayCounts want = expected_replay(Mode::Window, 1, 2, 32, 8, 2, 16);
  EXPECT_EQ(tables[0][1][17], std::to_string(want.replay)) << r.out;
  EXPECT_EQ(tables[0][1][16], std::to_string(want.computed)) << r.out;
}

// A LLaMA-family .gguf through the same engine: full attention keeps every layer's keys in
// the blocks, so a prefix hit computes only the new tokens, and the one decoder mode is full.
TEST(BenchEngineCli, EngineRunsALlamaFamilyGguf) {
  test::TempDir dir;
  TinyLlamaSpec spec;
  spec.type = model::GgmlType::Q8_0;
  spec.experts = 4, spec.top_k = 2;
  write_tiny_llama(spec, dir.file("moe.gguf"));
  const RunResult r = run_troupe("bench engine --model " + dir.file("moe.gguf") +
                                 " --batch 2 --context 16,32 --new-tokens 8 --cached-prefix 32"
                                 " --decode-steps 2 --repeats 1 --block-size 16 --threads 2");
  ASSERT_EQ(r.status, 0) << r.out;
  const auto tables = markdown_tables(r.out);
  ASSERT_EQ(tables.size(), 2u) << r.out;     // prefill, decode
  ASSERT_EQ(tables[0].size(), 3u) << r.out;  // header, cache on, cache off
  const Row want_on = {"on", "full", "2", "80", "64", "16", "1"},
            want_off = {"off", "full", "2", "80", "0", "80", "1"};
  for (int i = 0; i < 2; ++i) {
    const Row& row = tables[0][i + 1];
    ASSERT_EQ(row.size(), tables[0][0].size()) << r.out;
    EXPECT_EQ(Row(row.begin(), row.begin() + 7), i == 0 ? want_on : want_off) << r.out;
    EXPECT_GT(std::stod(row[7]), 0.0) << r.out;  // median ms
  }
  ASSERT_EQ(tables[1].size(), 3u) << r.out;  // header, contexts 16 and 32
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(Row(tables[1][i + 1].begin(), tables[1][i + 1].begin() + 3),
              (Row{i == 0 ? "16" : "32", "2", "2"}))
        << r.out;
  }
  const RunResult clip =
      run_troupe("bench engine --model " + dir.file("moe.gguf") + " --decoder clip");
  EXPECT_EQ(clip.status, 2) << clip.out;
  EXPECT_NE(clip.out.find("--decoder clip: this model has no decoder tail"), std::string::npos)
      << clip.out;
}

// bench replay on a .gguf: one run with the cache (no window to replay or snapshot), then
// the baseline; every hit replays nothing, so a turn computes its prompt past the hit and
// its decodes.
TEST(BenchEngineCli, ReplayRunsALlamaFamilyGgufWithoutReplay) {
  test::TempDir dir;
  TinyLlamaSpec spec;
  spec.type = model::GgmlType::Q4_0;
  write_tiny_llama(spec, dir.file("m.gguf"));
  const int64_t conversations = 2, turns = 2, S = 32, U = 8, O = 2, bs = 16;
  const RunResult r = run_troupe("bench replay --model " + dir.file("m.gguf") +
                                 " --conversations 2 --turns 2 --system-len 32 --user-len 8"
                                 " --output-len 2 --block-size 16 --threads 2");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("a hit at B replays nothing"), std::string::npos) << r.out;
  int64_t input = 0, cached = 0, computed_on = 0, computed_off = 0;
  for (int64_t k = 0; k < turns; ++k) {  // prompts 40 and 50; turn 1 hits the 32 of turn 0
    const int64_t E = S + U + k * (O + U), prev = k == 0 ? 0 : E - U - 1;
    const int64_t B = std::min(prev / bs, (E - 1) / bs) * bs;
    input += conversations * E;
    cached += conversations * B;
    computed_on += conversations * (E - B + O - 1);
    computed_off += conversations * (E + O - 1);
  }
  EXPECT_EQ(cached, 2 * 32);
  const auto tables = markdown_tables(r.out);
  ASSERT_EQ(tables.size(), 1u) << r.out;
  ASSERT_EQ(tables[0].size(), 3u) << r.out;  // header, on, off
  const Row& on = tables[0][1];
  const Row& off = tables[0][2];
  ASSERT_EQ(on.size(), tables[0][0].size()) << r.out;
  EXPECT_EQ(Row(on.begin(), on.begin() + 4), (Row{"on", "exact", "off", "off"})) << r.out;
  EXPECT_EQ(Row(off.begin(), off.begin() + 4), (Row{"off", "-", "-", "-"})) << r.out;
  EXPECT_EQ(on[5], std::to_string(input)) << r.out;
  EXPECT_EQ(on[6], std::to_string(cached)) << r.out;
  EXPECT_EQ(on[16], std::to_string(computed_on)) << r.out;
  EXPECT_EQ(on[17], "0") << r.out;  // replay tokens
  EXPECT_EQ(off[16], std::to_string(computed_off)) << r.out;
}

// The V4.1-only commands name a .gguf for what it is rather than "no such folder".
TEST(BenchEngineCli, V41OnlyCommandsSayAGgufIsLlamaFamily) {
  test::TempDir dir;
  write_tiny_llama(TinyLlamaSpec{}, dir.file("m.gguf"));
  const std::string model = " --model " + dir.file("m.gguf");
  expect_usage_errors({
      {"bench forward" + model, "is a LLaMA-family model"},
      {"draft" + model + " --tokens 1,2", "is a LLaMA-family model"},
  });
}

TEST(BenchEngineCli, BadFlagsExitTwoNamingTheFlag) {
  const std::string model = " --model " + golden_dir();
  expect_usage_errors({
      {"bench engine" + model + " --batch 0", "--batch must be at least 1"},
      {"bench engine" + model + " --context 0", "--context must be at least 1"},
      {"bench engine" + model + " --context 16,x", "--context expects integers"},
      {"bench engine" + model + " --new-tokens 0", "--new-tokens must be at least 1"},
      {"bench engine" + model + " --cached-prefix -1", "--cached-prefix must be at least 0"},
      {"bench engine" + model + " --decode-steps 0", "--decode-steps must be at least 1"},
      {"bench engine" + model + " --repeats 0", "--repeats must be at least 1"},
      {"bench engine" + model + " --threads 0", "--threads must be at least 1"},
      {"bench engine" + model + " --kv-budget-mb 0", "--kv-budget-mb must be at least 1"},
      {"bench engine" + model + " --kv-budget-mb 1 --batch 64", "--kv-budget-mb 1"},
      {"bench engine" + model + " --block-size 3", "--block-size 3"},
      {"bench engine" + model + " --context 4095", "--context 4095 + --decode-steps"},
      {"bench engine" + model + " --cached-prefix 4000 --new-tokens 96",
       "--cached-prefix + --new-tokens"},
      {"bench engine --bogus 1", "unknown flag --bogus"},
      {"bench replay" + model + " --conversations 0", "--conversations must be at least 1"},
      {"bench replay" + model + " --turns 0", "--turns must be at least 1"},
      {"bench replay" + model + " --system-len -1", "--system-len must be at least 0"},
      {"bench replay" + model + " --user-len 0", "--user-len must be at least 1"},
      {"bench replay" + model + " --output-len 0", "--output-len must be at least 1"},
      {"bench replay" + model + " --max-running 0", "--max-running must be at least 1"},
      {"bench replay" + model + " --seed x", "--seed expects an integer"},
      {"bench replay" + model + " --turns 100 --system-len 4000",
       "--output-len = 7200 tokens is beyond"},
      {"bench replay" + model + " --prefix-replay all",
       "--prefix-replay expects exact, window or both"},
      {"bench replay" + model + " --snapshots maybe", "--snapshots expects on, off or both"},
      {"bench engine" + model + " --snapshots both", "--snapshots expects on or off"},
      {"bench engine" + model + " --prefix-replay both", "--prefix-replay expects exact or window"},
      {"bench engine" + model + " --decoder some", "--decoder expects tail, full, clip or all"},
      {"bench replay extra", "unexpected argument 'extra'"},
      {"bench", "available: forward, engine, replay"},
  });
}

}  // namespace
}  // namespace troupe::testing

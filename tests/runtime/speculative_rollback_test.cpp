// Paged rollback of a speculative verify step (runtime/kv_cache/step_undo.h) on the golden
// tiny model with its DSpark draft weights (so F rings fill): a step of 4 tokens rolled
// back to every accepted length leaves the request's slot and global rows byte-equal to a
// fresh run that only ever saw the accepted tokens (SWA rings, ring positions, compressor
// carry - the step crosses compress-group boundaries - F ring, compressed rows).
#include <gtest/gtest.h>

#include <cstring>

#include "kernels/check.h"

#include <numeric>

#include "runtime/kv_cache/paged_kv.h"
#include "runtime/kv_cache/step_undo.h"
#include "support/golden.h"

namespace troupe::runtime {
namespace {

using testing::golden_draft;
using testing::golden_model;
using testing::random_tokens;

constexpr int64_t kBlock = 16, kBlocksPerSeq = 8;

std::vector<int32_t> table_from(int32_t first) {
  std::vector<int32_t> t(kBlocksPerSeq);
  std::iota(t.begin(), t.end(), first);
  return t;
}

// Runs tokens at positions [start, start + n) of the sequence in `slot`; returns its undo
// when asked to keep one.
std::unique_ptr<StepUndo> run_chunk(PagedKvStorage& s, int32_t slot,
                                    const std::vector<int32_t>& table,
                                    const std::vector<int32_t>& all, int64_t start, int64_t n,
                                    bool keep_undo) {
  const model::ModelConfig& c = golden_model().config;
  const int64_t back = std::min<int64_t>(start, c.engram_max_ngram_size - 1);
  const std::vector<int32_t> lookback(all.begin() + start - back, all.begin() + start);
  PagedSequence seq(s, table, slot, lookback, start - back, start);
  std::unique_ptr<StepUndo> undo;
  if (keep_undo) {
    undo = std::make_unique<StepUndo>(s, slot, start, start + n);
    seq.keep_closed_groups(undo.get());
  }
  const std::vector<int32_t> tokens(all.begin() + start, all.begin() + start + n);
  model::SequenceInput in{&seq, tokens, true};
  golden_draft().forward->run({&in, 1});
  return undo;
}

void expect_same_slot(PagedKvStorage& s, int32_t a, int32_t b, const std::vector<int32_t>& ta,
                      const std::vector<int32_t>& tb, int64_t length) {
  const int64_t W = s.window(), row = s.rows().window.bytes();
  for (int64_t l = 0; l < s.layers(); ++l) {
    SCOPED_TRACE("layer " + std::to_string(l));
    for (int64_t i = 0; i < W; ++i) {
      ASSERT_EQ(s.window_pos(a, l, i), s.window_pos(b, l, i)) << "ring slot " << i;
      if (s.window_pos(a, l, i) < 0) continue;
      EXPECT_EQ(0, std::memcmp(s.window_row(a, l, i), s.window_row(b, l, i), row)) << "slot " << i;
    }
    EXPECT_EQ(s.carry_v(a, l), s.carry_v(b, l));
    EXPECT_EQ(s.carry_s(a, l), s.carry_s(b, l));
    if (!s.is_full_layer(l)) continue;
    const int64_t per_block = kBlock / s.ratio(l);
    for (int64_t j = 0; j < length / s.ratio(l); ++j) {
      const int32_t ba = ta[j / per_block], bb = tb[j / per_block];
      EXPECT_EQ(0, std::memcmp(s.ckv_row(ba, l, j % per_block), s.ckv_row(bb, l, j % per_block),
                               s.rows().ckv.bytes()))
          << "compressed row " << j;
      EXPECT_EQ(0, std::memcmp(s.ikey_row(ba, l, j % per_block), s.ikey_row(bb, l, j % per_block),
                               s.rows().ikey.bytes()))
          << "index key " << j;
    }
  }
  const model::FeatureRing& fa = *s.features(a);
  const model::FeatureRing& fb = *s.features(b);
  ASSERT_EQ(fa.pos, fb.pos);
  for (int64_t i = 0; i < fa.slots(); ++i)
    if (fa.pos[i] >= 0) {
      EXPECT_TRUE(std::equal(&fa.rows[i * fa.width], &fa.rows[(i + 1) * fa.width],
                             &fb.rows[i * fb.width]))
          << "F slot " << i;
    }
}

TEST(SpeculativeRollback, RejectedTailLeavesTheStateOfAFreshRun) {
  const model::ModelConfig& c = golden_model().config;
  ASSERT_GT(c.ratio(1), 1);  // the step below crosses this layer's group boundaries
  // Prompt 38: the step writes positions 38..41, closing groups at 39 and 41 (r = 2).
  const std::vector<int32_t> all = random_tokens(42, 7);
  const int64_t prompt = 38, step = 4;
  for (int64_t accepted_end = prompt + 1; accepted_end <= prompt + step; ++accepted_end) {
    SCOPED_TRACE("accepted end " + std::to_string(accepted_end));
    PagedKvStorage s(c, kBlock, 2 * kBlocksPerSeq, 2, /*keep_features=*/true);
    const auto ta = table_from(0), tb = table_from(kBlocksPerSeq);
    s.reset_slot(0);
    s.reset_slot(1);
    // Speculating: prompt, then a verify step of 4 rolled back to accepted_end.
    run_chunk(s, 0, ta, all, 0, prompt, false);
    run_chunk(s, 0, ta, all, prompt, step, true)->rollback(accepted_end);
    // Honest: the same prompt, then only the accepted tokens.
    run_chunk(s, 1, tb, all, 0, prompt, false);
    run_chunk(s, 1, tb, all, prompt, accepted_end - prompt, false);
    expect_same_slot(s, 0, 1, ta, tb, accepted_end);
    // And the next step from there gives the same logits and state again.
    std::vector<int32_t> next = all;
    next.resize(accepted_end);
    next.push_back(1234);
    run_chunk(s, 0, ta, next, accepted_end, 1, false);
    run_chunk(s, 1, tb, next, accepted_end, 1, false);
    expect_same_slot(s, 0, 1, ta, tb, accepted_end + 1);
  }
}

TEST(SpeculativeRollback, StepLongerThanTheWindowIsRefused) {
  const model::ModelConfig& c = golden_model().config;
  PagedKvStorage s(c, kBlock, kBlocksPerSeq, 1);
  EXPECT_THROW(StepUndo(s, 0, 10, 10 + c.sliding_window + 1), troupe::Error);
  EXPECT_THROW(StepUndo(s, 0, 10, 10), troupe::Error);
}

}  // namespace
}  // namespace troupe::runtime

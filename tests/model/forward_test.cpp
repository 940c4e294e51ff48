// Properties of model::Forward on the golden tiny checkpoint that need no golden
// values: chunked/incremental prefill and decode equal one full prefill, a batch of
// different lengths equals each sequence alone, thread count does not change
// results, and bad input is a clear error that leaves the state untouched.
#include <gtest/gtest.h>

#include <random>

#include "kernels/check.h"
#include "kernels/parallel.h"
#include "support/golden.h"

namespace troupe::model {
namespace {

using testing::golden_model;

using testing::random_tokens;

// Logits of every position, feeding the sequence in chunks of the given sizes.
std::vector<float> run_chunked(const std::vector<int32_t>& tokens, const std::vector<int64_t>& chunks) {
  const auto& g = golden_model();
  SequenceState st = SequenceState::empty(g.config);
  std::vector<float> all;
  size_t at = 0;
  for (int64_t n : chunks) {
    std::span<const int32_t> part(tokens.data() + at, n);
    SequenceInput in{&st, part, true};
    const auto out = g.forward->run({&in, 1});
    all.insert(all.end(), out[0].begin(), out[0].end());
    at += n;
  }
  EXPECT_EQ(at, tokens.size());
  EXPECT_EQ(st.length(), static_cast<int64_t>(tokens.size()));
  return all;
}

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  double m = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) m = std::max(m, double(std::fabs(a[i] - b[i])));
  return m;
}

TEST(Forward, IncrementalDecodeEqualsFullPrefill) {
  // 70 tokens: past the window (16), with several compressed groups and sparse selection.
  const auto tokens = random_tokens(70, 1);
  const auto full = run_chunked(tokens, {70});
  const auto one_by_one = run_chunked(tokens, std::vector<int64_t>(70, 1));
  const auto chunks = run_chunked(tokens, {5, 17, 1, 30, 17});
  EXPECT_LT(max_abs_diff(full, one_by_one), 1e-3);
  EXPECT_LT(max_abs_diff(full, chunks), 1e-3);
  const int64_t V = golden_model().config.vocab_size;
  for (size_t p = 0; p < tokens.size(); ++p)
    EXPECT_EQ(kernels::argmax(&full[p * V], V), kernels::argmax(&one_by_one[p * V], V)) << p;
}

TEST(Forward, BatchOfDifferentLengthsEqualsEachAlone) {
  const auto& g = golden_model();
  const std::vector<std::vector<int32_t>> seqs = {random_tokens(3, 2), random_tokens(40, 3),
                                                  random_tokens(1, 4), random_tokens(23, 5)};
  std::vector<SequenceState> states(seqs.size(), SequenceState::empty(g.config));
  std::vector<SequenceInput> batch;
  for (size_t i = 0; i < seqs.size(); ++i) batch.push_back({&states[i], seqs[i], true});
  const auto together = g.forward->run(batch);
  for (size_t i = 0; i < seqs.size(); ++i) {
    const auto alone = run_chunked(seqs[i], {static_cast<int64_t>(seqs[i].size())});
    EXPECT_LT(max_abs_diff(together[i], alone), 1e-4) << "sequence " << i;
  }
  // A second step with one new token each, still batched.
  std::vector<int32_t> next = {7, 8, 9, 10};
  std::vector<SequenceInput> step;
  for (size_t i = 0; i < seqs.size(); ++i) step.push_back({&states[i], {&next[i], 1}, false});
  const auto stepped = g.forward->run(step);
  for (size_t i = 0; i < seqs.size(); ++i) {
    auto longer = seqs[i];
    longer.push_back(next[i]);
    const auto alone = run_chunked(longer, {static_cast<int64_t>(longer.size())});
    const int64_t V = g.config.vocab_size;
    std::vector<float> last(alone.end() - V, alone.end());
    EXPECT_LT(max_abs_diff(stepped[i], last), 1e-3) << "sequence " << i;
  }
}

TEST(Forward, ThreadCountDoesNotChangeLogits) {
  const auto tokens = random_tokens(33, 6);
  const int saved = kernels::num_threads();
  kernels::set_num_threads(1);
  const auto one = run_chunked(tokens, {33});
  kernels::set_num_threads(2);
  const auto two = run_chunked(tokens, {33});
  kernels::set_num_threads(saved);
  EXPECT_EQ(one, two);  // bit-identical
}

TEST(Forward, BadInputIsAClearErrorAndLeavesStateAlone) {
  const auto& g = golden_model();
  SequenceState st = SequenceState::empty(g.config);
  auto expect_error = [&](std::vector<int32_t> tokens, const char* needle) {
    SequenceInput in{&st, tokens, false};
    try {
      g.forward->run({&in, 1});
      ADD_FAILURE() << "no error for " << needle;
    } catch (const troupe::Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
    EXPECT_EQ(st.length(), 0);
    EXPECT_TRUE(st.tokens.empty());
  };
  expect_error({}, "no tokens");
  expect_error({1, 4096}, "out of range");
  expect_error({-1}, "out of range");
  st.length_ = g.config.max_position_embeddings - 1;  // pretend a full context
  const std::vector<int32_t> two = {5, 6};
  SequenceInput in{&st, two, false};
  EXPECT_THROW(g.forward->run({&in, 1}), troupe::Error);
}

}  // namespace
}  // namespace troupe::model

namespace troupe::model {
namespace {

// (random_tokens and golden_model come from the first block of this file.)
// The state holds packed rows in the stored formats: global KV costs MODEL.md §4's bytes
// per token (212 for tiny: nvfp4 KV rows + mxfp4 index keys of layers 1, 3, 6) and each
// layer's ring W fp8_ue8m0 rows of D + D/32 bytes.
TEST(ForwardState, PackedRowsCostTheSpecBytesPerToken) {
  const auto& g = golden_model();
  const auto tokens = random_tokens(64, 9);
  SequenceState st = SequenceState::empty(g.config);
  SequenceInput in{&st, tokens, false};
  g.forward->run({&in, 1});
  EXPECT_EQ(st.global_kv_bytes(), 212 * 64);
  const int64_t D = g.config.head_dim;
  for (const LayerState& l : st.layers)
    EXPECT_EQ(static_cast<int64_t>(l.window.size()), g.config.sliding_window * (D + D / 32));
  EXPECT_EQ(st.compressed_rows(1), 32);  // ratio 2
  EXPECT_EQ(st.compressed_rows(6), 64);  // ratio 1
}

}  // namespace
}  // namespace troupe::model

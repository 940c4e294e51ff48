// The group's draft length on DEP-R (runtime/speculative/draft_step_summary.h), directly:
// a rank's step summarised, the ranks' summaries reduced (in any grouping and order, as
// the DP sync's all-reduce combines them) and turned back into one step for the cost
// table; and the DP-sync message that carries them between processes
// (runtime/collectives/step_metadata_wire.h), its sparse histogram and what it refuses.
#include "runtime/speculative/draft_step_summary.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <initializer_list>
#include <random>

#include "kernels/check.h"
#include "runtime/collectives/step_metadata_wire.h"
#include "support/test_paths.h"

namespace troupe::runtime {
namespace {

using Drafts = std::vector<std::pair<int64_t, int64_t>>;

StepOutcome outcome(int64_t limit, int64_t batch, bool decode_only, double seconds, Drafts drafts) {
  StepOutcome o;
  o.limit = limit;
  o.batch = batch;
  o.decode_only = decode_only;
  o.seconds = seconds;
  o.drafts = std::move(drafts);
  for (const auto& d : o.drafts) o.k = std::max(o.k, d.first);
  return o;
}

TEST(DraftStepSummary, TheGroupsStepIsEveryRanksDraftsInTheSlowestRanksTime) {
  constexpr int64_t kmax = 3;
  const DraftStepSummary a = summarize(outcome(3, 2, true, 0.020, {{3, 1}, {2, 2}}), kmax, 4);
  const DraftStepSummary b = summarize(outcome(3, 1, false, 0.031, {{3, 1}}), kmax, 1);
  const DraftStepSummary idle = summarize(StepOutcome{}, kmax, 0);  // a dummy step
  EXPECT_TRUE(idle.verified.empty());
  EXPECT_EQ(a.verified.size(), 16u);
  EXPECT_EQ(a.verified[3 * 4 + 1], 1);
  EXPECT_EQ(a.verified[2 * 4 + 2], 1);

  const DraftStepSummary g = reduce_summaries(reduce_summaries(a, idle), b);
  EXPECT_EQ(g.limit, 3);
  EXPECT_EQ(g.decodes, 3);
  EXPECT_FALSE(g.timed);  // b's time had a prefill in it
  EXPECT_EQ(g.seconds, 0.031);
  EXPECT_EQ(g.running, 5);
  StepOutcome o;
  o.drafts = {{9, 9}};  // reused: cleared
  group_outcome(g, kmax, o);
  EXPECT_EQ(o.k, 3);
  EXPECT_EQ(o.batch, 3);
  EXPECT_FALSE(o.decode_only);
  EXPECT_EQ(o.seconds, 0.031);
  EXPECT_EQ(o.drafts, (Drafts{{2, 2}, {3, 1}, {3, 1}}));  // (drafted, accepted) ascending

  // A step with no drafts keeps its decodes and its k of 0.
  group_outcome(reduce_summaries(summarize(outcome(0, 4, true, 0.01, {}), kmax, 4), idle), kmax, o);
  EXPECT_EQ(o.k, 0);
  EXPECT_EQ(o.batch, 4);
  EXPECT_TRUE(o.drafts.empty());
}

// The all-reduce may combine the ranks in any grouping, the lower rank's first: every
// grouping gives the same summary, so every rank's cost table learns the same step.
TEST(DraftStepSummary, EveryGroupingOfTheRanksReducesAlike) {
  constexpr int64_t kmax = 4;
  std::mt19937_64 rng(5);
  for (int trial = 0; trial < 50; ++trial) {
    std::vector<DraftStepSummary> ranks;
    for (int r = 0; r < 6; ++r) {
      Drafts d;
      for (int64_t i = 0, n = int64_t(rng() % 4); i < n; ++i) {
        const int64_t drafted = 1 + int64_t(rng() % kmax);
        d.emplace_back(drafted, int64_t(rng() % (drafted + 1)));
      }
      ranks.push_back(summarize(outcome(int64_t(rng() % 5), int64_t(rng() % 3), rng() % 4 != 0,
                                        1e-3 * double(rng() % 100), d),
                                kmax, int64_t(rng() % 5)));
    }
    DraftStepSummary left = ranks[0];
    for (size_t r = 1; r < ranks.size(); ++r) left = reduce_summaries(left, ranks[r]);
    DraftStepSummary right = ranks.back();
    for (size_t r = ranks.size() - 1; r-- > 0;) right = reduce_summaries(ranks[r], right);
    const DraftStepSummary pairs = reduce_summaries(
        reduce_summaries(reduce_summaries(ranks[0], ranks[1]), reduce_summaries(ranks[2], ranks[3])),
        reduce_summaries(ranks[5], ranks[4]));
    EXPECT_EQ(left, right);
    EXPECT_EQ(left, pairs);
    StepOutcome o;
    group_outcome(left, kmax, o);
    size_t drafts = 0;
    for (const auto& s : ranks)
      for (int64_t n : s.verified) drafts += size_t(n);
    EXPECT_EQ(o.drafts.size(), drafts);
  }
}

TEST(DraftStepSummary, AHistogramThatCannotBeAStepIsAnError) {
  StepOutcome o;
  DraftStepSummary s;
  s.verified.assign(9, 0);  // kmax 2's
  EXPECT_THROW(group_outcome(s, 3, o), Error);
  s.verified[2 * 3 + 0] = -1;
  EXPECT_THROW(group_outcome(s, 2, o), Error);
  s.verified[2 * 3 + 0] = 0;
  s.verified[1 * 3 + 2] = 1;  // 2 of 1 draft accepted
  EXPECT_THROW(group_outcome(s, 2, o), Error);
  s.verified[1 * 3 + 2] = 0;
  s.verified[1 * 3 + 1] = kMaxGroupDrafts + 1;
  EXPECT_THROW(group_outcome(s, 2, o), Error);
  DraftStepSummary other;
  other.verified.assign(16, 0);
  EXPECT_THROW(reduce_summaries(s, other), Error);
  EXPECT_THROW(summarize(outcome(3, 1, true, 0, {{4, 1}}), 3, 1), Error);
}

collectives::StepMetadataMessage message_with(DraftStepSummary d) {
  collectives::StepMetadataMessage m;
  m.from = 1, m.to = 0, m.step = 7, m.round = 0;
  m.payload = collectives::local_step_metadata(1, 2, 7, 12, true, 3, false, true, 2);
  m.payload.draft_step = std::move(d);
  return m;
}

TEST(StepMetadataWire, TheDraftSummaryComesBackEqualInSparseForm) {
  using collectives::decode_step_metadata_message;
  using collectives::encode_step_metadata_message;
  DraftStepSummary d = summarize(outcome(3, 5, true, 0.0123, {{3, 0}, {3, 0}, {1, 1}}), 3, 6);
  const auto m = message_with(d);
  const std::vector<std::byte> wire = encode_step_metadata_message(m);
  const auto back = decode_step_metadata_message(wire);
  EXPECT_EQ(back.payload, m.payload);
  EXPECT_EQ(back.step, 7);
  // Two nonzero cells of 16: 10 bytes each after the fixed fields.
  const auto empty = encode_step_metadata_message(message_with(DraftStepSummary{}));
  EXPECT_EQ(wire.size(), empty.size() + 2 * 10);
  EXPECT_EQ(decode_step_metadata_message(empty).payload.draft_step, DraftStepSummary{});
  // kmax 64's histogram with one draft stays one cell.
  DraftStepSummary big = summarize(outcome(64, 1, true, 0.5, {{64, 17}}), 64, 1);
  EXPECT_EQ(big.verified.size(), 65u * 65u);
  EXPECT_EQ(encode_step_metadata_message(message_with(big)).size(), empty.size() + 10);
  EXPECT_EQ(decode_step_metadata_message(encode_step_metadata_message(message_with(big))).payload,
            message_with(big).payload);
}

TEST(StepMetadataWire, AHistogramCellOutOfRangeOrderOrCountIsRefused) {
  using collectives::decode_step_metadata_message;
  using collectives::encode_step_metadata_message;
  const auto base = encode_step_metadata_message(
      message_with(summarize(outcome(2, 2, true, 0.01, {{1, 0}, {2, 1}}), 2, 2)));
  EXPECT_NO_THROW(decode_step_metadata_message(base));
  // The tail: u32 side | u32 cells | (u8 drafted | u8 accepted | i64 count) x 2.
  const size_t cells_at = base.size() - 2 * 10;
  const size_t side_at = cells_at - 8;
  auto with = [&](std::initializer_list<std::pair<size_t, uint8_t>> bytes) {
    std::vector<std::byte> w = base;
    for (const auto& [at, v] : bytes) w[at] = std::byte{v};
    return w;
  };
  // The cells are (1, 0) and (2, 1) of side 3.
  EXPECT_THROW(decode_step_metadata_message(with({{side_at, 66}})), Error);      // side over 65
  EXPECT_THROW(decode_step_metadata_message(with({{side_at, 2}})), Error);       // drafted 2 >= side
  EXPECT_THROW(decode_step_metadata_message(with({{side_at + 4, 10}})), Error);  // 10 cells of 9
  EXPECT_THROW(decode_step_metadata_message(with({{side_at + 4, 3}})), Error);   // past the end
  EXPECT_THROW(decode_step_metadata_message(with({{cells_at + 1, 2}})), Error);  // 2 of 1 accepted
  EXPECT_THROW(decode_step_metadata_message(with({{cells_at, 2}, {cells_at + 1, 1}})),
               Error);  // (2, 1) twice
  EXPECT_THROW(decode_step_metadata_message(with({{cells_at, 2}, {cells_at + 1, 2}})),
               Error);  // (2, 2) before (2, 1)
  EXPECT_THROW(decode_step_metadata_message(with({{cells_at + 2, 0}})), Error);     // a count of 0
  EXPECT_THROW(decode_step_metadata_message(with({{cells_at + 9, 0x80}})), Error);  // below 0
  EXPECT_THROW(decode_step_metadata_message(with({{side_at - 17, 2}})), Error);     // timed 2
  EXPECT_NO_THROW(decode_step_metadata_message(with({{side_at - 17, 0}})));          // timed 0
  std::vector<std::byte> cut(base.begin(), base.end() - 1);
  EXPECT_THROW(decode_step_metadata_message(cut), Error);
}

// The fuzz corpus's seeds (fuzz/make_corpus.py): the message decodes to what the script
// meant, the near misses do not, so libFuzzer starts from both sides of the format.
TEST(StepMetadataWire, TheFuzzSeedsAreTheMessagesTheyMeanToBe) {
  const std::filesystem::path dir =
      std::filesystem::path(TROUPE_TEST_DATA) / ".." / ".." / "fuzz" / "corpus" / "peer_wire";
  auto read = [&](const char* name) {
    std::ifstream in(dir / name, std::ios::binary);
    EXPECT_TRUE(in) << name;
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::vector<std::byte> out(bytes.size());
    std::transform(bytes.begin(), bytes.end(), out.begin(), [](char c) { return std::byte(c); });
    return out;
  };
  const auto m = collectives::decode_step_metadata_message(read("dp-sync-message.bin"));
  EXPECT_EQ(m.payload.tokens, (std::vector<int64_t>{1, 2}));
  const DraftStepSummary& d = m.payload.draft_step;
  EXPECT_EQ(d.limit, 3);
  EXPECT_EQ(d.decodes, 2);
  EXPECT_EQ(d.seconds, 0.02);
  EXPECT_EQ(d.running, 4);
  ASSERT_EQ(d.verified.size(), 16u);
  EXPECT_EQ(d.verified[2 * 4 + 1], 1);
  EXPECT_EQ(d.verified[3 * 4 + 3], 2);
  EXPECT_THROW(collectives::decode_step_metadata_message(read("dp-sync-bad-flag.bin")), Error);
  EXPECT_THROW(collectives::decode_step_metadata_message(read("dp-sync-cells-out-of-order.bin")),
               Error);
}

}  // namespace
}  // namespace troupe::runtime

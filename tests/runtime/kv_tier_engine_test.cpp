// Host and disk tiers on the engine (issue 14, docs/kv-cache.md "Host and disk tiers"):
// six conversations whose prefixes are 4x the primary pool run twice; the second turns'
// prefix hits come back from the host and disk tiers by copy, and their tokens and
// full-vocabulary logprobs equal, bit for bit, a run whose pool holds everything (exact
// prefix replay: a hit equals a cold run). Corrupt, truncated and foreign disk files are
// ignored (the request recomputes, still equal); a fresh engine on the same disk dir (a
// daemon restart) hits the prefixes saved there. Invariants are checked every step.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "model/footprint.h"
#include "runtime/engine.h"
#include "runtime/kv_tier_workload.h"

namespace troupe::runtime {
namespace {

namespace fs = std::filesystem;
using namespace tier_workload;
using testing::golden_model;

constexpr int kConversations = 6;

Out run_one(Engine& e, RequestId id, const std::vector<int32_t>& prompt) {
  e.add_request(id, prompt, greedy_all_logprobs(4));
  Out out;
  for (int n = 0; e.has_unfinished() && n < 4000; ++n) {
    for (const RequestOutput& o : e.step()) {
      EXPECT_NE(o.status, RequestStatus::FinishedError) << o.error;
      out.add(o);
    }
    e.kv_cache().check_invariants();
  }
  EXPECT_FALSE(e.has_unfinished());
  return out;
}

// Turn 0 in conversation order, turn 1 in reverse (the most recent conversation goes on
// first), so the second turns find their prefixes in every tier: the last one's still in
// the pool, the ones before it in host memory, the oldest on disk.
std::vector<Out> run_turns(Engine& e, int turn, const std::vector<Out>& firsts) {
  std::vector<Out> outs(kConversations);
  for (int k = 0; k < kConversations; ++k) {
    const int c = turn == 0 ? k : kConversations - 1 - k;
    outs[size_t(c)] = run_one(e, 100 * turn + c,
                              turn == 0 ? first_turn(c) : second_turn(c, firsts[size_t(c)]));
  }
  return outs;
}

// The reference of conversation c's turn (runtime/kv_tier_workload.h).
const Out& ref(int turn, int c) {
  return turn == 0 ? reference(c).first : reference(c).second;
}

TEST(KvTierEngine, PrefixesFourTimesThePoolHitFromHostAndDiskAndEqualAnUnboundedPool) {
  TempDir dir("troupe-kv-tiers-a");
  Engine e(*golden_model().forward, nullptr, tier_engine(kPrimaryBlocks, 24, 128, dir.path));
  ASSERT_EQ(e.kv_cache().pool().num_blocks(), kPrimaryBlocks);
  const auto first = run_turns(e, 0, {});
  const KvCacheStats before = e.kv_cache().stats();
  const auto second = run_turns(e, 1, first);
  for (int c = 0; c < kConversations; ++c) {
    EXPECT_TRUE(first[size_t(c)] == ref(0, c)) << "turn 0, conversation " << c;
    EXPECT_TRUE(second[size_t(c)] == ref(1, c)) << "turn 1, conversation " << c;
  }
  const KvCacheStats& s = e.kv_cache().stats();
  EXPECT_EQ(s.hit_tokens - before.hit_tokens, kConversations * kPrefixTokens);  // nothing recomputed
  EXPECT_GT(s.tier_hit_tokens[int(KvTier::Host)], 0);
  EXPECT_GT(s.tier_hit_tokens[int(KvTier::Disk)], 0);
  EXPECT_EQ(s.tier_hit_tokens[0] + s.tier_hit_tokens[1] + s.tier_hit_tokens[2], s.hit_tokens);
  EXPECT_GT(e.kv_cache().tiers()->stats().spills, 0);
  EXPECT_FALSE(dir.files().empty());
}

TEST(KvTierEngine, WithoutTiersTheSamePoolRecomputes) {
  // The control: the same small pool with no tiers loses the prefixes (so the test above
  // can fail), and still gives the same tokens.
  Engine e(*golden_model().forward, nullptr, tier_engine(kPrimaryBlocks, 0, 0, ""));
  const auto first = run_turns(e, 0, {});
  const int64_t before = e.kv_cache().stats().hit_tokens;
  const auto second = run_turns(e, 1, first);
  EXPECT_LT(e.kv_cache().stats().hit_tokens - before, kConversations * kPrefixTokens / 2);
  for (int c = 0; c < kConversations; ++c)
    EXPECT_TRUE(second[size_t(c)] == ref(1, c)) << c;
}

// Inverts one byte of a file (a bit rot the checksum must catch).
void flip_byte(const fs::path& path, std::streamoff at) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(at);
  const char c = char(f.get());
  f.seekp(at);
  f.put(char(~c));
}

// Damages files the way a crash, a full disk or another deployment would.
void damage(const std::vector<fs::path>& files, const fs::path& dir) {
  ASSERT_GE(files.size(), 3u);
  flip_byte(files[0], 200);  // in the payload
  fs::resize_file(files[1], fs::file_size(files[1]) - 100);  // cut short
  std::ofstream(dir / "00000000deadbeef.kvb") << "not a block file";
  std::ofstream(dir / files[2].filename().string().append(".tmp")) << "a write cut by a crash";
}

TEST(KvTierEngine, ARestartOnTheSameDiskDirHitsTheSavedPrefixesAndIgnoresDamagedFiles) {
  TempDir dir("troupe-kv-tiers-b");
  std::vector<Out> first;
  {
    Engine e(*golden_model().forward, nullptr, tier_engine(kPrimaryBlocks, 24, 128, dir.path));
    first = run_turns(e, 0, {});
  }  // the daemon stops; the primary pool and host tier are gone, the files stay
  const auto files = dir.files();
  damage(files, dir.path);
  Engine e(*golden_model().forward, nullptr, tier_engine(kPrimaryBlocks, 24, 128, dir.path));
  EXPECT_EQ(e.kv_cache().tiers()->disk().num_used(), int64_t(files.size()) - 2);
  const auto second = run_turns(e, 1, first);
  for (int c = 0; c < kConversations; ++c)
    EXPECT_TRUE(second[size_t(c)] == ref(1, c)) << "conversation " << c;
  const KvCacheStats& s = e.kv_cache().stats();
  EXPECT_GT(s.tier_hit_tokens[int(KvTier::Disk)], 0);
  EXPECT_LT(s.hit_tokens, kConversations * kPrefixTokens);  // the damaged blocks were recomputed
}

TEST(KvTierEngine, FilesDamagedWhileRunningAreMissesNotWrongTokens) {
  TempDir dir("troupe-kv-tiers-c");
  Engine e(*golden_model().forward, nullptr, tier_engine(kPrimaryBlocks, 24, 128, dir.path));
  const auto first = run_turns(e, 0, {});
  for (const fs::path& f : dir.files()) flip_byte(f, 300);  // every file
  const auto second = run_turns(e, 1, first);
  for (int c = 0; c < kConversations; ++c)
    EXPECT_TRUE(second[size_t(c)] == ref(1, c)) << "conversation " << c;
  EXPECT_GT(e.kv_cache().tiers()->stats().bad_files, 0);
}

}  // namespace
}  // namespace troupe::runtime

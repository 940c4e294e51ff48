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
#include "runtime/golden_engine_config.h"
#include "support/golden.h"

namespace troupe::runtime {
namespace {

namespace fs = std::filesystem;
using testing::golden_model;
using testing::random_tokens;

constexpr int kConversations = 6;
constexpr int64_t kPrimaryBlocks = 24;  // 16-token blocks; each prefix is 16 of them

struct Out {
  std::vector<int32_t> tokens;
  std::vector<SampleLogprobs> logprobs;
  bool operator==(const Out& o) const {
    if (tokens != o.tokens || logprobs.size() != o.logprobs.size()) return false;
    for (size_t i = 0; i < logprobs.size(); ++i) {
      const auto &a = logprobs[i].top, &b = o.logprobs[i].top;
      if (a.size() != b.size()) return false;
      for (size_t k = 0; k < a.size(); ++k)
        if (a[k].token != b[k].token || a[k].logprob != b[k].logprob) return false;
    }
    return true;
  }
};

// A budget that buys exactly kPrimaryBlocks global KV blocks (0: a pool holding it all).
EngineConfig tier_engine(int64_t primary_blocks, int64_t host_blocks, int64_t disk_blocks,
                         const std::string& dir) {
  const auto& m = golden_model().config;
  EngineConfig c = golden_engine_config(64 << 20, true, 64, 2);
  c.enable_prefix_snapshots = false;  // every hit replays exactly: equal to a cold run
  c.executor.prefix_replay = PrefixReplay::Exact;
  const KvCacheBudget b = plan_kv_budget(m, 64 << 20, c.scheduler.max_num_running, c.block_size);
  if (primary_blocks > 0) c.kv_budget_bytes = b.reserved_bytes + primary_blocks * b.bytes_per_block;
  const int64_t block_bytes = PagedKvStorage::block_bytes_of(m, c.block_size);
  c.kv_offload_bytes = host_blocks * block_bytes;
  if (disk_blocks > 0) {
    c.kv_disk_dir = dir;
    c.kv_disk_bytes = disk_blocks * BlockFileGeometry{0, c.block_size, block_bytes}.file_bytes();
  }
  return c;
}

RequestParams greedy_all_logprobs(int64_t n) {
  RequestParams p = greedy(n);
  p.num_logprobs = static_cast<int32_t>(golden_model().config.vocab_size);
  return p;
}

Out run_one(Engine& e, RequestId id, const std::vector<int32_t>& prompt) {
  e.add_request(id, prompt, greedy_all_logprobs(4));
  Out out;
  for (int n = 0; e.has_unfinished() && n < 4000; ++n) {
    for (const RequestOutput& o : e.step()) {
      EXPECT_NE(o.status, RequestStatus::FinishedError) << o.error;
      out.tokens.insert(out.tokens.end(), o.new_tokens.begin(), o.new_tokens.end());
      out.logprobs.insert(out.logprobs.end(), o.new_logprobs.begin(), o.new_logprobs.end());
    }
    e.kv_cache().check_invariants();
  }
  EXPECT_FALSE(e.has_unfinished());
  return out;
}

std::vector<int32_t> first_turn(int c) {
  return random_tokens(264, 700 + c);  // 16 full blocks + 8 tokens
}

std::vector<int32_t> second_turn(int c, const Out& first) {
  std::vector<int32_t> p = first_turn(c);
  p.insert(p.end(), first.tokens.begin(), first.tokens.end());
  const auto more = random_tokens(9, 900 + c);
  p.insert(p.end(), more.begin(), more.end());
  return p;
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

// The reference: a pool that holds every prefix (no eviction at all).
struct Reference {
  std::vector<Out> first, second;
  int64_t second_hit_tokens = 0;
};

const Reference& reference() {
  static const Reference r = [] {
    Reference ref;
    Engine e(*golden_model().forward, nullptr, tier_engine(0, 0, 0, ""));
    ref.first = run_turns(e, 0, {});
    const int64_t before = e.kv_cache().stats().hit_tokens;
    ref.second = run_turns(e, 1, ref.first);
    ref.second_hit_tokens = e.kv_cache().stats().hit_tokens - before;
    EXPECT_EQ(e.kv_cache().stats().evictions, 0);
    return ref;
  }();
  return r;
}

struct TempDir {
  fs::path path;
  explicit TempDir(const char* name)
      : path(fs::temp_directory_path() / (std::string(name) + "-" + std::to_string(::getpid()))) {
    fs::remove_all(path);
  }
  ~TempDir() { fs::remove_all(path); }
  std::vector<fs::path> files() const {
    std::vector<fs::path> f;
    for (const auto& e : fs::directory_iterator(path))
      if (e.path().extension() == ".kvb") f.push_back(e.path());
    std::sort(f.begin(), f.end());
    return f;
  }
};

TEST(KvTierEngine, PrefixesFourTimesThePoolHitFromHostAndDiskAndEqualAnUnboundedPool) {
  const Reference& ref = reference();
  ASSERT_EQ(ref.second_hit_tokens, kConversations * 256);
  TempDir dir("troupe-kv-tiers-a");
  Engine e(*golden_model().forward, nullptr, tier_engine(kPrimaryBlocks, 24, 128, dir.path));
  ASSERT_EQ(e.kv_cache().pool().num_blocks(), kPrimaryBlocks);
  const auto first = run_turns(e, 0, {});
  const KvCacheStats before = e.kv_cache().stats();
  const auto second = run_turns(e, 1, first);
  for (int c = 0; c < kConversations; ++c) {
    EXPECT_TRUE(first[size_t(c)] == ref.first[size_t(c)]) << "turn 0, conversation " << c;
    EXPECT_TRUE(second[size_t(c)] == ref.second[size_t(c)]) << "turn 1, conversation " << c;
  }
  const KvCacheStats& s = e.kv_cache().stats();
  EXPECT_EQ(s.hit_tokens - before.hit_tokens, ref.second_hit_tokens);  // nothing recomputed
  EXPECT_GT(s.tier_hit_tokens[int(KvTier::Host)], 0);
  EXPECT_GT(s.tier_hit_tokens[int(KvTier::Disk)], 0);
  EXPECT_EQ(s.tier_hit_tokens[0] + s.tier_hit_tokens[1] + s.tier_hit_tokens[2], s.hit_tokens);
  EXPECT_GT(e.kv_cache().tiers()->stats().spills, 0);
  EXPECT_FALSE(dir.files().empty());
}

TEST(KvTierEngine, WithoutTiersTheSamePoolRecomputes) {
  // The control: the same small pool with no tiers loses the prefixes (so the test above
  // can fail), and still gives the same tokens.
  const Reference& ref = reference();
  Engine e(*golden_model().forward, nullptr, tier_engine(kPrimaryBlocks, 0, 0, ""));
  const auto first = run_turns(e, 0, {});
  const int64_t before = e.kv_cache().stats().hit_tokens;
  const auto second = run_turns(e, 1, first);
  EXPECT_LT(e.kv_cache().stats().hit_tokens - before, ref.second_hit_tokens / 2);
  for (int c = 0; c < kConversations; ++c)
    EXPECT_TRUE(second[size_t(c)] == ref.second[size_t(c)]) << c;
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
  const Reference& ref = reference();
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
    EXPECT_TRUE(second[size_t(c)] == ref.second[size_t(c)]) << "conversation " << c;
  const KvCacheStats& s = e.kv_cache().stats();
  EXPECT_GT(s.tier_hit_tokens[int(KvTier::Disk)], 0);
  EXPECT_LT(s.hit_tokens, ref.second_hit_tokens);  // the damaged blocks were recomputed
}

TEST(KvTierEngine, FilesDamagedWhileRunningAreMissesNotWrongTokens) {
  const Reference& ref = reference();
  TempDir dir("troupe-kv-tiers-c");
  Engine e(*golden_model().forward, nullptr, tier_engine(kPrimaryBlocks, 24, 128, dir.path));
  const auto first = run_turns(e, 0, {});
  for (const fs::path& f : dir.files()) flip_byte(f, 300);  // every file
  const auto second = run_turns(e, 1, first);
  for (int c = 0; c < kConversations; ++c)
    EXPECT_TRUE(second[size_t(c)] == ref.second[size_t(c)]) << "conversation " << c;
  EXPECT_GT(e.kv_cache().tiers()->stats().bad_files, 0);
}

}  // namespace
}  // namespace troupe::runtime

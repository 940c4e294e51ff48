// The host and disk tier workload (issue 14, docs/kv-cache.md "Host and disk tiers"),
// shared by the tier tests of one rank (kv_tier_engine_test.cpp) and of R ranks
// (dep_kv_tiers_test.cpp, tests/actors/engine_dep_tiers_test.cpp): conversations of two
// turns whose first turn is 16 full 16-token blocks and 8 tokens, against a primary pool
// of kPrimaryBlocks blocks per rank, so six conversations on a rank are 4x its pool. The
// reference is each conversation alone on an engine whose pool holds everything: with
// exact prefix replay (snapshots off) a hit equals a cold run bit for bit, so it is what
// any tiered run, on any rank, must give.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "runtime/engine.h"
#include "runtime/golden_engine_config.h"
#include "support/golden.h"

namespace troupe::runtime::tier_workload {

constexpr int64_t kPrimaryBlocks = 24;  // 16-token blocks; each prefix is 16 of them
constexpr int64_t kPrefixTokens = 256;  // what a second turn hits: its first turn's full blocks

// Greedy tokens and full-vocabulary logprobs of one request, compared bit for bit.
struct Out {
  std::vector<int32_t> tokens;
  std::vector<SampleLogprobs> logprobs;
  void add(const RequestOutput& o) {
    tokens.insert(tokens.end(), o.new_tokens.begin(), o.new_tokens.end());
    logprobs.insert(logprobs.end(), o.new_logprobs.begin(), o.new_logprobs.end());
  }
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

// A budget that buys exactly primary_blocks global KV blocks per rank (0: a pool holding
// it all), host_blocks blocks of host tier and disk_blocks block files in `dir`, per rank
// times `ranks` (the instance's figures, which each of its ranks gets a share of).
inline EngineConfig tier_engine(int64_t primary_blocks, int64_t host_blocks, int64_t disk_blocks,
                                const std::string& dir, int ranks = 1) {
  const auto& m = testing::golden_model().config;
  EngineConfig c = golden_engine_config(64 << 20, true, 64, 2);
  c.enable_prefix_snapshots = false;  // every hit replays exactly: equal to a cold run
  c.executor.prefix_replay = PrefixReplay::Exact;
  const KvCacheBudget b = plan_kv_budget(m, 64 << 20, c.scheduler.max_num_running, c.block_size);
  if (primary_blocks > 0) c.kv_budget_bytes = b.reserved_bytes + primary_blocks * b.bytes_per_block;
  const int64_t block_bytes = PagedKvStorage::block_bytes_of(m, c.block_size);
  c.kv_offload_bytes = ranks * host_blocks * block_bytes;
  if (disk_blocks > 0) {
    c.kv_disk_dir = dir;
    c.kv_disk_bytes =
        ranks * disk_blocks * BlockFileGeometry{0, c.block_size, block_bytes}.file_bytes();
  }
  return c;
}

inline RequestParams greedy_all_logprobs(int64_t n) {
  RequestParams p = greedy(n);
  p.num_logprobs = static_cast<int32_t>(testing::golden_model().config.vocab_size);
  return p;
}

inline std::vector<int32_t> first_turn(int c) {
  return testing::random_tokens(264, 700 + c);  // 16 full blocks + 8 tokens
}

inline std::vector<int32_t> second_turn(int c, const Out& first) {
  std::vector<int32_t> p = first_turn(c);
  p.insert(p.end(), first.tokens.begin(), first.tokens.end());
  const auto more = testing::random_tokens(9, 900 + c);
  p.insert(p.end(), more.begin(), more.end());
  return p;
}

// Conversation c's two turns alone on a pool that holds everything (computed once).
struct ReferenceConversation {
  Out first, second;
};

inline const ReferenceConversation& reference(int c) {
  static std::map<int, ReferenceConversation> done;
  if (auto it = done.find(c); it != done.end()) return it->second;
  Engine e(*testing::golden_model().forward, nullptr, tier_engine(0, 0, 0, ""));
  ReferenceConversation r;
  auto run = [&](RequestId id, const std::vector<int32_t>& prompt) {
    e.add_request(id, prompt, greedy_all_logprobs(4));
    Out out;
    while (e.has_unfinished())
      for (const RequestOutput& o : e.step()) out.add(o);
    return out;
  };
  r.first = run(0, first_turn(c));
  r.second = run(1, second_turn(c, r.first));
  EXPECT_EQ(e.kv_cache().stats().hit_tokens, kPrefixTokens) << "reference conversation " << c;
  EXPECT_EQ(e.kv_cache().stats().evictions, 0);
  return done.emplace(c, std::move(r)).first->second;
}

// A disk tier folder of this process, removed before and after.
struct TempDir {
  std::filesystem::path path;
  explicit TempDir(const char* name)
      : path(std::filesystem::temp_directory_path() /
             (std::string(name) + "-" + std::to_string(::getpid()))) {
    std::filesystem::remove_all(path);
  }
  ~TempDir() { std::filesystem::remove_all(path); }
  // The block files directly in `sub` of it (a rank's folder), sorted.
  std::vector<std::filesystem::path> files(const std::string& sub = "") const {
    std::vector<std::filesystem::path> f;
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(path / sub, ec))
      if (e.path().extension() == ".kvb") f.push_back(e.path());
    std::sort(f.begin(), f.end());
    return f;
  }
};

}  // namespace troupe::runtime::tier_workload

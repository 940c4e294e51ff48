// Randomized stress of KvCacheManager driven like a scheduler: many requests of random
// lengths drawn from a few shared prefixes, chunked prefill, decode growth, preemption
// when blocks run out, random aborts. After every step: no block or slot leaks
// (free + cached + used == num_blocks; each ref count == tables holding the block), and
// every prefix hit handed out blocks whose contents (tracked independently here) are
// exactly the request's tokens.
#include <gtest/gtest.h>

#include <map>
#include <random>

#include "kv_cache_test_util.h"
#include "runtime/kv_cache/kv_cache_manager.h"

namespace troupe::runtime {
namespace {

struct Live {
  std::vector<int32_t> tokens;  // prompt, then decoded tokens appended
  int64_t target_len = 0;       // finishes when tokens reach this length
  int64_t computed = 0;
};

// A deliberately weak hash (16 values): collisions on every other block.
uint64_t weak_hash(uint64_t parent, std::span<const int32_t> t) {
  return (parent * 31 + uint64_t(uint32_t(t[0]))) % 16;
}

class StressDriver {
 public:
  StressDriver(const KvCacheConfig& c, uint32_t seed) : kv_(c), rng_(seed), bs_(c.block_size) {
    for (auto& f : families_) f = random_tokens(40);
  }

  void step() {
    const int action = pick(0, 9);
    if (action < 3)
      try_admit();
    else if (action < 9)
      advance(random_live());
    else
      abort(random_live());
    check();
  }
  int64_t hits() const { return kv_.stats().prefix_hits; }
  int64_t evictions() const { return kv_.stats().evictions; }
  int64_t preemptions() const { return preemptions_; }

 private:
  void try_admit() {
    Live r;
    r.tokens = families_[size_t(pick(0, 3))];
    r.tokens.resize(size_t(pick(1, 40)));
    const auto tail = random_tokens(pick(0, 20));
    r.tokens.insert(r.tokens.end(), tail.begin(), tail.end());
    r.target_len = int64_t(r.tokens.size()) + pick(1, 12);
    const CachedPrefix hit = kv_.find_cached_prefix(r.tokens);
    const int64_t total = std::min<int64_t>(int64_t(r.tokens.size()), hit.num_tokens + pick(1, 16));
    const RequestId id = next_id_++;
    if (!kv_.admit(id, hit, total)) return;
    const auto table = kv_.block_table(id);
    for (int64_t i = 0; i < hit.num_tokens / bs_; ++i)  // hit blocks hold our tokens
      ASSERT_EQ(contents_.at(table[size_t(i)]), block_of(r.tokens, i)) << "bad hit, block " << i;
    r.computed = hit.num_tokens;
    live_[id] = std::move(r);
  }

  // One scheduler step for `id`: a prefill chunk or one decode token.
  void advance(RequestId id) {
    if (id < 0) return;
    Live& r = live_[id];
    const int64_t n = r.computed < int64_t(r.tokens.size())
                          ? std::min<int64_t>(pick(1, 16), int64_t(r.tokens.size()) - r.computed)
                          : 1;
    if (!kv_.allocate(id, r.computed + n)) return preempt(id);
    r.computed += n;
    if (r.computed == int64_t(r.tokens.size())) r.tokens.push_back(pick(0, 1 << 20));  // sampled
    record_contents(id, r);
    kv_.commit_full_blocks(id, r.tokens, r.computed);
    if (int64_t(r.tokens.size()) >= r.target_len) abort(id);  // finished
  }

  // Commit publishes only the blocks this request computed itself; remember their tokens.
  void record_contents(RequestId id, const Live& r) {
    const auto table = kv_.block_table(id);
    for (int64_t i = 0; i < r.computed / bs_; ++i)
      if (!kv_.pool().is_hashed(table[size_t(i)]) && kv_.pool().ref_count(table[size_t(i)]) == 1)
        contents_[table[size_t(i)]] = block_of(r.tokens, i);
  }

  void preempt(RequestId id) {  // the scheduler recomputes it later; here it just leaves
    ++preemptions_;
    abort(id);
  }
  void abort(RequestId id) {
    if (id < 0) return;
    kv_.free(id);
    live_.erase(id);
  }

  void check() {
    kv_.check_invariants();
    const int64_t free_never = kv_.num_free_blocks() - kv_.num_cached_blocks();
    ASSERT_EQ(free_never + kv_.num_cached_blocks() + kv_.num_used_blocks(),
              kv_.pool().num_blocks());
    ASSERT_EQ(kv_.num_free_swa_slots() + int64_t(live_.size()), kv_.config().swa_slots);
  }

  std::vector<int32_t> block_of(const std::vector<int32_t>& t, int64_t i) const {
    return {t.begin() + i * bs_, t.begin() + (i + 1) * bs_};
  }
  std::vector<int32_t> random_tokens(int64_t n) {
    std::vector<int32_t> t(static_cast<size_t>(n));
    for (auto& x : t) x = pick(0, 50);  // a small vocabulary makes near-collisions common
    return t;
  }
  RequestId random_live() {
    if (live_.empty()) return -1;
    return std::next(live_.begin(), pick(0, int(live_.size()) - 1))->first;
  }
  int pick(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }

  KvCacheManager kv_;
  std::mt19937 rng_;
  int64_t bs_;
  std::vector<int32_t> families_[4];
  std::map<RequestId, Live> live_;
  std::map<int32_t, std::vector<int32_t>> contents_;
  RequestId next_id_ = 0;
  int64_t preemptions_ = 0;
};

struct StressCase {
  int64_t block_size, num_blocks, swa_slots;
  BlockHashFn hash;
  uint32_t seed;
};

TEST(KvCacheStress, NoLeaksAndHitsAreExact) {
  const std::vector<StressCase> cases = {
      {4, 40, 6, nullptr, 1}, {4, 40, 6, weak_hash, 2}, {1, 60, 4, nullptr, 3},
      {3, 17, 3, nullptr, 4}, {8, 33, 8, weak_hash, 5}, {4, 1, 1, nullptr, 6},
  };
  for (const StressCase& c : cases) {
    SCOPED_TRACE(testing::Message()
                 << "block " << c.block_size << " blocks " << c.num_blocks << " seed " << c.seed);
    KvCacheConfig cfg;
    cfg.block_size = c.block_size, cfg.num_blocks = c.num_blocks, cfg.swa_slots = c.swa_slots;
    cfg.window = 5, cfg.hash_fn = c.hash;
    StressDriver d(cfg, c.seed);
    for (int i = 0; i < 4000 && !testing::Test::HasFatalFailure(); ++i) d.step();
    // The workload must exercise what it claims to (except in the 1-block pool).
    if (c.num_blocks > 1) {
      EXPECT_GT(d.hits(), 10);
      EXPECT_GT(d.evictions(), 10);
      EXPECT_GT(d.preemptions(), 0);
    }
  }
}

}  // namespace
}  // namespace troupe::runtime

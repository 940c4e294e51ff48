// KV save by name in the bookkeeping (docs/kv-cache.md "Saved prefixes"): a pin holds its
// full blocks against any eviction and within the pinned budget, unpin gives them back,
// and the disk index of saved prefixes parses only what it wrote.
#include <gtest/gtest.h>

#include "runtime/kv_cache/pin_index.h"
#include "kv_cache_test_util.h"

namespace troupe::runtime::test {
namespace {

KvCacheConfig pin_config() {
  KvCacheConfig c;
  c.block_size = 4, c.num_blocks = 8, c.swa_slots = 2, c.pinned_blocks = 4;
  return c;
}

// Runs `tokens` as request id and frees it, pinning it as `name` if given.
void run(KvCacheManager& kv, RequestId id, const std::vector<int32_t>& tokens,
         const std::string& name = {}) {
  if (!name.empty()) {
    ASSERT_EQ(kv.reserve_pin(id, name, tokens), "");
  }
  ASSERT_TRUE(admit(kv, id, tokens, int64_t(tokens.size())));
  kv.commit_full_blocks(id, tokens, int64_t(tokens.size()));
  if (!name.empty()) kv.pin_finished(id);
  kv.free(id);
  kv.check_invariants();
}

TEST(KvPins, PinnedBlocksSurviveEvictionUntilUnpinned) {
  KvCacheManager kv(pin_config());
  const std::vector<int32_t> saved = iota_tokens(1, 9);  // 2 full blocks + 1 token
  run(kv, 1, saved, "conv");
  ASSERT_NE(kv.find_pin("conv"), nullptr);
  EXPECT_EQ(kv.find_pin("conv")->blocks.size(), 2u);
  EXPECT_EQ(kv.num_pinned_blocks(), 2);
  EXPECT_EQ(kv.num_used_blocks(), 2) << "held by the pin, not free";
  // Every other block is handed out and evicted, twice over: the pinned two stay.
  run(kv, 2, iota_tokens(100, 24));
  run(kv, 3, iota_tokens(200, 24));
  EXPECT_FALSE(admit(kv, 4, iota_tokens(300, 28), 28)) << "7 blocks: the pool has 6 to give";
  EXPECT_EQ(kv.find_cached_prefix(concat(saved, {77})).num_tokens, 8);
  EXPECT_TRUE(kv.unpin("conv"));
  EXPECT_FALSE(kv.unpin("conv"));
  EXPECT_EQ(kv.num_pinned_blocks(), 0);
  run(kv, 5, iota_tokens(400, 32));  // all 8 blocks: the unpinned prefix is evicted
  EXPECT_EQ(kv.find_cached_prefix(concat(saved, {77})).num_tokens, 0);
}

TEST(KvPins, TheBudgetCountsReservationsAndRefusesWithAReason) {
  KvCacheManager kv(pin_config());
  EXPECT_EQ(kv.reserve_pin(1, "a", iota_tokens(1, 12)), "");  // 3 of 4 blocks, in flight
  const std::string why = kv.reserve_pin(2, "b", iota_tokens(50, 8));
  EXPECT_NE(why.find("kv-pinned-bytes"), std::string::npos) << why;
  EXPECT_NE(kv.reserve_pin(3, "c", iota_tokens(50, 3)), "") << "less than one block";
  kv.cancel_pin(1);
  EXPECT_EQ(kv.num_pinned_blocks(), 0);
  KvCacheConfig off = pin_config();
  off.pinned_blocks = 0;
  KvCacheManager none(off);
  EXPECT_NE(none.reserve_pin(1, "a", iota_tokens(1, 8)).find("kv-pinned-bytes is 0"),
            std::string::npos);
}

TEST(KvPins, SavingANameAgainReplacesItsPin) {
  KvCacheManager kv(pin_config());
  run(kv, 1, iota_tokens(1, 8), "conv");
  run(kv, 2, iota_tokens(30, 8), "conv");
  EXPECT_EQ(kv.pins().size(), 1u);
  EXPECT_EQ(kv.num_pinned_blocks(), 2);
  EXPECT_EQ(kv.find_pin("conv")->tokens, iota_tokens(30, 8));
  EXPECT_EQ(kv.num_used_blocks(), 2) << "the first pin's blocks were released";
}

TEST(PinIndex, RoundTripsAndRefusesBadIndexes) {
  const std::vector<SavedPrefix> pins = {{"a", {1, 2, 3}}, {"conv-7", {}}};
  std::string why;
  const auto back = parse_pin_index(encode_pin_index(pins), &why);
  ASSERT_TRUE(back) << why;
  EXPECT_EQ(*back, pins);
  for (const char* bad : {"", "[]", "{\"version\": 2, \"pins\": []}",
                          "{\"version\": 1, \"pins\": [{\"name\": \"\", \"tokens\": []}]}",
                          "{\"version\": 1, \"pins\": [{\"name\": \"a\", \"tokens\": [-1]}]}",
                          "{\"version\": 1, \"pins\": [{\"name\": \"a\", \"tokens\": [1.5]}]}",
                          "{\"version\": 1, \"pins\": [{\"name\": \"a\", \"tokens\": []}, "
                          "{\"name\": \"a\", \"tokens\": []}]}"}) {
    EXPECT_FALSE(parse_pin_index(bad, &why)) << bad;
    EXPECT_FALSE(why.empty());
  }
}

}  // namespace
}  // namespace troupe::runtime::test

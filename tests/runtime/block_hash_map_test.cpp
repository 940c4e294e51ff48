// BlockHashMap (runtime/kv_cache/block_hash_map.h) against std::unordered_map: random
// inserts, erases and finds on tables small enough that runs of colliding keys form and
// erasing from their middle exercises the backward shift, including runs that wrap past
// the table's end.
#include "runtime/kv_cache/block_hash_map.h"

#include <gtest/gtest.h>

#include <random>
#include <unordered_map>
#include <vector>

#include "kernels/check.h"

namespace troupe::runtime {
namespace {

TEST(BlockHashMap, AgreesWithAStdMapUnderRandomInsertsAndErases) {
  for (int64_t capacity : {1, 3, 8, 100}) {
    for (uint32_t seed = 0; seed < 20; ++seed) {
      std::mt19937_64 rng(seed * 7919 + uint32_t(capacity));
      BlockHashMap m(capacity);
      std::unordered_map<uint64_t, int32_t> ref;
      // Few distinct keys, some of them near each other and some far apart, so the
      // same keys come back after being erased.
      std::vector<uint64_t> keys;
      for (int64_t i = 0; i < 3 * capacity + 2; ++i) keys.push_back(i % 2 ? rng() : uint64_t(i));
      for (int op = 0; op < 4000; ++op) {
        const uint64_t k = keys[rng() % keys.size()];
        const auto it = ref.find(k);
        ASSERT_EQ(m.find(k), it == ref.end() ? -1 : it->second) << "capacity " << capacity << " seed " << seed;
        if (rng() % 2 == 0 && int64_t(ref.size()) < capacity) {
          const auto v = static_cast<int32_t>(rng() % 1000);
          EXPECT_EQ(m.insert(k, v), ref.emplace(k, v).second);
        } else {
          EXPECT_EQ(m.erase(k), ref.erase(k) == 1);
        }
        ASSERT_EQ(m.size(), int64_t(ref.size()));
      }
      int64_t seen = 0;
      m.for_each([&](uint64_t k, int32_t v) {
        ++seen;
        ASSERT_TRUE(ref.count(k)) << k;
        EXPECT_EQ(ref.at(k), v);
      });
      EXPECT_EQ(seen, int64_t(ref.size()));
    }
  }
}

TEST(BlockHashMap, RefusesAnEntryPastItsCapacityAndKeepsAnExistingKey) {
  BlockHashMap m(2);
  EXPECT_TRUE(m.insert(10, 1));
  EXPECT_FALSE(m.insert(10, 5));  // the key is there: no change
  EXPECT_EQ(m.find(10), 1);
  EXPECT_TRUE(m.insert(11, 2));
  EXPECT_THROW(m.insert(12, 3), Error);
  EXPECT_EQ(m.find(12), -1);
  EXPECT_TRUE(m.erase(10));
  EXPECT_FALSE(m.erase(10));
  EXPECT_TRUE(m.insert(12, 3));
  EXPECT_EQ(m.find(11), 2);
  EXPECT_EQ(m.find(12), 3);
}

}  // namespace
}  // namespace troupe::runtime

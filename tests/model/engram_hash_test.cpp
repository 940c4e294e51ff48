// MODEL.md §7 Engram hashing: the spec's test vectors plus a hand-worked id.
#include "model/engram_hash.h"

#include <gtest/gtest.h>

#include <vector>

#include "kernels/check.h"

namespace troupe::model {
namespace {

// Only the Engram keys of §1; the rest of the config is irrelevant to hashing.
ModelConfig engram_config(bool full) {
  ModelConfig c;
  c.engram_layer_ids = full ? std::vector<int64_t>{1, 14} : std::vector<int64_t>{1, 4};
  c.engram_max_ngram_size = full ? 4 : 3;
  c.engram_n_heads = full ? 8 : 2;
  c.engram_vocab_size = full ? 16000000 : 4999;
  c.engram_compressed_vocab_size = full ? 99092 : 4096;
  return c;
}

TEST(EngramHash, SplitMix64Vectors) {
  EXPECT_EQ(splitmix64(0), 0xE220A8397B1DCDAFull);
  EXPECT_EQ(splitmix64(160112), 16219956885574543929ull);
}

TEST(EngramHash, TinyPrimesAndOffsets) {
  const EngramHashTables t = engram_hash_tables(engram_config(false));
  EXPECT_EQ(t.n_heads, 2);
  EXPECT_EQ(t.max_ngram, 3);
  ASSERT_EQ(t.primes.size(), 2u);
  EXPECT_EQ(t.primes[0], (std::vector<int64_t>{4999, 5003, 5009, 5011}));
  EXPECT_EQ(t.primes[1], (std::vector<int64_t>{5021, 5023, 5039, 5051}));
  EXPECT_EQ(t.offsets[0], (std::vector<int64_t>{0, 4999, 10002, 15011}));
  EXPECT_EQ(t.offsets[1], (std::vector<int64_t>{0, 5021, 10044, 15083}));
  EXPECT_EQ(engram_num_embeddings(t), (std::vector<int64_t>{20022, 20134}));
}

TEST(EngramHash, FullSizePrimes) {
  const ModelConfig c = engram_config(true);
  const EngramHashTables t = engram_hash_tables(c);
  ASSERT_EQ(t.primes.size(), 2u);
  ASSERT_EQ(t.primes[0].size(), 24u);  // eH·(N-1)
  EXPECT_EQ(t.primes[0][0], 16000057);
  EXPECT_EQ(t.primes[0][1], 16000079);
  EXPECT_EQ(engram_num_embeddings(c), (std::vector<int64_t>{384006168, 384016682}));
}

TEST(EngramHash, TinyMultipliers) {
  const ModelConfig c = engram_config(false);
  EXPECT_EQ(engram_multipliers(c, 0),
            (std::vector<int64_t>{485655199433983, 1688213028722453, 958894007901705}));
  EXPECT_EQ(engram_multipliers(c, 1),
            (std::vector<int64_t>{1583053031913337, 19504627495049, 321931036788863}));
  EXPECT_THROW(engram_multipliers(c, 2), Error);
}

TEST(EngramHash, IdsHandWorked) {
  // Tiny layer 1 (index 0), tokens ... 7, 5, 3 at p-2, p-1, p; multipliers 3, 5, 7.
  const EngramHashTables t = engram_hash_tables(engram_config(false));
  const int64_t c[3] = {3, 5, 7}, mult[3] = {3, 5, 7};
  int64_t ids[4] = {-1, -1, -1, -1};
  engram_hash_ids(t, 0, c, mult, ids);
  // 2-gram: 9 ^ 25 = 16; 3-gram: 16 ^ 49 = 33; each reduced mod its prime + offset.
  EXPECT_EQ(ids[0], 16);
  EXPECT_EQ(ids[1], 4999 + 16);
  EXPECT_EQ(ids[2], 10002 + 33);
  EXPECT_EQ(ids[3], 15011 + 33);
}

TEST(EngramHash, IdsStayInsideTheirColumns) {
  const ModelConfig cfg = engram_config(false);
  const EngramHashTables t = engram_hash_tables(cfg);
  const int64_t pad = 2;
  for (int64_t li = 0; li < 2; ++li) {
    const std::vector<int64_t> mult = engram_multipliers(cfg, li);
    for (int64_t tok : {int64_t{0}, int64_t{1}, int64_t{4095}, int64_t{1234}}) {
      const int64_t c[3] = {tok, 4095 - tok, pad};
      int64_t ids[4];
      engram_hash_ids(t, li, c, mult.data(), ids);
      // Reference with explicit modular arithmetic per column.
      int64_t roll = c[0] * mult[0];
      for (int64_t n = 1; n < 3; ++n) {
        roll ^= c[n] * mult[n];
        for (int64_t h = 0; h < 2; ++h) {
          const int64_t j = (n - 1) * 2 + h;
          EXPECT_GE(ids[j], t.offsets[li][j]);
          EXPECT_LT(ids[j], t.offsets[li][j] + t.primes[li][j]);
          EXPECT_EQ(ids[j] - t.offsets[li][j], roll % t.primes[li][j]);
        }
      }
    }
  }
  int64_t ids[4];
  const int64_t c[3] = {0, 0, 0};
  EXPECT_THROW(engram_hash_ids(t, 2, c, c, ids), Error);
}

TEST(EngramHash, RejectsBadKeysAndHandlesNoLayers) {
  ModelConfig c = engram_config(false);
  c.engram_max_ngram_size = 1;
  EXPECT_THROW(engram_hash_tables(c), Error);
  c = engram_config(false);
  c.engram_n_heads = 0;
  EXPECT_THROW(engram_hash_tables(c), Error);
  c.engram_layer_ids.clear();
  EXPECT_TRUE(engram_hash_tables(c).primes.empty());
}

}  // namespace
}  // namespace troupe::model

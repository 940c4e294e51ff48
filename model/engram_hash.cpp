#include "model/engram_hash.h"

#include <limits>
#include <numeric>
#include <set>

#include "kernels/check.h"

namespace troupe::model {

namespace {

// Trial division; moduli are around engram_vocab_size (16M full), a few dozen per model.
bool is_prime(int64_t n) {
  if (n < 2) return false;
  if (n % 2 == 0) return n == 2;
  if (n % 3 == 0) return n == 3;
  for (int64_t d = 5; d * d <= n; d += 6) {
    if (n % d == 0 || n % (d + 2) == 0) return false;
  }
  return true;
}

int64_t next_unseen_prime(int64_t after, const std::set<int64_t>& seen) {
  int64_t p = after + 1;
  while (!is_prime(p) || seen.count(p)) ++p;
  return p;
}

void check_engram_keys(const ModelConfig& c) {
  TROUPE_CHECK(c.engram_max_ngram_size >= 2, "engram_max_ngram_size must be >= 2, got ",
               c.engram_max_ngram_size);
  TROUPE_CHECK(c.engram_n_heads >= 1, "engram_n_heads must be >= 1, got ", c.engram_n_heads);
  TROUPE_CHECK(c.engram_vocab_size >= 1, "engram_vocab_size must be >= 1, got ",
               c.engram_vocab_size);
}

}  // namespace

uint64_t splitmix64(uint64_t v) {
  uint64_t z = v + 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

EngramHashTables engram_hash_tables(const ModelConfig& c) {
  EngramHashTables t;
  t.n_heads = c.engram_n_heads;
  t.max_ngram = c.engram_max_ngram_size;
  if (c.engram_layer_ids.empty()) return t;
  check_engram_keys(c);
  // 'seen' spans all layers, so no two lookup columns of the model share a modulus;
  // each n-gram order restarts its search at the prime base.
  std::set<int64_t> seen;
  for (size_t i = 0; i < c.engram_layer_ids.size(); ++i) {
    std::vector<int64_t> primes;
    for (int64_t order = 0; order < t.max_ngram - 1; ++order) {
      int64_t cur = c.engram_vocab_size - 1;
      for (int64_t h = 0; h < t.n_heads; ++h) {
        cur = next_unseen_prime(cur, seen);
        seen.insert(cur);
        primes.push_back(cur);
      }
    }
    std::vector<int64_t> offsets(primes.size(), 0);
    std::exclusive_scan(primes.begin(), primes.end(), offsets.begin(), int64_t{0});
    t.primes.push_back(std::move(primes));
    t.offsets.push_back(std::move(offsets));
  }
  return t;
}

std::vector<int64_t> engram_num_embeddings(const EngramHashTables& t) {
  std::vector<int64_t> n;
  for (const auto& primes : t.primes)
    n.push_back(std::accumulate(primes.begin(), primes.end(), int64_t{0}));
  return n;
}

std::vector<int64_t> engram_num_embeddings(const ModelConfig& c) {
  return engram_num_embeddings(engram_hash_tables(c));
}

void engram_hash_ids(const EngramHashTables& t, int64_t layer_index, const int64_t* c,
                     const int64_t* mult, int64_t* ids_out) {
  TROUPE_CHECK(layer_index >= 0 && layer_index < static_cast<int64_t>(t.primes.size()),
               "engram_hash_ids: layer_index ", layer_index, " outside [0, ", t.primes.size(), ")");
  const std::vector<int64_t>& primes = t.primes[layer_index];
  const std::vector<int64_t>& offsets = t.offsets[layer_index];
  // Products cannot overflow: c < cV and mult <= (2^63-1) div cV; XOR keeps them >= 0.
  int64_t roll = c[0] * mult[0];
  for (int64_t n = 1; n < t.max_ngram; ++n) {
    roll ^= c[n] * mult[n];
    for (int64_t h = 0; h < t.n_heads; ++h) {
      const int64_t j = (n - 1) * t.n_heads + h;
      ids_out[j] = roll % primes[j] + offsets[j];
    }
  }
}

std::vector<int64_t> engram_multipliers(const ModelConfig& c, int64_t layer_index) {
  TROUPE_CHECK(layer_index >= 0 && layer_index < static_cast<int64_t>(c.engram_layer_ids.size()),
               "engram_multipliers: layer_index ", layer_index, " outside engram_layer_ids");
  TROUPE_CHECK(
      c.engram_compressed_vocab_size >= 1 && c.engram_compressed_vocab_size <= (int64_t{1} << 61),
      "engram_compressed_vocab_size out of range: ", c.engram_compressed_vocab_size);
  const uint64_t bound = static_cast<uint64_t>(std::numeric_limits<int64_t>::max() /
                                               c.engram_compressed_vocab_size / 2);
  const uint64_t layer_id = static_cast<uint64_t>(c.engram_layer_ids[layer_index]);
  std::vector<int64_t> mult;
  for (int64_t k = 0; k < c.engram_max_ngram_size; ++k) {
    const uint64_t u = splitmix64(10007 * layer_id * 16 + static_cast<uint64_t>(k)) % bound;
    mult.push_back(static_cast<int64_t>(2 * u + 1));
  }
  return mult;
}

}  // namespace troupe::model

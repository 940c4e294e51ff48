// Engram n-gram hashing (MODEL.md §7): the per-layer prime moduli and offsets, the
// CHOSEN multiplier rule, and the id of each hashed lookup for one token. Pure
// integer logic; the table lookup and gate live in the Engram layer.
#pragma once

#include <cstdint>
#include <vector>

#include "model/config.h"

namespace troupe::model {

// The first output of a SplitMix64 generator seeded with v (u64 arithmetic mod 2^64).
uint64_t splitmix64(uint64_t v);

// Moduli and offsets of every Engram layer. Lookup column j = (n-1)·eH + h hashes the
// (n+1)-gram for head h; it owns table rows [offsets[i][j], offsets[i][j] + primes[i][j]).
struct EngramHashTables {
  int64_t n_heads = 0;                        // eH
  int64_t max_ngram = 0;                      // N
  std::vector<std::vector<int64_t>> primes;   // [layer i][(n-1)·eH + h]
  std::vector<std::vector<int64_t>> offsets;  // [layer i][(n-1)·eH + h], exclusive prefix sums
};

// Primes by the §7 'seen' rule, in engram_layer_ids order; empty when there are no
// Engram layers. Throws troupe::Error naming the key when N < 2, eH < 1 or the
// prime base is < 1.
EngramHashTables engram_hash_tables(const ModelConfig& c);

// engram_num_embeddings[i] = Σ primes of layer i (the table row counts).
std::vector<int64_t> engram_num_embeddings(const EngramHashTables& t);
std::vector<int64_t> engram_num_embeddings(const ModelConfig& c);

// ids_out[nG = eH·(N-1)] for one token of Engram layer layer_index (position in
// engram_layer_ids). c[N]: c[k] = compressed id of the token at p-k (pad id where
// p-k < 0); mult[N]: that layer's row of engram.multipliers.
void engram_hash_ids(const EngramHashTables& t, int64_t layer_index, const int64_t* c,
                     const int64_t* mult, int64_t* ids_out);

// The CHOSEN multipliers of Engram layer layer_index: mult[k] = 2·u + 1 with
// u = splitmix64(10007·layer_id·16 + k) mod ((2^63-1) div cV div 2), k < N. For
// checkpoint writers; loaders read engram.multipliers instead.
std::vector<int64_t> engram_multipliers(const ModelConfig& c, int64_t layer_index);

}  // namespace troupe::model

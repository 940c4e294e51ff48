// The seeded GGUF files troupe and llama.cpp are compared on (`troupe bench peer
// --write DIR`, bench/peer/llamacpp.sh): random weights in a LLaMA shape, with a
// synthetic SentencePiece-style vocabulary llama.cpp accepts (<unk>, <s>, </s>, the 256
// byte tokens, then letter pieces), so both engines load the same bytes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/gguf_types.h"

namespace troupe::bench {

struct PeerShape {
  const char* name;  // "dense", "moe", "dense-small", "moe-small"
  int64_t vocab, dim, layers, heads, kv_heads, ffn, experts, top_k, context;
};

// "dense": ~0.43B LLaMA (D 1024, 24 layers, GQA 16/4, F 4096, V 32000);
// "moe": Mixtral-style, 64 experts top-6 (D 1024, 8 layers, F 512 per expert, 0.84B);
// "-small" variants for tests. Throws troupe::Error for an unknown name.
const PeerShape& peer_shape(const std::string& name);

struct PeerFile {
  std::string shape;
  model::GgmlType type;
  std::string path;
};

// Writes one file (matrices in `type`, norms and the router in F32) from `seed`.
void write_peer_file(const PeerShape& s, model::GgmlType type, uint64_t seed, const std::string& path);

// Parameters read per decoded token: all but the unpicked experts (embedding row excluded,
// the output matrix included), and all parameters.
int64_t active_params(const PeerShape& s);
int64_t total_params(const PeerShape& s);

}  // namespace troupe::bench

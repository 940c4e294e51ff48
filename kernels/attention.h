// Attention of MODEL.md §5.3 over a gathered key set with an attention sink.
// Keys equal values (K = V = the dequantized row, all D channels). Each query
// lists the rows it sees as pointers, so a sliding window (ring slots) and a
// sparse selection of compressed rows are the same kernel: the caller gathers.
//
//   ℓ_{h,k} = (q_h · K_k) · scale
//   m       = max(max_k ℓ_{h,k}, sink[h])
//   o_h     = Σ_k e^{ℓ_{h,k}-m} K_k / (Σ_k e^{ℓ_{h,k}-m} + e^{sink[h]-m})
//
// A query with no keys (all pointers null) gets o_h = 0, with or without a sink.
#pragma once

#include <cstdint>

namespace troupe::kernels {

struct AttentionParams {
  const float* q = nullptr;            // [M, heads, dim]
  const float* const* keys = nullptr;  // [M, max_keys] row pointers, each [dim]; null = no key
  const float* sink = nullptr;         // [heads] logit of the zero-value sink key; null = no sink
  float* out = nullptr;                // [M, heads, dim]
  int64_t m = 0;
  int64_t heads = 0;
  int64_t dim = 0;
  int64_t max_keys = 0;
  float scale = 1.0f;                  // usually 1/sqrt(dim)
};
void attention(const AttentionParams& p);

namespace ref { void attention(const AttentionParams& p); }
namespace cpu { void attention(const AttentionParams& p); }
namespace cuda { void attention(const AttentionParams& p); }

}  // namespace troupe::kernels

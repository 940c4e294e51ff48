// Single-pass mHC (MODEL.md §5.1-5.2): the multi-stream residual mixing.
//   HCMix:    (pre, post, comb) from the flattened streams, Sinkhorn-normalised comb
//   premix:   Σ_s pre_s X_s
//   HCExpand: X'_j = post_j·y + Σ_i C[i][j]·X_i
//   HCHead:   final collapse of the streams to one hidden vector
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/scratch.h"
#include "model/config.h"
#include "model/weights.h"

namespace troupe::model {

using kernels::scratch_vector;

struct HcMix {
  scratch_vector<float> pre;   // [rows, hc]
  scratch_vector<float> post;  // [rows, hc]
  scratch_vector<float> comb;  // [rows, hc, hc]  C[i][j], i = input stream, j = output stream
};

// X: [rows, hc, H]
HcMix hc_mix(const ModelConfig& c, const HcMixWeights& w, const float* X, int64_t rows);
// out[rows, H] = Σ_s pre[r, s] X[r, s]
void hc_premix(const ModelConfig& c, const float* X, const float* pre, int64_t rows, float* out);
// X[rows, hc, H] <- post ⊙ y + Cᵀ X   (in place)
void hc_expand(const ModelConfig& c, const float* y, const HcMix& mix, int64_t rows, float* X);
// h[rows, H] = HCHead(X)
void hc_head(const ModelConfig& c, const ModelWeights& w, const float* X, int64_t rows, float* h);

}  // namespace troupe::model

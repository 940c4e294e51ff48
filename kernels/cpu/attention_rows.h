// Inner kernels behind cpu::attention: the dense loops of one key tile. The
// online-softmax bookkeeping around them (cpu/attention.cpp) is shared; the AVX-512
// set lives in attention_avx512.cpp, the AVX2 one in attention_avx2.cpp. Exposed so
// tests can run the portable pair.
#pragma once

#include <cstdint>

#include "kernels/attention.h"

namespace troupe::kernels::cpu {

struct AttentionKernels {
  // logits[h·nt + t] = q_h · keys[t]      q: [nh, dim] contiguous, keys[t]: [dim]
  void (*logits)(const float* q, int64_t nh, int64_t dim, const float* const* keys, int64_t nt,
                 float* logits);
  // acc_h += Σ_t w[h·nt + t] · keys[t]     acc: [nh, dim] contiguous
  void (*accumulate)(const float* w, int64_t nh, int64_t dim, const float* const* keys, int64_t nt,
                     float* acc);
  // x[i] = e^{x[i] - shift} for i < n; returns Σ x[i]. One call per head and tile.
  float (*exp_sum)(float* x, int64_t n, float shift);
};

const AttentionKernels& portable_attention_kernels();
const AttentionKernels& avx512_attention_kernels();  // only when cpu_features().has_avx512()
const AttentionKernels& avx2_attention_kernels();    // only when cpu_features().has_avx2()

void attention(const AttentionParams& p, const AttentionKernels& k);

}  // namespace troupe::kernels::cpu

#include "kernels/causal_attention.h"

#include <cmath>

#include "kernels/check.h"
#include "kernels/dispatch.h"

namespace troupe::kernels {

void causal_attention(const CausalAttentionParams& p) {
  TROUPE_CHECK(p.num_seqs >= 0, "causal_attention: num_seqs must be >= 0, got ", p.num_seqs);
  TROUPE_CHECK(p.heads > 0 && p.kv_heads > 0 && p.heads % p.kv_heads == 0,
               "causal_attention: heads ", p.heads, " must be a positive multiple of kv_heads ",
               p.kv_heads);
  TROUPE_CHECK(p.head_dim > 0, "causal_attention: head_dim must be > 0, got ", p.head_dim);
  TROUPE_CHECK(std::isfinite(p.scale), "causal_attention: scale must be finite, got ", p.scale);
  if (p.num_seqs == 0) return;
  TROUPE_CHECK(p.seqs != nullptr, "causal_attention: seqs is null");
  for (int64_t s = 0; s < p.num_seqs; ++s) {
    const CausalAttentionSeq& q = p.seqs[s];
    TROUPE_CHECK(q.tokens >= 0 && q.start >= 0, "causal_attention: sequence ", s, " has tokens ",
                 q.tokens, " and start ", q.start);
    if (q.tokens == 0) continue;
    TROUPE_CHECK(q.q && q.k_rows && q.v_rows && q.out, "causal_attention: sequence ", s,
                 " has a null q, k_rows, v_rows or out");
    TROUPE_CHECK(q.head_stride == 0 || q.head_stride >= p.head_dim, "causal_attention: sequence ",
                 s, " has head_stride ", q.head_stride, ", below head_dim ", p.head_dim);
  }
  switch (active_backend()) {
    case Backend::Ref:
      return ref::causal_attention(p);
    case Backend::Cpu:
      return cpu::causal_attention(p);
    case Backend::Cuda:
      // The LLaMA forward that calls this runs on the host (model/llama_forward.cpp).
      TROUPE_FAIL("causal_attention: no CUDA kernel; the LLaMA family runs on the CPU");
  }
}

}  // namespace troupe::kernels

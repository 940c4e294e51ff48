// Scalar reference causal GQA attention: per (sequence, row, head) the logits and
// their max, then the weighted sum, in f64.
#include <cmath>
#include <vector>

#include "kernels/causal_attention.h"

namespace troupe::kernels::ref {

void causal_attention(const CausalAttentionParams& p) {
  const int64_t H = p.heads, hd = p.head_dim, group = p.heads / p.kv_heads;
  std::vector<double> logit, acc;
  for (int64_t s = 0; s < p.num_seqs; ++s) {
    const CausalAttentionSeq& sq = p.seqs[s];
    for (int64_t t = 0; t < sq.tokens; ++t)
      for (int64_t h = 0; h < H; ++h) {
        const float* q = sq.q + (t * H + h) * hd;
        const int64_t keys = sq.start + t + 1, off = sq.kv_head_offset(h / group, hd);
        logit.assign(size_t(keys), 0.0);
        double max = -INFINITY;
        for (int64_t j = 0; j < keys; ++j) {
          for (int64_t d = 0; d < hd; ++d) logit[j] += double(q[d]) * sq.k_rows[j][off + d];
          logit[j] *= p.scale;
          max = std::fmax(max, logit[j]);
        }
        double sum = 0;
        acc.assign(size_t(hd), 0.0);
        for (int64_t j = 0; j < keys; ++j) {
          const double w = std::exp(logit[j] - max);
          sum += w;
          for (int64_t d = 0; d < hd; ++d) acc[d] += w * sq.v_rows[j][off + d];
        }
        float* out = sq.out + (t * H + h) * hd;
        for (int64_t d = 0; d < hd; ++d) out[d] = static_cast<float>(acc[d] / sum);
      }
  }
}

}  // namespace troupe::kernels::ref

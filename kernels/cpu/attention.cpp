// Fast attention: one task per (query, block of heads). A task walks the query's
// keys in tiles; each key row is loaded once per tile and used by every head of
// the block (K = V, so the same rows feed the logits and the weighted sum). The
// softmax is online: a running max and sum per head, the accumulator rescaled
// once per tile when the max grows. The sink starts each head at max = sink[h],
// sum = e^0 = 1, which is exactly its term of the §5.3 denominator.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/cpu/attention_rows.h"
#include "kernels/dispatch.h"
#include "kernels/parallel.h"
#include "kernels/scratch.h"

namespace troupe::kernels::cpu {
namespace {

constexpr int64_t kKeyTile = 16;   // keys per tile: 16 rows of 512 f32 = 32 KiB
constexpr int64_t kHeadBlock = 8;  // heads per task: accumulators of 8 x 512 f32 = 16 KiB

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

void logits_portable(const float* q, int64_t nh, int64_t dim, const float* const* keys, int64_t nt,
                     float* logits) {
  for (int64_t h = 0; h < nh; ++h)
    for (int64_t t = 0; t < nt; ++t) {
      const float* a = q + h * dim;
      const float* b = keys[t];
      float part[8] = {};  // eight partial sums: vectorizable without fast-math
      int64_t d = 0;
      for (; d + 8 <= dim; d += 8)
        for (int j = 0; j < 8; ++j) part[j] += a[d + j] * b[d + j];
      for (; d < dim; ++d) part[0] += a[d] * b[d];
      float sum = 0;
      for (float s : part) sum += s;
      logits[h * nt + t] = sum;
    }
}

void accumulate_portable(const float* w, int64_t nh, int64_t dim, const float* const* keys,
                         int64_t nt, float* acc) {
  for (int64_t h = 0; h < nh; ++h)
    for (int64_t t = 0; t < nt; ++t) {
      const float wt = w[h * nt + t];
      float* a = acc + h * dim;
      for (int64_t d = 0; d < dim; ++d) a[d] += wt * keys[t][d];
    }
}

float exp_sum_portable(float* x, int64_t n, float shift) {
  float sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += x[i] = std::exp(x[i] - shift);
  return sum;
}

// Running softmax state of one (query, head block).
struct HeadState {
  scratch_vector<float> max, sum, acc;  // [nh], [nh], [nh, dim]
};

// Turns a tile's raw dots into weights e^{ℓ - max} under the updated running max,
// rescaling each head's earlier sum and accumulator to that max.
void softmax_tile(float* logits, int64_t nh, int64_t nt, int64_t dim, float scale,
                  const AttentionKernels& k, HeadState& s) {
  for (int64_t h = 0; h < nh; ++h) {
    float* l = logits + h * nt;
    float tile_max = kNegInf;
    for (int64_t t = 0; t < nt; ++t) {
      l[t] *= scale;
      tile_max = std::fmax(tile_max, l[t]);
    }
    const float new_max = std::fmax(s.max[h], tile_max);
    if (new_max == kNegInf) {  // nothing finite yet: this tile contributes nothing
      std::fill(l, l + nt, 0.0f);
      continue;
    }
    if (new_max > s.max[h]) {
      const float c = std::exp(s.max[h] - new_max);  // 0 when the old max was -inf
      s.sum[h] *= c;
      for (float* a = s.acc.data() + h * dim; a != s.acc.data() + (h + 1) * dim; ++a) *a *= c;
      s.max[h] = new_max;
    }
    s.sum[h] += k.exp_sum(l, nt, new_max);
  }
}

void attend_block(const AttentionParams& p, int64_t m, int64_t h0, int64_t nh,
                  const AttentionKernels& k, HeadState& s, scratch_vector<const float*>& rows) {
  rows.clear();
  for (int64_t j = 0; j < p.max_keys; ++j)
    if (const float* r = p.keys[m * p.max_keys + j]) rows.push_back(r);
  s.max.assign(nh, kNegInf);
  s.sum.assign(nh, 0.0f);
  s.acc.assign(nh * p.dim, 0.0f);
  if (p.sink)
    for (int64_t h = 0; h < nh; ++h) s.max[h] = p.sink[h0 + h], s.sum[h] = 1.0f;
  const float* q = p.q + (m * p.heads + h0) * p.dim;
  float logits[kHeadBlock * kKeyTile];
  for (size_t t0 = 0; t0 < rows.size(); t0 += kKeyTile) {
    const int64_t nt = std::min<int64_t>(kKeyTile, rows.size() - t0);
    k.logits(q, nh, p.dim, rows.data() + t0, nt, logits);
    softmax_tile(logits, nh, nt, p.dim, p.scale, k, s);
    k.accumulate(logits, nh, p.dim, rows.data() + t0, nt, s.acc.data());
  }
  for (int64_t h = 0; h < nh; ++h) {
    float* out = p.out + (m * p.heads + h0 + h) * p.dim;
    // No keys and no sink: nothing to attend to, the output is zero (as in ref).
    const float inv = s.sum[h] > 0 ? 1.0f / s.sum[h] : 0.0f;
    for (int64_t d = 0; d < p.dim; ++d) out[d] = s.acc[h * p.dim + d] * inv;
  }
}

}  // namespace

const AttentionKernels& portable_attention_kernels() {
  static const AttentionKernels k{logits_portable, accumulate_portable, exp_sum_portable};
  return k;
}

void attention(const AttentionParams& p, const AttentionKernels& k) {
  const int64_t blocks = (p.heads + kHeadBlock - 1) / kHeadBlock;
  parallel_for(p.m * blocks, 1, [&](int64_t begin, int64_t end) {
    HeadState state;
    scratch_vector<const float*> rows;
    rows.reserve(p.max_keys);  // the layer's bound, not this step's count: one block size every step
    for (int64_t task = begin; task < end; ++task) {
      const int64_t m = task / blocks;
      const int64_t h0 = (task % blocks) * kHeadBlock;
      attend_block(p, m, h0, std::min(kHeadBlock, p.heads - h0), k, state, rows);
    }
  });
}

void attention(const AttentionParams& p) {
  switch (active_cpu_path()) {
    case CpuPath::Avx512: return attention(p, avx512_attention_kernels());
    case CpuPath::Avx2: return attention(p, avx2_attention_kernels());
    case CpuPath::Portable: return attention(p, portable_attention_kernels());
  }
}

}  // namespace troupe::kernels::cpu

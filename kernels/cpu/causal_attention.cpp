// cpu::causal_attention: the step's sequences cut into items, (sequence, KV head, run of
// at most kDecodeSplitKeys keys) for a one-token sequence and (sequence, KV head, tile of
// rows) otherwise, run on the pool longest first (a causal tile's cost grows with its
// position), each by the active path's kernels; then the partial sums of decodes split
// over several runs are merged. The portable path is the shared algorithm on one float
// per "vector".
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>

#include "kernels/cpu/causal_attention_kernels.h"
#include "kernels/cpu/causal_attention_simd.h"
#include "kernels/dispatch.h"
#include "kernels/parallel.h"
#include "kernels/scratch.h"

namespace troupe::kernels::cpu {
namespace {

// e^x as the vector paths compute it (avx512_vec.h, avx2_vec.h): x = k·ln2 + r with
// |r| <= ln2/2, a degree-7 Taylor polynomial for e^r, and 2^k applied as two normal
// powers of two so that results in the subnormal range round once, to 0 at e^-104.
float exp_portable(float x) {
  if (std::isnan(x)) return x;
  x = std::clamp(x, -104.0f, 89.0f);
  const float k = std::nearbyint(x * 1.44269504088896341f);
  float r = std::fma(-k, 0.693359375f, x);
  r = std::fma(-k, -2.12194440e-4f, r);
  float poly = 1.0f / 5040;
  for (float coef : {1.0f / 720, 1.0f / 120, 1.0f / 24, 1.0f / 6, 0.5f, 1.0f, 1.0f})
    poly = std::fma(poly, r, coef);
  const int ki = static_cast<int>(k), k1 = ki / 2, k2 = ki - k1;  // each in [-75, 64]
  const auto pow2 = [](int e) { return std::bit_cast<float>(uint32_t(e + 127) << 23); };
  return poly * pow2(k1) * pow2(k2);
}

struct Scalar {
  using V = float;
  static constexpr int W = 1;
  static V zero() { return 0.0f; }
  static V set1(float x) { return x; }
  static V load(const float* p) { return *p; }
  static V load_part(const float* p, int64_t) { return *p; }  // never partial: W = 1
  static void store(float* p, V v) { *p = v; }
  static void store_part(float* p, V v, int64_t) { *p = v; }
  static V add(V a, V b) { return a + b; }
  static V sub(V a, V b) { return a - b; }
  static V mul(V a, V b) { return a * b; }
  static V max(V a, V b) { return std::max(a, b); }
  static V fma(V a, V b, V c) { return a * b + c; }  // std::fma is a libm call without -mfma
  static V exp(V x) { return exp_portable(x); }
  static float hsum(V v) { return v; }
  static float hmax(V v) { return v; }
  static V keep_le(V s, V pos, V j) { return j <= pos ? s : kMinusInf; }
};

struct Item {
  int64_t seq, g, r0, rows;  // rows = 0: the decode of a one-token sequence
  int64_t keys;              // of the item's last row: its cost, up to the row count
  int64_t first = 0;         // a decode's keys [first, first + keys)
  int64_t part = -1;         // a split decode's slot in the partial sums; -1: not split
};

// A decode split over `parts` runs of keys, its partial sums in slots [part0, part0 + parts).
struct Split {
  int64_t seq, g, part0, parts;
};

// The partial sums of every split decode's runs, one DecodePart per slot.
class DecodeParts {
 public:
  DecodeParts(int64_t slots, int64_t group, int64_t hd)
      : group_(group), hd_(hd), data_(size_t(slots * group * (hd + 2))) {}
  DecodePart at(int64_t slot) {
    float* base = data_.data() + slot * group_ * (hd_ + 2);
    return {base, base + group_ * hd_, base + group_ * (hd_ + 1)};
  }

 private:
  int64_t group_, hd_;
  scratch_vector<float> data_;
};

// out_h = Σ_i e^{m_i - M} · o_i / Σ_i e^{m_i - M} · l_i over a split decode's runs in key
// order (M the largest m_i), for each head of its group: the online softmax's rescaling,
// one run at a time.
void merge_split(const CausalAttentionParams& p, const CausalAttentionKernels& k, const Split& sp,
                 DecodeParts& parts) {
  const int64_t group = p.heads / p.kv_heads, hd = p.head_dim;
  scratch_vector<float> shift(size_t(sp.parts)), factor(size_t(sp.parts));
  for (int64_t h = 0; h < group; ++h) {
    float top = kMinusInf;
    for (int64_t i = 0; i < sp.parts; ++i) top = std::max(top, parts.at(sp.part0 + i).m[h]);
    for (int64_t i = 0; i < sp.parts; ++i) shift[size_t(i)] = parts.at(sp.part0 + i).m[h] - top;
    k.exp(shift.data(), factor.data(), sp.parts);
    float l = 0.0f;
    for (int64_t i = 0; i < sp.parts; ++i) l += parts.at(sp.part0 + i).l[h] * factor[size_t(i)];
    float* out = p.seqs[sp.seq].out + (sp.g * group + h) * hd;
    std::fill_n(out, hd, 0.0f);
    for (int64_t i = 0; i < sp.parts; ++i) {
      const float* o = parts.at(sp.part0 + i).o + h * hd;
      for (int64_t d = 0; d < hd; ++d) out[d] += o[d] * factor[size_t(i)];
    }
    const float f = 1.0f / l;
    for (int64_t d = 0; d < hd; ++d) out[d] *= f;
  }
}

}  // namespace

const CausalAttentionKernels& portable_causal_attention_kernels() {
  // Four rows per tile and four keys / dims / heads per block: 16 scalar accumulators.
  static const CausalAttentionKernels k = make_causal_attention_kernels<Scalar, 4, 4, 4, 4>();
  return k;
}

void causal_attention(const CausalAttentionParams& p, const CausalAttentionKernels& k) {
  const int64_t group = p.heads / p.kv_heads;
  scratch_vector<Item> items;
  scratch_vector<Split> splits;
  int64_t slots = 0;
  for (int64_t s = 0; s < p.num_seqs; ++s) {
    const CausalAttentionSeq& sq = p.seqs[s];
    const int64_t keys = sq.start + 1, runs = (keys + kDecodeSplitKeys - 1) / kDecodeSplitKeys;
    for (int64_t g = 0; g < p.kv_heads && sq.tokens == 1 && runs == 1; ++g)
      items.push_back({s, g, 0, 0, keys});
    for (int64_t g = 0; g < p.kv_heads && sq.tokens == 1 && runs > 1; ++g) {
      splits.push_back({s, g, slots, runs});
      for (int64_t j = 0; j < keys; j += kDecodeSplitKeys)
        items.push_back({s, g, 0, 0, std::min(kDecodeSplitKeys, keys - j), j, slots++});
    }
    for (int64_t g = 0; g < p.kv_heads && sq.tokens > 1; ++g)
      for (int64_t r0 = 0; r0 < sq.tokens * group; r0 += k.tile_rows) {
        const int64_t rows = std::min(k.tile_rows, sq.tokens * group - r0);
        items.push_back({s, g, r0, rows, sq.start + (r0 + rows - 1) / group + 1});
      }
  }
  // Longest first; ties in the order pushed (sequence, group, first row), which makes the
  // order total, so std::sort (no buffer, unlike std::stable_sort) gives one order.
  std::sort(items.begin(), items.end(), [](const Item& a, const Item& b) {
    if (a.keys != b.keys) return a.keys > b.keys;
    if (a.seq != b.seq) return a.seq < b.seq;
    if (a.g != b.g) return a.g < b.g;
    return a.r0 != b.r0 ? a.r0 < b.r0 : a.first < b.first;
  });
  DecodeParts parts(slots, group, p.head_dim);
  parallel_for(static_cast<int64_t>(items.size()), 1, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const Item& it = items[size_t(i)];
      if (it.rows > 0) {
        k.tile(p, p.seqs[it.seq], it.g, it.r0, it.rows);
      } else if (it.part < 0) {
        k.decode(p, p.seqs[it.seq], it.g, 0, it.keys, nullptr);
      } else {
        const DecodePart part = parts.at(it.part);
        k.decode(p, p.seqs[it.seq], it.g, it.first, it.first + it.keys, &part);
      }
    }
  });
  parallel_for(static_cast<int64_t>(splits.size()), 1, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) merge_split(p, k, splits[size_t(i)], parts);
  });
}

void causal_attention(const CausalAttentionParams& p) {
  switch (active_cpu_path()) {
    case CpuPath::Avx512:
      return causal_attention(p, avx512_causal_attention_kernels());
    case CpuPath::Avx2:
      return causal_attention(p, avx2_causal_attention_kernels());
    case CpuPath::Portable:
      return causal_attention(p, portable_causal_attention_kernels());
  }
}

}  // namespace troupe::kernels::cpu

// Causal GQA attention (kernels/causal_attention.h): every CPU path and the scalar
// reference backend against a double-precision reference written here, over paged-like
// K / V rows (one [K | V] row per token, rows scattered in a pool; or each KV head's
// rows in runs within shuffled blocks, as the engine's paged blocks hold them), and each path's
// exponential against std::exp in double.
#include "kernels/causal_attention.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include "kernels/check.h"
#include "kernels/cpu/causal_attention_kernels.h"
#include "kernels/parallel.h"
#include "tests/kernels/fast_path_util.h"

namespace troupe::kernels {
namespace {

using testing::kNaN;

// One sequence of a step: its cache rows [K | V] (row stride 2·KV·hd) placed at
// shuffled slots of a pool, as pages would place them.
struct SeqData {
  int64_t tokens, start;
  std::vector<float> q, pool, out;
  std::vector<const float*> k_rows, v_rows;
};

SeqData make_seq(int64_t tokens, int64_t start, int64_t H, int64_t KV, int64_t hd, uint32_t seed) {
  SeqData s{tokens, start, testing::random_normal(tokens * H * hd, seed), {}, {}, {}, {}};
  const int64_t keys = start + tokens, row = 2 * KV * hd;
  s.pool = testing::random_normal(keys * row, seed + 1);
  std::vector<int64_t> slot(static_cast<size_t>(keys));
  std::iota(slot.begin(), slot.end(), 0);
  std::shuffle(slot.begin(), slot.end(), std::mt19937(seed + 2));
  for (int64_t j = 0; j < keys; ++j) {
    s.k_rows.push_back(s.pool.data() + slot[j] * row);
    s.v_rows.push_back(s.k_rows.back() + KV * hd);
  }
  return s;
}

// The definition, in double: per query row and head, all logits, their softmax, then
// the mix of V rows.
std::vector<double> expected(const SeqData& s, int64_t H, int64_t KV, int64_t hd, double scale) {
  std::vector<double> out(size_t(s.tokens * H * hd), 0.0);
  for (int64_t h = 0; h < H; ++h) {
    const int64_t col = h / (H / KV) * hd;
    for (int64_t t = 0; t < s.tokens; ++t) {
      const float* q = s.q.data() + (t * H + h) * hd;
      std::vector<double> w(size_t(s.start + t + 1));
      for (size_t j = 0; j < w.size(); ++j) {
        double dot = 0;
        for (int64_t d = 0; d < hd; ++d) dot += double(q[d]) * double(s.k_rows[j][col + d]);
        w[j] = dot * scale;
      }
      const double top = *std::max_element(w.begin(), w.end());
      double total = 0;
      for (double& x : w) total += x = std::exp(x - top);
      double* o = out.data() + (t * H + h) * hd;
      for (size_t j = 0; j < w.size(); ++j)
        for (int64_t d = 0; d < hd; ++d) o[d] += w[j] / total * double(s.v_rows[j][col + d]);
    }
  }
  return out;
}

struct Shape {
  int64_t kv_heads, group, hd;
};
constexpr Shape kShapes[] = {{2, 1, 64}, {2, 4, 64}, {1, 8, 64}, {2, 1, 128}, {1, 4, 128}, {2, 8, 128}};

class CausalAttentionPaths : public testing::ImplTest {
 protected:
  // Runs one step over seqs (tokens, start) of a shape and checks every output against
  // the double reference. Tolerance: a logit carries f32 rounding of ~hd·2^-24·Σ|q_d k_d|
  // ·scale (< 1e-5 here), which moves each weight by that relative amount, and the f32
  // mix of up to ~800 V rows (|v| < 5) adds ~sqrt(keys)·2^-24·5: both well under 5e-5,
  // while a wrong mask, group or rescale is off by O(0.1).
  void check(const Shape& sh, const std::vector<std::pair<int64_t, int64_t>>& steps,
             float scale_mul = 1.0f) {
    const int64_t KV = sh.kv_heads, H = KV * sh.group, hd = sh.hd;
    const float scale = scale_mul / std::sqrt(float(hd));
    std::vector<SeqData> data;
    std::vector<CausalAttentionSeq> seqs;
    uint32_t seed = 7;
    for (auto [tokens, start] : steps) data.push_back(make_seq(tokens, start, H, KV, hd, seed += 3));
    for (SeqData& s : data) {
      s.out.assign(s.q.size(), kNaN);
      seqs.push_back({s.q.data(), s.k_rows.data(), s.v_rows.data(), s.out.data(), s.tokens, s.start});
    }
    const CausalAttentionParams p{seqs.data(), int64_t(seqs.size()), H, KV, hd, scale};
    variants(causal_attention)[0].run(p);
    for (const SeqData& s : data) {
      const auto want = expected(s, H, KV, hd, scale);
      for (size_t i = 0; i < want.size(); ++i)
        ASSERT_NEAR(s.out[i], want[i], 5e-5)
            << GetParam().name << " KV=" << KV << " group=" << sh.group << " hd=" << hd
            << " tokens=" << s.tokens << " start=" << s.start << " i=" << i;
    }
  }
};

TEST_P(CausalAttentionPaths, DecodeStartsZeroTo300) {
  // One step of 301 one-token sequences: every key count from 1 to 301.
  std::vector<std::pair<int64_t, int64_t>> steps;
  for (int64_t start = 0; start <= 300; ++start) steps.push_back({1, start});
  for (const Shape& sh : kShapes) check(sh, steps);
}

TEST_P(CausalAttentionPaths, Prefill512) {
  for (const Shape& sh : kShapes) check(sh, {{512, 0}});
}

TEST_P(CausalAttentionPaths, ChunkedPrefillAndMixedSteps) {
  // 137 keys (a multiple of no tile), short chunks, and a step mixing them with decodes.
  for (const Shape& sh : kShapes) {
    check(sh, {{37, 100}});
    check(sh, {{1, 5}, {37, 100}, {2, 0}, {1, 300}, {3, 61}, {17, 0}});
  }
}

TEST_P(CausalAttentionPaths, LongDecodesSplitOverRunsOfKeys) {
  // Past cpu::kDecodeSplitKeys keys a decode runs as several items whose partial sums
  // are merged: one run plus one key, whole runs, a short last run, many runs, and a
  // step mixing them with a prefill chunk.
  const int64_t r = cpu::kDecodeSplitKeys;
  for (const Shape& sh : kShapes) {
    check(sh, {{1, r}, {1, 2 * r - 1}, {1, 3 * r + 17}, {1, 2047}});
    check(sh, {{1, 4 * r}, {21, 300}, {1, r - 1}});
  }
  check(kShapes[4], {{1, 900}, {1, 5 * r + 3}}, 12.0f);  // peaky: runs' maxima far apart
}

// The runs of a split decode are fixed by the key count, not the threads: 1, 2 and 3
// threads give the same bits.
TEST_P(CausalAttentionPaths, SplitDecodesGiveTheSameBitsOnAnyThreadCount) {
  const int64_t KV = 2, H = 8, hd = 64;
  std::vector<SeqData> data;
  for (int64_t start : {5, 700, 2000})
    data.push_back(make_seq(1, start, H, KV, hd, uint32_t(start)));
  std::vector<std::vector<float>> first;
  for (int threads : {1, 2, 3}) {
    std::vector<CausalAttentionSeq> seqs;
    for (SeqData& s : data) {
      s.out.assign(s.q.size(), kNaN);
      seqs.push_back({s.q.data(), s.k_rows.data(), s.v_rows.data(), s.out.data(), 1, s.start});
    }
    set_num_threads(threads);
    variants(causal_attention)[0].run(CausalAttentionParams{seqs.data(), 3, H, KV, hd, 0.125f});
    set_num_threads(0);
    for (size_t i = 0; i < data.size(); ++i) {
      if (threads == 1) {
        first.push_back(data[i].out);
        continue;
      }
      ASSERT_EQ(0,
                std::memcmp(first[i].data(), data[i].out.data(), first[i].size() * sizeof(float)))
          << GetParam().name << " " << threads << " threads, sequence " << i;
    }
  }
}

TEST_P(CausalAttentionPaths, PeakySoftmax) {
  // Logits up to ~±100: the running max changes from block to block and most weights
  // underflow to 0, which the online rescaling must get right.
  for (const Shape& sh : {kShapes[1], kShapes[4]}) check(sh, {{70, 90}, {1, 200}, {1, 0}}, 12.0f);
}

// The engine's paged blocks hold each KV head's K rows in one run and its V rows in the
// next (model/llama_forward.cpp); head_stride tells the kernel. The same values laid
// out so, in shuffled blocks of 16 rows, give the same bits as whole rows, decode and
// prefill tiles alike: the layout moves where each float is read, not the sums.
TEST_P(CausalAttentionPaths, HeadRunsInBlocksGiveTheBitsOfWholeRows) {
  constexpr int64_t kBlock = 16;
  const std::vector<std::pair<int64_t, int64_t>> steps = {{1, 5}, {37, 100}, {1, 300}, {70, 0}};
  for (const Shape& sh : {kShapes[1], kShapes[2], kShapes[5]}) {
    const int64_t KV = sh.kv_heads, H = KV * sh.group, hd = sh.hd, run = kBlock * hd;
    std::vector<SeqData> whole, runs;
    uint32_t seed = 40;
    for (auto [tokens, start] : steps) {
      whole.push_back(make_seq(tokens, start, H, KV, hd, seed += 3));
      SeqData r = whole.back();
      const int64_t keys = start + tokens, blocks = (keys + kBlock - 1) / kBlock;
      r.pool.assign(size_t(blocks * kBlock * 2 * KV * hd), kNaN);  // rows past keys: NaN
      std::vector<int64_t> at(static_cast<size_t>(blocks));
      std::iota(at.begin(), at.end(), 0);
      std::shuffle(at.begin(), at.end(), std::mt19937(seed));
      for (int64_t j = 0; j < keys; ++j) {
        float* k = r.pool.data() + at[j / kBlock] * kBlock * 2 * KV * hd + (j % kBlock) * hd;
        for (int64_t g = 0; g < KV; ++g) {
          std::copy_n(whole.back().k_rows[j] + g * hd, hd, k + 2 * g * run);
          std::copy_n(whole.back().v_rows[j] + g * hd, hd, k + (2 * g + 1) * run);
        }
        r.k_rows[j] = k;
        r.v_rows[j] = k + run;
      }
      runs.push_back(std::move(r));
    }
    for (std::vector<SeqData>* data : {&whole, &runs}) {
      std::vector<CausalAttentionSeq> seqs;
      for (SeqData& s : *data) {
        s.out.assign(s.q.size(), kNaN);
        seqs.push_back({s.q.data(), s.k_rows.data(), s.v_rows.data(), s.out.data(), s.tokens,
                        s.start, data == &runs ? 2 * run : 0});
      }
      variants(causal_attention)[0].run(CausalAttentionParams{seqs.data(), int64_t(seqs.size()), H,
                                                              KV, hd, 1.0f / std::sqrt(float(hd))});
    }
    for (size_t i = 0; i < steps.size(); ++i)
      ASSERT_EQ(0, std::memcmp(whole[i].out.data(), runs[i].out.data(),
                               whole[i].out.size() * sizeof(float)))
          << GetParam().name << " KV=" << KV << " group=" << sh.group << " hd=" << hd
          << " sequence " << i;
    // And the values are the attention, not merely the same (NaN rows would show).
    const auto want = expected(whole[3], H, KV, hd, 1.0 / std::sqrt(double(hd)));
    for (size_t i = 0; i < want.size(); ++i) ASSERT_NEAR(runs[3].out[i], want[i], 5e-5) << i;
  }
}

TEST(CausalAttention, RejectsBadParams) {
  const float q[4] = {}, *rows[1] = {q};
  float out[4];
  const CausalAttentionSeq seq{q, rows, rows, out, 1, 0};
  const CausalAttentionParams ok{&seq, 1, 2, 1, 2, 1.0f};
  causal_attention(ok);
  CausalAttentionParams p = ok;
  p.heads = 3;  // not a multiple of kv_heads 2
  p.kv_heads = 2;
  EXPECT_THROW(causal_attention(p), Error);
  p = ok;
  p.head_dim = 0;
  EXPECT_THROW(causal_attention(p), Error);
  p = ok;
  p.scale = std::nanf("");
  EXPECT_THROW(causal_attention(p), Error);
  CausalAttentionSeq bad = seq;
  bad.v_rows = nullptr;
  p = ok;
  p.seqs = &bad;
  EXPECT_THROW(causal_attention(p), Error);
  bad = seq;
  bad.head_stride = 1;  // the next head's slice would overlap this one's
  EXPECT_THROW(causal_attention(p), Error);
}

// The softmax's e^x of each path over a dense sweep of [-110, 0] and a sparser one up
// to 88, against std::exp in double. Measured on this machine (AMD EPYC, 2026-12-05; the
// three paths give the same values): at most 0.92 ulp where the result is a normal f32
// (asserted: 1 ulp), at most 0.83·2^-149 where it is subnormal (asserted: 2^-149);
// -inf and anything below -104 give 0, NaN stays NaN.
class CausalAttentionExp : public testing::ImplTest {};

const cpu::CausalAttentionKernels& kernels_of(CpuPath path) {
  switch (path) {
    case CpuPath::Avx512: return cpu::avx512_causal_attention_kernels();
    case CpuPath::Avx2: return cpu::avx2_causal_attention_kernels();
    case CpuPath::Portable: break;
  }
  return cpu::portable_causal_attention_kernels();
}

TEST_P(CausalAttentionExp, WithinOneUlpOfStdExp) {
  const auto& k = kernels_of(GetParam().path);
  std::vector<float> x;
  for (int64_t i = 0; i <= 4'000'000; ++i) x.push_back(-110.0f * float(i) / 4e6f);
  for (int64_t i = 1; i <= 200'000; ++i) x.push_back(88.0f * float(i) / 2e5f);
  for (float v = 1e-30f; v < 1e-3f; v *= 1.01f) x.insert(x.end(), {v, -v});  // around 0
  std::vector<float> y(x.size(), kNaN);
  k.exp(x.data(), y.data(), int64_t(x.size()));
  double worst_ulp = 0, worst_sub = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double want = std::exp(double(x[i]));
    const double err = std::fabs(double(y[i]) - want);
    if (want >= std::numeric_limits<float>::min()) {
      const double ulp = std::ldexp(1.0, std::ilogb(float(want)) - 23);
      worst_ulp = std::max(worst_ulp, err / ulp);
      ASSERT_LE(err / ulp, 1.0) << "x=" << x[i] << " got " << y[i] << " want " << want;
    } else {
      worst_sub = std::max(worst_sub, err / std::ldexp(1.0, -149));
      ASSERT_LE(err, std::ldexp(1.0, -149)) << "x=" << x[i] << " got " << y[i] << " want " << want;
    }
  }
  RecordProperty("max_ulp_normal", std::to_string(worst_ulp));
  RecordProperty("max_error_subnormal_in_2^-149", std::to_string(worst_sub));
  const float special[] = {-std::numeric_limits<float>::infinity(), -1e30f, -104.5f, 0.0f, kNaN};
  float out[5];
  k.exp(special, out, 5);
  EXPECT_EQ(out[0], 0.0f);
  EXPECT_EQ(out[1], 0.0f);
  EXPECT_EQ(out[2], 0.0f);
  EXPECT_EQ(out[3], 1.0f);
  EXPECT_TRUE(std::isnan(out[4]));
}

INSTANTIATE_TEST_SUITE_P(Impls, CausalAttentionPaths,
                         testing::impls_and_ref(), testing::impl_name);
INSTANTIATE_TEST_SUITE_P(Impls, CausalAttentionExp, testing::fast_impls(), testing::impl_name);

}  // namespace
}  // namespace troupe::kernels

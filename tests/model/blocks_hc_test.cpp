// Single-pass mHC (MODEL.md §5.1-5.2) checked piece by piece against a plain reference
// written from the spec: HCMix (pre, post, comb with the 20-iteration Sinkhorn),
// premix, HCExpand and HCHead, on the golden checkpoint's mixing weights and on
// sharpened copies whose logits make Sinkhorn do real work.
// Tolerance: relative L2 1e-5 (f32 engine vs double reference, no rounding steps).
#include <gtest/gtest.h>

#include <limits>

#include "kernels/dispatch.h"
#include "model/hc.h"
#include "support/block_ref.h"
#include "support/golden.h"

namespace troupe::testing {
namespace {

using namespace troupe::testing::ref;
constexpr double kTol = 1e-5;
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

struct RefMix {
  DVec pre, post, comb;  // [hc], [hc], [hc·hc] C[i][j]
};

// Sinkhorn of §5.2 on C [hc, hc] (logits in, doubly stochastic-ish out).
void ref_sinkhorn(DVec& C, int64_t hc, int64_t iters, double eps) {
  auto at = [&](int64_t i, int64_t j) -> double& { return C[i * hc + j]; };
  for (int64_t i = 0; i < hc; ++i) {
    double mx = at(i, 0), sum = 0;
    for (int64_t j = 1; j < hc; ++j) mx = std::max(mx, at(i, j));
    for (int64_t j = 0; j < hc; ++j) sum += std::exp(at(i, j) - mx);
    for (int64_t j = 0; j < hc; ++j) at(i, j) = std::exp(at(i, j) - mx) / sum + eps;
  }
  auto cols = [&] {
    for (int64_t j = 0; j < hc; ++j) {
      double sum = 0;
      for (int64_t i = 0; i < hc; ++i) sum += at(i, j);
      for (int64_t i = 0; i < hc; ++i) at(i, j) /= sum + eps;
    }
  };
  cols();
  for (int64_t it = 0; it < iters - 1; ++it) {
    for (int64_t i = 0; i < hc; ++i) {
      double sum = 0;
      for (int64_t j = 0; j < hc; ++j) sum += at(i, j);
      for (int64_t j = 0; j < hc; ++j) at(i, j) /= sum + eps;
    }
    cols();
  }
}

// HCMix(X; fn, base, scale) of §5.2 for one row X [hc, H].
RefMix ref_hc_mix(const model::ModelConfig& c, const Dense& fn, const std::vector<float>& base,
                  const std::vector<float>& scale, const float* X) {
  const int64_t hc = c.hc_mult;
  const DVec f = to_double(X, hc * c.hidden_size);
  const double inv = 1.0 / std::sqrt(mean_square(f) + c.rms_norm_eps);
  const DVec m = matvec(fn, X);
  DVec lg(m.size());
  for (int64_t i = 0; i < static_cast<int64_t>(m.size()); ++i)
    lg[i] = base[i] + m[i] * inv * scale[i < hc ? 0 : i < 2 * hc ? 1 : 2];
  RefMix r;
  for (int64_t s = 0; s < hc; ++s) {
    r.pre.push_back(sigmoid(lg[s]) + c.hc_eps);
    r.post.push_back(2 * sigmoid(lg[hc + s]));
  }
  r.comb.assign(lg.begin() + 2 * hc, lg.end());
  ref_sinkhorn(r.comb, hc, c.hc_sinkhorn_iters, c.hc_eps);
  return r;
}

// Runs hc_mix on `rows` random rows and compares every row with the reference.
// Returns the largest reference comb entry (how far from uniform the mix is).
double check_mix(const model::HcMixWeights& w, int64_t rows, uint32_t seed, double tol = kTol) {
  const auto& c = golden_model().config;
  const int64_t hc = c.hc_mult, width = hc * c.hidden_size;
  const std::vector<float> X = random_floats(rows * width, seed);
  const model::HcMix got = model::hc_mix(c, w, X.data(), rows);
  const Dense fn = dense(w.fn);
  double max_comb = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const RefMix want = ref_hc_mix(c, fn, w.base, w.scale, &X[r * width]);
    EXPECT_LT(rel_l2(&got.pre[r * hc], want.pre), tol) << "pre, row " << r;
    EXPECT_LT(rel_l2(&got.post[r * hc], want.post), tol) << "post, row " << r;
    EXPECT_LT(rel_l2(&got.comb[r * hc * hc], want.comb), tol) << "comb, row " << r;
    for (double v : want.comb) max_comb = std::max(max_comb, v);
  }
  return max_comb;
}

TEST(BlocksHc, MixMatchesReferenceOnGoldenWeights) {
  const auto& g = golden_model();
  for (int64_t layer : {0, 4, 11})
    for (int64_t rows : {1, 3, 17}) {
      SCOPED_TRACE("layer " + std::to_string(layer) + ", rows " + std::to_string(rows));
      check_mix(g.weights.layers[layer].hc_attn, rows, 100 + layer * 7 + rows);
      check_mix(g.weights.layers[layer].hc_ffn, rows, 200 + layer * 7 + rows);
    }
}

TEST(BlocksHc, MixMatchesReferenceWithSharpLogits) {
  // The golden mixing weights are a random init (base 0, scale 1, fn ~ N(0, 0.02)), so
  // comb stays near uniform. Scale fn up and draw base/scale so Sinkhorn has to work.
  const auto& g = golden_model();
  const model::HcMixWeights& real = g.weights.layers[3].hc_ffn;
  Dense fn = dense(real.fn);
  for (float& v : fn.w) v *= 40.0f;
  model::HcMixWeights w;
  w.fn = {kernels::WeightFormat::F32, fn.rows, fn.cols, fn.w.data(), nullptr};
  w.base = random_floats(real.base.size(), 7);
  w.scale = {2.0f, 0.5f, 3.0f};
  // Logits of magnitude ~30 carry f32 rounding of ~1e-5 absolute, which sigmoid turns
  // into that much relative error where pre is tiny: 5e-5 here.
  const double max_comb = check_mix(w, 17, 8, 5e-5);
  EXPECT_GT(max_comb, 0.5) << "comb should be far from uniform (1/hc) in this case";
}

TEST(BlocksHc, MixOnScalarKernelBackend) {
  kernels::ScopedBackend scalar(kernels::Backend::Ref);
  check_mix(golden_model().weights.layers[5].hc_attn, 17, 55);
}

TEST(BlocksHc, ReferenceSinkhornIsDoublyStochastic) {
  // A property of the reference itself, so a broken reference cannot pass silently:
  // after the final column pass every column sums to ~1 and rows nearly so.
  DVec C = {3.0, -1.0, 0.5, 2.0, 0.0, 4.0, -2.0, 1.0, 1.5, 1.5, 1.5, 1.5, -3.0, 0.2, 2.2, 0.7};
  ref_sinkhorn(C, 4, 20, 1e-6);
  for (int64_t k = 0; k < 4; ++k) {
    double col = 0, row = 0;
    for (int64_t i = 0; i < 4; ++i) col += C[i * 4 + k], row += C[k * 4 + i];
    EXPECT_NEAR(col, 1.0, 1e-5);
    EXPECT_NEAR(row, 1.0, 1e-2);
  }
}

TEST(BlocksHc, PremixIsTheWeightedStreamSum) {
  const auto& c = golden_model().config;
  const int64_t hc = c.hc_mult, H = c.hidden_size;
  for (int64_t rows : {1, 3, 17}) {
    const std::vector<float> X = random_floats(rows * hc * H, 300 + rows);
    const std::vector<float> pre = random_floats(rows * hc, 400 + rows);
    std::vector<float> out(rows * H, kNaN);
    model::hc_premix(c, X.data(), pre.data(), rows, out.data());
    for (int64_t r = 0; r < rows; ++r) {
      DVec want(H, 0.0);
      for (int64_t s = 0; s < hc; ++s)
        for (int64_t k = 0; k < H; ++k)
          want[k] += double(pre[r * hc + s]) * X[(r * hc + s) * H + k];
      EXPECT_LT(rel_l2(&out[r * H], want), kTol) << "rows " << rows << ", row " << r;
    }
  }
}

TEST(BlocksHc, ExpandMixesStreamsThroughCombTransposed) {
  const auto& c = golden_model().config;
  const int64_t hc = c.hc_mult, H = c.hidden_size;
  for (int64_t rows : {1, 3, 17}) {
    std::vector<float> X = random_floats(rows * hc * H, 500 + rows);
    const std::vector<float> X0 = X, y = random_floats(rows * H, 600 + rows);
    model::HcMix mix;
    const std::vector<float> post = random_floats(rows * hc, 700 + rows);
    const std::vector<float> comb = random_floats(rows * hc * hc, 800 + rows);
    mix.post.assign(post.begin(), post.end());
    mix.comb.assign(comb.begin(), comb.end());
    mix.pre.assign(rows * hc, kNaN);  // unused by HCExpand
    model::hc_expand(c, y.data(), mix, rows, X.data());
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = 0; j < hc; ++j) {
        DVec want(H);
        for (int64_t k = 0; k < H; ++k) {
          double v = double(mix.post[r * hc + j]) * y[r * H + k];
          for (int64_t i = 0; i < hc; ++i)
            v += double(mix.comb[(r * hc + i) * hc + j]) * X0[(r * hc + i) * H + k];
          want[k] = v;
        }
        EXPECT_LT(rel_l2(&X[(r * hc + j) * H], want), kTol) << "row " << r << " stream " << j;
      }
  }
}

TEST(BlocksHc, HeadCollapsesStreamsWithSigmoidWeights) {
  const auto& g = golden_model();
  const auto& c = g.config;
  const int64_t hc = c.hc_mult, H = c.hidden_size;
  const Dense fn = dense(g.weights.hc_head_fn);
  for (int64_t rows : {1, 3, 17}) {
    const std::vector<float> X = random_floats(rows * hc * H, 900 + rows, 3.0f);
    std::vector<float> h(rows * H, kNaN);
    model::hc_head(c, g.weights, X.data(), rows, h.data());
    for (int64_t r = 0; r < rows; ++r) {
      const float* Xr = &X[r * hc * H];
      const double inv = 1.0 / std::sqrt(mean_square(to_double(Xr, hc * H)) + c.rms_norm_eps);
      const DVec m = matvec(fn, Xr);
      DVec want(H, 0.0);
      for (int64_t s = 0; s < hc; ++s) {
        const double w =
            sigmoid(m[s] * inv * g.weights.hc_head_scale + g.weights.hc_head_base[s]) + c.hc_eps;
        for (int64_t k = 0; k < H; ++k) want[k] += w * Xr[s * H + k];
      }
      EXPECT_LT(rel_l2(&h[r * H], want), kTol) << "rows " << rows << ", row " << r;
    }
  }
}

}  // namespace
}  // namespace troupe::testing

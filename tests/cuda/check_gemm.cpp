// cuda::gemm against ref::gemm: every weight format, decode (m <= 8) and tiled shapes,
// ragged K for FP8, padded strides, accumulate, Bf16 activations. Tolerance: the
// reordered f32 sums of the CPU tests, |y - ref| <= 1e-5 · Σ_k |x·w|.
#include <bit>

#include "kernels/gemm.h"
#include "kernels/quant.h"
#include "tests/cuda/check.h"
#include "tests/cuda/check_weights.h"

namespace troupe::cuda_check {
namespace {

using kernels::WeightFormat;

struct Case {
  int64_t m, n, k;
  WeightFormat format;
  int64_t x_pad = 0, y_pad = 0;
  bool accumulate = false;
  bool bf16 = false;
  std::string str() const {
    char b[160];
    std::snprintf(b, sizeof b, "gemm m=%ld n=%ld k=%ld %s pad=%ld/%ld%s%s", long(m), long(n),
                  long(k), kernels::to_string(format), long(x_pad), long(y_pad),
                  accumulate ? " acc" : "", bf16 ? " bf16" : "");
    return b;
  }
};

void run_case(DeviceContext& dev, Report& rep, const Case& c, uint32_t seed) {
  rep.begin_case(c.str());
  const HostWeight w = make_weight(c.format, c.n, c.k, seed);
  const int64_t ldx = c.k + c.x_pad, ldy = c.n + c.y_pad;
  std::vector<float> x = normal(c.m * ldx, seed + 1);
  for (int64_t m = 0; m < c.m; ++m)  // a read past K turns y into NaN
    for (int64_t k = c.k; k < ldx; ++k) x[m * ldx + k] = kNaN;
  // y rows [0, m) hold the output (NaN poison, or start values to accumulate onto);
  // columns >= n and the extra row m are guards.
  std::vector<float> y0((c.m + 1) * ldy, kSentinel);
  const std::vector<float> start = normal(c.m * c.n, seed + 2);
  for (int64_t m = 0; m < c.m; ++m)
    for (int64_t n = 0; n < c.n; ++n) y0[m * ldy + n] = c.accumulate ? start[m * c.n + n] : kNaN;

  kernels::GemmParams p;
  p.m = c.m;
  p.ldx = ldx;
  p.ldy = ldy;
  p.accumulate = c.accumulate;
  p.precision = c.bf16 ? kernels::GemmPrecision::Bf16 : kernels::GemmPrecision::F32;
  std::vector<float> want = y0;
  p.x = x.data();
  p.w = w.view();
  p.y = want.data();
  kernels::ref::gemm(p);

  std::vector<float> wf(c.n * c.k);
  kernels::dequantize_rows(p.w, 0, c.n, wf.data());
  const auto dx = upload(dev, x);
  const DeviceWeight dw(dev, w);
  auto dy = upload(dev, y0);
  p.x = dx.get();
  p.w = dw.view();
  p.y = dy.get();
  kernels::gemm(p);
  const std::vector<float> got = download(dev, dy);

  for (int64_t m = 0; m <= c.m; ++m)
    for (int64_t n = 0; n < ldy; ++n) {
      const size_t i = m * ldy + n;
      char what[96];
      std::snprintf(what, sizeof what, "y[%ld][%ld] = %g, ref %g", long(m), long(n), got[i], want[i]);
      if (m == c.m || n >= c.n) {
        rep.check(std::bit_cast<uint32_t>(got[i]) == std::bit_cast<uint32_t>(kSentinel), what);
        continue;
      }
      double mag = c.accumulate ? std::fabs(start[m * c.n + n]) : 0.0;
      for (int64_t k = 0; k < c.k; ++k) {
        const float xv = c.bf16 ? kernels::bf16_decode(kernels::bf16_encode(x[m * ldx + k]))
                                : x[m * ldx + k];
        mag += std::fabs(double(xv) * wf[n * c.k + k]);
      }
      rep.check(std::fabs(double(got[i]) - want[i]) <= 1e-5 * mag + 1e-30, what);
    }
  rep.end_case();
}

}  // namespace

void check_gemm(DeviceContext& dev, Report& rep) {
  const WeightFormat all[] = {WeightFormat::F32, WeightFormat::BF16, WeightFormat::F16,
                              WeightFormat::FP8, WeightFormat::FP4, WeightFormat::ROWFP8};
  uint32_t seed = 100;
  // Decode (m <= 8) and tiled (m > 8) shapes; n not a multiple of 8 or 64; k one block,
  // many blocks, and more blocks than a warp has lanes.
  const int64_t ms[] = {1, 2, 3, 5, 8, 9, 17, 64, 100};
  const int64_t nks[][2] = {{1, 32}, {37, 64}, {130, 96}, {257, 1024}, {64, 2080}};
  for (WeightFormat f : all)
    for (int64_t m : ms)
      for (const auto& nk : nks) run_case(dev, rep, {m, nk[0], nk[1], f}, seed++);
  // FP8 allows ragged K (partial scale blocks): the element path.
  for (int64_t m : {1, 4, 33}) run_case(dev, rep, {m, 45, 45, WeightFormat::FP8}, seed++);
  for (WeightFormat f : all) {
    run_case(dev, rep, {3, 70, 128, f, 5, 3}, seed++);          // padded strides
    run_case(dev, rep, {3, 70, 128, f, 0, 0, true}, seed++);    // accumulate
    run_case(dev, rep, {70, 70, 128, f, 0, 2, true}, seed++);   // tiled, accumulate
    run_case(dev, rep, {2, 70, 128, f, 0, 0, false, true}, seed++);   // bf16 activations
    run_case(dev, rep, {65, 70, 128, f, 1, 0, false, true}, seed++);
  }
  run_case(dev, rep, {4, 17, 0, WeightFormat::F32}, seed++);  // K = 0: y = 0
}

}  // namespace troupe::cuda_check

// cuda::rms_norm, cuda::softmax and cuda::rope against ref. Tolerances: RMSNorm and
// RoPE round as ref does (f64 sum / f64 angles, IEEE divide, no fused multiply-add),
// so 2 ulp-ish (rel 3e-7); softmax uses CUDA's expf (2 ulp), rel 1e-6.
#include <bit>

#include "kernels/norm.h"
#include "kernels/rope.h"
#include "tests/cuda/check.h"

namespace troupe::cuda_check {
namespace {

// Compares rows [0, rows) x [0, n) with tolerance and the rest of each ld-wide row
// (and everything after) bit for bit with `before`.
void compare_rows(Report& rep, const std::vector<float>& got, const std::vector<float>& want,
                  const std::vector<float>& before, int64_t rows, int64_t n, int64_t ld, float rel,
                  float abs) {
  for (size_t i = 0; i < got.size(); ++i) {
    const int64_t r = int64_t(i) / ld, c = int64_t(i) % ld;
    char what[96];
    std::snprintf(what, sizeof what, "[%ld][%ld] = %g, ref %g", long(r), long(c), got[i], want[i]);
    if (r < rows && c < n) rep.check(close(got[i], want[i], rel, abs), what);
    else rep.check(std::bit_cast<uint32_t>(got[i]) == std::bit_cast<uint32_t>(before[i]), what);
  }
}

void rms_case(DeviceContext& dev, Report& rep, int64_t rows, int64_t n, int64_t pad, bool weight,
              bool in_place, uint32_t seed) {
  char name[96];
  std::snprintf(name, sizeof name, "rms_norm rows=%ld n=%ld pad=%ld%s%s", long(rows), long(n),
                long(pad), weight ? " weight" : "", in_place ? " in-place" : "");
  rep.begin_case(name);
  const int64_t ld = n + pad;
  std::vector<float> x = normal((rows + 1) * ld, seed, 3.0f);
  const std::vector<float> w = normal(n, seed + 1);
  std::vector<float> out0((rows + 1) * ld, kSentinel);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < n; ++c) out0[r * ld + c] = kNaN;
  kernels::RmsNormParams p;
  p.rows = rows, p.n = n, p.ld = ld, p.ld_out = ld, p.eps = 1e-6f;
  std::vector<float> want = in_place ? x : out0;
  p.x = in_place ? want.data() : x.data();
  p.weight = weight ? w.data() : nullptr;
  p.out = want.data();
  kernels::ref::rms_norm(p);
  const auto dx = upload(dev, x), dw = upload(dev, w);
  auto dout = upload(dev, in_place ? x : out0);
  p.x = in_place ? dout.get() : dx.get();
  p.weight = weight ? dw.get() : nullptr;
  p.out = dout.get();
  kernels::rms_norm(p);
  compare_rows(rep, download(dev, dout), want, in_place ? x : out0, rows, n, ld, 3e-7f, 1e-30f);
  rep.end_case();
}

void softmax_case(DeviceContext& dev, Report& rep, int64_t rows, int64_t n, int64_t pad,
                  uint32_t seed) {
  char name[64];
  std::snprintf(name, sizeof name, "softmax rows=%ld n=%ld pad=%ld", long(rows), long(n), long(pad));
  rep.begin_case(name);
  const int64_t ld = n + pad;
  std::vector<float> x = normal((rows + 1) * ld, seed, 4.0f);
  for (int64_t r = 0; r < rows; ++r) x[r * ld + (r % n)] = -INFINITY;  // masked entries
  if (rows > 1)
    for (int64_t c = 0; c < n; ++c) x[ld + c] = -INFINITY;  // a fully masked row: zeros
  std::vector<float> want = x;
  kernels::SoftmaxParams p;
  p.rows = rows, p.n = n, p.ld = ld;
  p.x = want.data();
  kernels::ref::softmax(p);
  auto dx = upload(dev, x);
  p.x = dx.get();
  kernels::softmax(p);
  compare_rows(rep, download(dev, dx), want, x, rows, n, ld, 1e-6f, 1e-30f);
  rep.end_case();
}

void rope_case(DeviceContext& dev, Report& rep, int64_t groups, int64_t per_position, int64_t n,
               int64_t rope_dim, int64_t pad, bool yarn, bool inverse, uint32_t seed,
               bool neox = false) {
  char name[128];
  std::snprintf(name, sizeof name, "rope groups=%ld heads=%ld n=%ld dr=%ld pad=%ld%s%s%s",
                long(groups), long(per_position), long(n), long(rope_dim), long(pad),
                yarn ? " yarn" : "", inverse ? " inverse" : "", neox ? " neox" : "");
  rep.begin_case(name);
  const int64_t count = groups * per_position, ld = n + pad;
  std::vector<float> x = normal((count + 1) * ld, seed);
  std::vector<int64_t> pos(groups);
  std::mt19937 rng(seed);
  for (auto& q : pos) q = std::uniform_int_distribution<int64_t>(0, 1 << 20)(rng);
  kernels::YarnScaling s;
  if (yarn) s = {16.0, 65536, 32, 1};
  const std::vector<double> freqs = kernels::rope_frequencies(10000.0, rope_dim, s);
  std::vector<float> want = x;
  kernels::RopeParams p;
  p.count = count, p.n = n, p.ld = ld, p.rope_dim = rope_dim, p.per_position = per_position;
  p.inverse = inverse;
  p.neox = neox;
  p.x = want.data(), p.positions = pos.data(), p.freqs = freqs.data();
  kernels::ref::rope(p);
  auto dx = upload(dev, x);
  const auto dpos = upload(dev, pos);
  const auto dfreq = upload(dev, freqs);
  p.x = dx.get(), p.positions = dpos.get(), p.freqs = dfreq.get();
  kernels::rope(p);
  // Non-rotated channels and pads must be untouched: compare_rows checks [0, n) with
  // tolerance, which includes the pass-through channels (exactly equal to x there).
  compare_rows(rep, download(dev, dx), want, x, count, n, ld, 3e-7f, 1e-6f);
  rep.end_case();
}

}  // namespace

void check_norm_rope(DeviceContext& dev, Report& rep) {
  uint32_t seed = 300;
  for (int64_t n : {1, 7, 32, 513, 4096, 7168})
    for (int64_t rows : {1, 3, 17}) rms_case(dev, rep, rows, n, 0, true, false, seed++);
  rms_case(dev, rep, 5, 100, 7, false, false, seed++);
  rms_case(dev, rep, 5, 1000, 3, true, true, seed++);
  for (int64_t n : {1, 5, 255, 1024, 129280}) softmax_case(dev, rep, 3, n, 0, seed++);
  softmax_case(dev, rep, 4, 77, 5, seed++);
  rope_case(dev, rep, 5, 1, 64, 64, 0, false, false, seed++);
  rope_case(dev, rep, 3, 8, 512, 64, 0, true, false, seed++);  // heads share a position
  rope_case(dev, rep, 3, 8, 512, 64, 0, true, true, seed++);
  rope_case(dev, rep, 7, 2, 130, 2, 6, false, false, seed++);  // padded, one pair
  rope_case(dev, rep, 2, 64, 192, 64, 0, true, false, seed++);
  rope_case(dev, rep, 3, 8, 512, 128, 0, false, false, seed++, /*neox=*/true);  // Qwen2
  rope_case(dev, rep, 7, 2, 130, 64, 6, false, true, seed++, /*neox=*/true);
}

}  // namespace troupe::cuda_check

// Fast RMSNorm / softmax: rows split across threads, each row done by one row
// kernel (AVX-512 when the CPU has it, else the portable loops below).
#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/cpu/norm_rows.h"
#include "kernels/dispatch.h"
#include "kernels/parallel.h"

namespace troupe::kernels::cpu {
namespace {

void rms_norm_row_portable(const float* x, const float* w, float* out, int64_t n, float eps) {
  // Eight partial sums: vectorizable without -ffast-math, and a fixed order.
  float part[8] = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j) part[j] += x[i + j] * x[i + j];
  for (; i < n; ++i) part[0] += x[i] * x[i];
  float sum_sq = 0;
  for (float s : part) sum_sq += s;
  const float inv = 1.0f / std::sqrt(sum_sq / static_cast<float>(n) + eps);
  if (w) {
    for (i = 0; i < n; ++i) out[i] = w[i] * (x[i] * inv);
  } else {
    for (i = 0; i < n; ++i) out[i] = x[i] * inv;
  }
}

void softmax_row_portable(float* x, int64_t n) {
  float max = -std::numeric_limits<float>::infinity();
  for (int64_t i = 0; i < n; ++i) max = std::fmax(max, x[i]);
  if (max == -std::numeric_limits<float>::infinity()) {
    for (int64_t i = 0; i < n; ++i) x[i] = 0.0f;
    return;
  }
  float sum = 0;
  for (int64_t i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - max);
    sum += x[i];
  }
  const float inv = 1.0f / sum;
  for (int64_t i = 0; i < n; ++i) x[i] *= inv;
}

// Rows per task: enough work per chunk that threading pays for short rows.
int64_t rows_per_chunk(int64_t n) {
  return std::max<int64_t>(1, 16384 / std::max<int64_t>(n, 1));
}

}  // namespace

const NormRowKernels& portable_norm_kernels() {
  static const NormRowKernels k{rms_norm_row_portable, softmax_row_portable};
  return k;
}

void rms_norm(const RmsNormParams& p, const NormRowKernels& k) {
  const int64_t ld = p.ld ? p.ld : p.n;
  const int64_t ld_out = p.ld_out ? p.ld_out : p.n;
  parallel_for(p.rows, rows_per_chunk(p.n), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r)
      k.rms_norm_row(p.x + r * ld, p.weight, p.out + r * ld_out, p.n, p.eps);
  });
}

void softmax(const SoftmaxParams& p, const NormRowKernels& k) {
  const int64_t ld = p.ld ? p.ld : p.n;
  if (p.n == 0) return;
  parallel_for(p.rows, rows_per_chunk(p.n), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) k.softmax_row(p.x + r * ld, p.n);
  });
}

namespace {

const NormRowKernels& active_norm_kernels() {
  switch (active_cpu_path()) {
    case CpuPath::Avx512: return avx512_norm_kernels();
    case CpuPath::Avx2: return avx2_norm_kernels();
    case CpuPath::Portable: break;
  }
  return portable_norm_kernels();
}

}  // namespace

void rms_norm(const RmsNormParams& p) {
  rms_norm(p, active_norm_kernels());
}

void softmax(const SoftmaxParams& p) {
  softmax(p, active_norm_kernels());
}

}  // namespace troupe::kernels::cpu

// AVX2 row kernels for RMSNorm and softmax (norm_avx512.cpp's on 8-lane vectors; selected
// by cpu::rms_norm / cpu::softmax on the AVX2 path).
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/cpu/avx2_vec.h"
#include "kernels/cpu/norm_rows.h"

namespace troupe::kernels::cpu {
namespace {

using avx2::first_lanes;

inline __m256i lanes_left(int64_t i, int64_t n) {
  return first_lanes(std::min<int64_t>(8, n - i));
}

// fn(i, load, store) over x[0, n) in 8-float steps: whole vectors by plain loads and
// stores, the ragged tail through masks (vmaskmovps stores are slow on AMD cores, so
// only the tail pays for them).
template <class Fn>
inline void for_each_vector(int64_t n, Fn&& fn) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    fn(i, [](const float* p) { return _mm256_loadu_ps(p); }, [](float* p, __m256 v) { _mm256_storeu_ps(p, v); });
  if (i < n) {
    const __m256i m = lanes_left(i, n);
    fn(i, [m](const float* p) { return _mm256_maskload_ps(p, m); },
       [m](float* p, __m256 v) { _mm256_maskstore_ps(p, m, v); });
  }
}

float sum_of_squares(const float* x, int64_t n) {
  // Four accumulators hide the FMA latency; the masked tail joins the first.
  __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
  int64_t i = 0;
  for (; i + 32 <= n; i += 32)
    for (int j = 0; j < 4; ++j) {
      const __m256 v = _mm256_loadu_ps(x + i + 8 * j);
      acc[j] = _mm256_fmadd_ps(v, v, acc[j]);
    }
  for (; i < n; i += 8) {
    const __m256 v = _mm256_maskload_ps(x + i, lanes_left(i, n));
    acc[0] = _mm256_fmadd_ps(v, v, acc[0]);
  }
  return avx2::hsum(_mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3])));
}

void rms_norm_row(const float* x, const float* w, float* out, int64_t n, float eps) {
  const float inv = 1.0f / std::sqrt(sum_of_squares(x, n) / static_cast<float>(n) + eps);
  const __m256 vinv = _mm256_set1_ps(inv);
  for_each_vector(n, [&](int64_t i, auto load, auto store) {
    __m256 v = _mm256_mul_ps(load(x + i), vinv);
    if (w) v = _mm256_mul_ps(load(w + i), v);
    store(out + i, v);
  });
}

void softmax_row(float* x, int64_t n) {
  const __m256 neg_inf = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
  __m256 vmax = neg_inf;
  for (int64_t i = 0; i < n; i += 8) {
    const __m256i m = lanes_left(i, n);
    const __m256 v = _mm256_blendv_ps(neg_inf, _mm256_maskload_ps(x + i, m), _mm256_castsi256_ps(m));
    vmax = _mm256_max_ps(v, vmax);  // NaN lanes kept out (max returns its second operand)
  }
  const float max = avx2::hmax(vmax);
  if (max == -std::numeric_limits<float>::infinity()) {
    for (int64_t i = 0; i < n; ++i) x[i] = 0.0f;  // all masked: no mass anywhere
    return;
  }
  const __m256 shift = _mm256_set1_ps(max);
  __m256 vsum = _mm256_setzero_ps();
  for_each_vector(n, [&](int64_t i, auto load, auto store) {
    const __m256 e = avx2::exp(_mm256_sub_ps(load(x + i), shift));
    store(x + i, e);
    // The tail's masked-off lanes loaded 0, so e^(0 - max) there: kept out of the sum.
    vsum = _mm256_add_ps(vsum, _mm256_and_ps(e, _mm256_castsi256_ps(lanes_left(i, n))));
  });
  const __m256 inv = _mm256_set1_ps(1.0f / avx2::hsum(vsum));
  for_each_vector(n, [&](int64_t i, auto load, auto store) { store(x + i, _mm256_mul_ps(load(x + i), inv)); });
}

}  // namespace

const NormRowKernels& avx2_norm_kernels() {
  static const NormRowKernels k{rms_norm_row, softmax_row};
  return k;
}

}  // namespace troupe::kernels::cpu

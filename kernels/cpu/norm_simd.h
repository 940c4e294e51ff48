// The RMSNorm and softmax row kernels (norm_rows.h), and the shifted e^x sum softmax and
// attention share (exp_shift_sum: AttentionKernels::exp_sum), written once over a vector type S
// (S::V of S::W lanes; zero, set1, load, load_part, store, store_part, add, sub, mul,
// max, fma, exp, hsum, hmax: avx2_vec.h / avx512_vec.h `Simd`) and instantiated by
// norm_avx2.cpp and norm_avx512.cpp, each with its own -m flags (everything here sits in
// an unnamed namespace). Whole vectors go through plain loads and stores, a ragged tail
// through load_part / store_part (for_each_vector, simd_vectors.h).
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>

#include "kernels/cpu/norm_rows.h"
#include "kernels/cpu/simd_vectors.h"

namespace troupe::kernels::cpu {
namespace {

template <class S>
float sum_of_squares(const float* x, int64_t n) {
  // Four accumulators hide the FMA latency; the vectors past the last four join the first.
  using V = typename S::V;
  V acc[4] = {S::zero(), S::zero(), S::zero(), S::zero()};
  int64_t i = 0;
  for (; i + 4 * S::W <= n; i += 4 * S::W)
    for (int j = 0; j < 4; ++j) {
      const V v = S::load(x + i + S::W * j);
      acc[j] = S::fma(v, v, acc[j]);
    }
  for_each_vector<S>(n - i, [&](int64_t j, auto load, auto) {
    const V v = load(x + i + j);
    acc[0] = S::fma(v, v, acc[0]);
  });
  return S::hsum(S::add(S::add(acc[0], acc[1]), S::add(acc[2], acc[3])));
}

template <class S>
void rms_norm_row_simd(const float* x, const float* w, float* out, int64_t n, float eps) {
  const float inv = 1.0f / std::sqrt(sum_of_squares<S>(x, n) / static_cast<float>(n) + eps);
  const typename S::V vinv = S::set1(inv);
  for_each_vector<S>(n, [&](int64_t i, auto load, auto store) {
    typename S::V v = S::mul(load(x + i), vinv);
    if (w) v = S::mul(load(w + i), v);
    store(out + i, v);
  });
}

// x[i] = e^{x[i] - shift} for i < n, in place; returns Σ x[i] (per lane, then hsum).
template <class S>
float exp_shift_sum(float* x, int64_t n, float shift) {
  const typename S::V vshift = S::set1(shift);
  typename S::V vsum = S::zero();
  for_each_vector<S>(n, [&](int64_t j, auto load, auto store) {
    store(x + j, S::exp(S::sub(load(x + j), vshift)));
    vsum = S::add(vsum, load(x + j));  // read back: a tail's lanes past n read 0
  });
  return S::hsum(vsum);
}

template <class S>
void softmax_row_simd(float* x, int64_t n) {
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  typename S::V vmax = S::set1(kNegInf);
  int64_t i = 0;
  for (; i + S::W <= n; i += S::W) vmax = S::max(S::load(x + i), vmax);  // NaN lanes kept out
  float max = S::hmax(vmax);
  for (; i < n; ++i) max = x[i] > max ? x[i] : max;  // the tail; NaN kept out the same way
  if (max == kNegInf) {
    for (int64_t j = 0; j < n; ++j) x[j] = 0.0f;  // all masked: no mass anywhere
    return;
  }
  const typename S::V inv = S::set1(1.0f / exp_shift_sum<S>(x, n, max));
  for_each_vector<S>(n, [&](int64_t j, auto load, auto store) { store(x + j, S::mul(load(x + j), inv)); });
}

}  // namespace
}  // namespace troupe::kernels::cpu

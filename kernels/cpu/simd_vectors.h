// for_each_vector: a loop over [0, n) one S::W-lane vector at a time, whole vectors by
// plain loads and stores and a ragged tail by S::load_part / S::store_part (AVX2's
// vmaskmovps stores are slow on AMD cores, so only the tail pays for them). S is a path's
// `Simd` (avx2_vec.h / avx512_vec.h); for the row kernels written once over it
// (norm_simd.h, moe_combine_simd.h), each instantiated under its own -m flags (so it sits
// in an unnamed namespace).
#pragma once

#include <cstdint>

namespace troupe::kernels::cpu {
namespace {

// fn(i, load, store) over [0, n) one vector at a time: plain for whole vectors, partial
// for the tail (its lanes past n load 0 and are not stored).
template <class S, class Fn>
void for_each_vector(int64_t n, Fn&& fn) {
  int64_t i = 0;
  for (; i + S::W <= n; i += S::W) fn(i, [](const float* p) { return S::load(p); }, [](float* p, typename S::V v) { S::store(p, v); });
  if (i < n) {
    const int64_t left = n - i;
    fn(i, [left](const float* p) { return S::load_part(p, left); },
       [left](float* p, typename S::V v) { S::store_part(p, v, left); });
  }
}

}  // namespace
}  // namespace troupe::kernels::cpu

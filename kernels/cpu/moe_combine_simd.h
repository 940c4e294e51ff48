// combine_token (moe_combine_rows.h) written once over a vector type S (avx2_vec.h /
// avx512_vec.h `Simd`) and instantiated by moe_combine_avx2.cpp and moe_combine_avx512.cpp
// with their own -m flags (everything here sits in an unnamed namespace).
#pragma once

#include <cstdint>

namespace troupe::kernels::cpu {
namespace {

// out[j] += w_k · y_k[j] for k in order, S::W columns at a time; the tail by the partial
// loads and stores (lanes past hidden load 0 and are not stored).
template <class S>
void combine_token_simd(float* out, const float* const* y, const float* w, int64_t count,
                        int64_t hidden) {
  auto columns = [&](int64_t j, auto load, auto store) {
    typename S::V s = load(out + j);
    for (int64_t k = 0; k < count; ++k) {
      typename S::V t = S::mul(S::set1(w[k]), load(y[k] + j));
      // Opaque to the optimiser: these files have -mfma, and GCC would fuse the multiply
      // into the add (C++ contracts by default), which is not the reference's rounding.
      asm("" : "+v"(t));
      s = S::add(s, t);
    }
    store(out + j, s);
  };
  int64_t j = 0;
  for (; j + S::W <= hidden; j += S::W)
    columns(
        j, [](const float* p) { return S::load(p); },
        [](float* p, typename S::V v) { S::store(p, v); });
  if (j < hidden) {
    const int64_t left = hidden - j;
    columns(
        j, [left](const float* p) { return S::load_part(p, left); },
        [left](float* p, typename S::V v) { S::store_part(p, v, left); });
  }
}

}  // namespace
}  // namespace troupe::kernels::cpu

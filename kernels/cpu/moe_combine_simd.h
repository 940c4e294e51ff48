// combine_token (moe_combine_rows.h) written once over a vector type S (avx2_vec.h /
// avx512_vec.h `Simd`) and instantiated by moe_combine_avx2.cpp and moe_combine_avx512.cpp
// with their own -m flags (everything here sits in an unnamed namespace).
#pragma once

#include <cstdint>

#include "kernels/cpu/simd_vectors.h"

namespace troupe::kernels::cpu {
namespace {

// out[j] += w_k · y_k[j] for k in order, S::W columns at a time (for_each_vector: the tail
// by partial loads and stores).
template <class S>
void combine_token_simd(float* out, const float* const* y, const float* w, int64_t count,
                        int64_t hidden) {
  for_each_vector<S>(hidden, [&](int64_t j, auto load, auto store) {
    typename S::V s = load(out + j);
    for (int64_t k = 0; k < count; ++k) {
      typename S::V t = S::mul(S::set1(w[k]), load(y[k] + j));
      // Opaque to the optimiser: these files have -mfma, and GCC would fuse the multiply
      // into the add (C++ contracts by default), which is not the reference's rounding.
      asm("" : "+v"(t));
      s = S::add(s, t);
    }
    store(out + j, s);
  });
}

}  // namespace
}  // namespace troupe::kernels::cpu

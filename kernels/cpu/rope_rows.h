// Rotation kernel behind cpu::rope. The AVX-512 one lives in rope_avx512.cpp, the
// AVX2 one in rope_avx2.cpp, the portable one in rope.cpp; exposed so tests can run either.
#pragma once

#include <cstdint>

#include "kernels/rope.h"

namespace troupe::kernels::cpu {

// Rotates x[0..dr) in place by a per-position table laid out pairwise:
//   cos2 = [c0, c0, c1, c1, ...],  sin2 = [-s0, s0, -s1, s1, ...]
//   x'[2i] = x[2i]·c_i + x[2i+1]·(-s_i),  x'[2i+1] = x[2i+1]·c_i + x[2i]·s_i
// which is the §5 formula term for term (products rounded, then one add), so
// every implementation matches the reference bit for bit.
using RopeRotateFn = void (*)(float* x, const float* cos2, const float* sin2, int64_t dr);

RopeRotateFn portable_rope_rotate();
RopeRotateFn avx512_rope_rotate();  // call only when cpu_features().has_avx512()
RopeRotateFn avx2_rope_rotate();    // call only when cpu_features().has_avx2()

void rope(const RopeParams& p, RopeRotateFn rotate);

}  // namespace troupe::kernels::cpu

// a[i] = SwiGLU(a[i], b[i]) over n values (moe_detail::swiglu's definition: clamp when
// limit > 0, silu(a) · b) on the CPU path's vectors; the portable path calls
// moe_detail::swiglu per value. For kernels/cpu/moe.cpp.
#pragma once

#include <cstdint>

namespace troupe::kernels::cpu {

void swiglu_avx512(float* a, const float* b, int64_t n, float limit);
void swiglu_avx2(float* a, const float* b, int64_t n, float limit);
// The active CPU path's form (kernels/dispatch.h).
void swiglu(float* a, const float* b, int64_t n, float limit);

}  // namespace troupe::kernels::cpu

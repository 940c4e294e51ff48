// a[i] = SwiGLU(a[i], b[i]) over n values (moe_detail::swiglu's definition: clamp when
// limit > 0, silu(a) · b) on the CPU path's vectors; the portable path calls
// moe_detail::swiglu per value. For kernels/cpu/moe.cpp.
#pragma once

#include <cstdint>

namespace troupe::kernels::cpu {

// The e^x both vector forms evaluate in double: x = k·ln2 + r with k = round(x · log2 e)
// (ln2 in two parts, the first with trailing zero bits so k·ln2_hi is exact), then
// Horner over kExpTaylor (1/11!, ..., 1/2, 1, 1) for e^r.
namespace swiglu_exp {
inline constexpr double kLog2e = 1.4426950408889634;
inline constexpr double kLn2Hi = 6.93147180369123816490e-01;
inline constexpr double kLn2Lo = 1.90821492927058770002e-10;
inline constexpr double kExpTaylor[12] = {1.0 / 39916800, 1.0 / 3628800, 1.0 / 362880, 1.0 / 40320,
                                          1.0 / 5040,     1.0 / 720,     1.0 / 120,    1.0 / 24,
                                          1.0 / 6,        0.5,           1.0,          1.0};
}  // namespace swiglu_exp

void swiglu_avx512(float* a, const float* b, int64_t n, float limit);
void swiglu_avx2(float* a, const float* b, int64_t n, float limit);
// The active CPU path's form (kernels/dispatch.h).
void swiglu(float* a, const float* b, int64_t n, float limit);

}  // namespace troupe::kernels::cpu

// One token's moe_combine (kernels/cpu/moe.cpp) on the CPU path's vectors:
//   out[j] = ((out[j] + w_0 · y_0[j]) + w_1 · y_1[j]) + ...   for j in [0, hidden)
// over its `count` picked rows in k order, each product rounded before its add (no FMA):
// the reference's sum (moe_detail::combine_row, one k after another) bit for bit, with
// out read and written once rather than once per k.
#pragma once

#include <cstdint>

namespace troupe::kernels::cpu {

void combine_token_avx512(float* out, const float* const* y, const float* w, int64_t count,
                          int64_t hidden);  // only when cpu_features().has_avx512()
void combine_token_avx2(float* out, const float* const* y, const float* w, int64_t count,
                        int64_t hidden);  // only when cpu_features().has_avx2()

}  // namespace troupe::kernels::cpu

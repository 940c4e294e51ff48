// Independent reference for MODEL.md §3 number formats, shared by the format tests:
// grids rebuilt from the format definitions and nearest-value search over all codes
// in double (exact for these grids), ties to the even code.
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

namespace troupe::kernels::quant_ref {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

inline double ref_e4m3_magnitude(int code) {  // code 0..0x7E
  const int e = code >> 3, m = code & 7;
  return e == 0 ? std::ldexp(m / 8.0, -6) : std::ldexp(1.0 + m / 8.0, e - 7);
}

inline double ref_e2m1_magnitude(int code) {  // code 0..7
  static const double grid[8] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};
  return grid[code];
}

// Nearest of codes [0, n_codes) of a magnitude grid after clamping to its max; exact
// ties go to the even code (even mantissa for E4M3, even index for E2M1).
template <class Grid>
inline int ref_nearest(double a, int n_codes, Grid grid) {
  a = std::min(a, grid(n_codes - 1));
  int best = 0;
  for (int c = 1; c < n_codes; ++c) {
    const double d = std::fabs(a - grid(c)), db = std::fabs(a - grid(best));
    if (d < db || (d == db && c % 2 == 0)) best = c;
  }
  return best;
}

inline uint8_t ref_e4m3(float x) {
  const int sign = std::signbit(x) ? 0x80 : 0;
  if (std::isnan(x)) return sign | 0x7F;
  return sign | ref_nearest(std::fabs(static_cast<double>(x)), 0x7F, ref_e4m3_magnitude);
}

inline uint8_t ref_e2m1(float x) {
  const int sign = std::signbit(x) ? 8 : 0;
  if (std::isnan(x)) return sign;
  return sign | ref_nearest(std::fabs(static_cast<double>(x)), 8, ref_e2m1_magnitude);
}

// pow2ceil via frexp (v = f·2^e, f in [0.5, 1)): 2^(e-1) when f = 0.5, else 2^e.
inline int ref_pow2ceil_code(float v) {
  int e = 0;
  const float f = std::frexp(v, &e);
  return (f == 0.5f ? e - 1 : e) + 127;
}

inline float ref_scale(int ue8m0) {
  return std::ldexp(1.0f, ue8m0 - 127);
}

inline bool same_bits(float a, float b) {
  return std::bit_cast<uint32_t>(a) == std::bit_cast<uint32_t>(b);
}

}  // namespace troupe::kernels::quant_ref

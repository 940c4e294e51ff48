// Scalar reference rope (MODEL.md §5): angles in f64, cos/sin rounded to f32,
// the rotation itself in f32. Pair i is channels (2i, 2i+1), or (i, i+Dr/2) with neox.
#include "kernels/rope.h"

#include <cmath>

namespace troupe::kernels::ref {

void rope(const RopeParams& p) {
  const int64_t ld = p.ld ? p.ld : p.n;
  const int64_t base = p.n - p.rope_dim;
  for (int64_t v = 0; v < p.count; ++v) {
    float* x = p.x + v * ld + base;
    const double pos = static_cast<double>(p.positions[v / p.per_position]);
    const int64_t half = p.rope_dim / 2;
    for (int64_t i = 0; i < half; ++i) {
      double phi = pos * p.freqs[i];
      if (p.inverse) phi = -phi;
      const float c = static_cast<float>(std::cos(phi));
      const float s = static_cast<float>(std::sin(phi));
      float& xa = p.neox ? x[i] : x[2 * i];
      float& xb = p.neox ? x[i + half] : x[2 * i + 1];
      const float a = xa;
      const float b = xb;
      xa = a * c - b * s;
      xb = a * s + b * c;
    }
  }
}

}  // namespace troupe::kernels::ref

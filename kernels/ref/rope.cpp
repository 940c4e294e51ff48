// Scalar reference rope (MODEL.md §5): angles in f64, cos/sin rounded to f32,
// the rotation itself in f32.
#include "kernels/rope.h"

#include <cmath>

namespace troupe::kernels::ref {

void rope(const RopeParams& p) {
  const int64_t ld = p.ld ? p.ld : p.n;
  const int64_t base = p.n - p.rope_dim;
  for (int64_t v = 0; v < p.count; ++v) {
    float* x = p.x + v * ld + base;
    const double pos = static_cast<double>(p.positions[v / p.per_position]);
    for (int64_t i = 0; i < p.rope_dim / 2; ++i) {
      double phi = pos * p.freqs[i];
      if (p.inverse) phi = -phi;
      const float c = static_cast<float>(std::cos(phi));
      const float s = static_cast<float>(std::sin(phi));
      const float a = x[2 * i];
      const float b = x[2 * i + 1];
      x[2 * i] = a * c - b * s;
      x[2 * i + 1] = a * s + b * c;
    }
  }
}

}  // namespace troupe::kernels::ref

// Fast rope: vectors split across threads; each thread builds the f32 cos/sin
// table once per position it meets (heads of one position share it), then rotates
// with the chosen kernel. NEOX pairs (i, i + Dr/2) are gathered into adjacent
// pairs, rotated by the same kernel and scattered back: a copy, so the values are
// the adjacent-pair rotation's bit for bit.
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cpu/rope_rows.h"
#include "kernels/dispatch.h"
#include "kernels/parallel.h"
#include "kernels/scratch.h"

namespace troupe::kernels::cpu {
namespace {

void rotate_portable(float* x, const float* cos2, const float* sin2, int64_t dr) {
  for (int64_t j = 0; j < dr; j += 2) {
    const float a = x[j];
    const float b = x[j + 1];
    x[j] = a * cos2[j] + b * sin2[j];
    x[j + 1] = b * cos2[j + 1] + a * sin2[j + 1];
  }
}

// Same angle arithmetic as ref::rope, so the tables are identical to its c_i, s_i.
void build_table(const RopeParams& p, int64_t position, float* cos2, float* sin2) {
  const double pos = static_cast<double>(position);
  for (int64_t i = 0; i < p.rope_dim / 2; ++i) {
    double phi = pos * p.freqs[i];
    if (p.inverse) phi = -phi;
    const float c = static_cast<float>(std::cos(phi));
    const float s = static_cast<float>(std::sin(phi));
    cos2[2 * i] = c;
    cos2[2 * i + 1] = c;
    sin2[2 * i] = -s;
    sin2[2 * i + 1] = s;
  }
}

// x[0..dr) with NEOX pairs: interleave into buf, rotate, de-interleave.
void rotate_neox(float* x, float* buf, const float* cos2, const float* sin2, int64_t dr,
                 RopeRotateFn rotate) {
  const int64_t half = dr / 2;
  for (int64_t i = 0; i < half; ++i) {
    buf[2 * i] = x[i];
    buf[2 * i + 1] = x[i + half];
  }
  rotate(buf, cos2, sin2, dr);
  for (int64_t i = 0; i < half; ++i) {
    x[i] = buf[2 * i];
    x[i + half] = buf[2 * i + 1];
  }
}

}  // namespace

RopeRotateFn portable_rope_rotate() {
  return rotate_portable;
}

void rope(const RopeParams& p, RopeRotateFn rotate) {
  const int64_t ld = p.ld ? p.ld : p.n;
  const int64_t base = p.n - p.rope_dim;
  const int64_t min_chunk = std::max<int64_t>(1, 8192 / std::max<int64_t>(p.rope_dim, 1));
  parallel_for(p.count, min_chunk, [&](int64_t begin, int64_t end) {
    scratch_vector<float> cos2(p.rope_dim), sin2(p.rope_dim), pairs(p.neox ? p.rope_dim : 0);
    int64_t group = -1;
    for (int64_t v = begin; v < end; ++v) {
      if (v / p.per_position != group) {
        group = v / p.per_position;
        build_table(p, p.positions[group], cos2.data(), sin2.data());
      }
      float* x = p.x + v * ld + base;
      if (p.neox)
        rotate_neox(x, pairs.data(), cos2.data(), sin2.data(), p.rope_dim, rotate);
      else
        rotate(x, cos2.data(), sin2.data(), p.rope_dim);
    }
  });
}

void rope(const RopeParams& p) {
  switch (active_cpu_path()) {
    case CpuPath::Avx512: return rope(p, avx512_rope_rotate());
    case CpuPath::Avx2: return rope(p, avx2_rope_rotate());
    case CpuPath::Portable: return rope(p, portable_rope_rotate());
  }
}

}  // namespace troupe::kernels::cpu

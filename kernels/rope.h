// Rotary embedding of MODEL.md §5: rotates only the last Dr channels of each
// vector, pairs (b+2i, b+2i+1) with b = n - Dr, angle φ_i = f64(p)·f_i computed in
// f64, cos/sin rounded to f32. Frequencies f_i (f64) include YaRN when the layer
// uses it; rope_frequencies() builds them. With `neox` the pairs are
// (b+i, b+i+Dr/2) instead (GPT-NeoX / HF rotate_half, ggml's NEOX mode: Qwen2 and HF
// checkpoints), with the same angles and arithmetic per pair.
#pragma once

#include <cstdint>
#include <vector>

namespace troupe::kernels {

struct YarnScaling {
  double factor = 1.0;  // 1 (or absent) means no YaRN
  double original_max_position = 0;
  double beta_fast = 32;
  double beta_slow = 1;
};

// f_i = θ^(-2i/Dr) for i < Dr/2, with YaRN blending when scaling.factor != 1.
std::vector<double> rope_frequencies(double theta, int64_t rope_dim, const YarnScaling& scaling);

struct RopeParams {
  float* x = nullptr;                 // [count, n] in place, vector stride ld (0 means n)
  int64_t count = 0;                  // number of vectors
  int64_t n = 0;                      // channels per vector
  int64_t ld = 0;
  int64_t rope_dim = 0;               // Dr: the last Dr channels rotate
  const int64_t* positions = nullptr; // [count / per_position]: position of each group
  int64_t per_position = 1;           // consecutive vectors sharing one position (heads)
  const double* freqs = nullptr;      // [Dr/2]
  bool inverse = false;               // φ = -f64(p)·f_i
  bool neox = false;                  // pairs (i, i + Dr/2), not (2i, 2i + 1)
};
void rope(const RopeParams& p);

namespace ref { void rope(const RopeParams& p); }
namespace cpu { void rope(const RopeParams& p); }
namespace cuda { void rope(const RopeParams& p); }

}  // namespace troupe::kernels

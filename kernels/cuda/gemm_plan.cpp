#include "kernels/cuda/gemm_plan.h"

namespace troupe::kernels::cuda {

GemmPlan plan_gemm(int64_t m, int64_t n, int64_t k, WeightFormat format, bool data_aligned16) {
  GemmPlan p;
  if (m <= kDecodeMaxRows) {
    p.kernel = GemmKernel::Decode;
    while (p.m_rows < m) p.m_rows *= 2;
    // Whole 32-code blocks in 16-byte pieces: each row starts 16-byte aligned when K is
    // a multiple of 32 (K bytes for FP8/ROWFP8, K/2 for FP4). F32/BF16 take the
    // element path (they are not the served formats).
    const bool blocked = format == WeightFormat::FP8 || format == WeightFormat::ROWFP8 ||
                         format == WeightFormat::FP4;
    p.vector_loads = blocked && k % 32 == 0 && data_aligned16;
    p.grid_x = static_cast<unsigned>((n + kDecodeWarps - 1) / kDecodeWarps);
    p.threads = 32 * kDecodeWarps;
    return p;
  }
  p.kernel = GemmKernel::Tiled;
  p.grid_x = static_cast<unsigned>((n + kTile - 1) / kTile);
  p.grid_y = static_cast<unsigned>((m + kTile - 1) / kTile);
  p.threads = 256;
  return p;
}

}  // namespace troupe::kernels::cuda

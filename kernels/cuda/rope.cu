// cuda::rope: one thread per rotation pair. As ref: the angle f64(p)·f_i in f64,
// cos/sin in f64 rounded to f32, the rotation in f32 without fused multiply-add
// (__fmul_rn / __fadd_rn keep nvcc from contracting), so a pair matches ref bit for bit
// wherever CUDA's f64 cos/sin round to the same f32 as the host's.
#include "kernels/rope.h"

#include "kernels/cuda/common.cuh"

namespace troupe::kernels::cuda {
namespace {

__global__ void rope_pairs(RopeParams p, int64_t ld) {
  const int64_t half = p.rope_dim / 2;
  const int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t >= p.count * half) return;
  const int64_t v = t / half, i = t % half;
  float* x = p.x + v * ld + (p.n - p.rope_dim);
  double phi = static_cast<double>(p.positions[v / p.per_position]) * p.freqs[i];
  if (p.inverse) phi = -phi;
  double sd, cd;
  sincos(phi, &sd, &cd);
  const float c = static_cast<float>(cd), s = static_cast<float>(sd);
  // The pair (2i, 2i+1), or (i, i + Dr/2) in NEOX mode.
  const int64_t ia = p.neox ? i : 2 * i, ib = p.neox ? i + half : 2 * i + 1;
  const float a = x[ia], b = x[ib];
  x[ia] = __fsub_rn(__fmul_rn(a, c), __fmul_rn(b, s));
  x[ib] = __fadd_rn(__fmul_rn(a, s), __fmul_rn(b, c));
}

}  // namespace

void rope(const RopeParams& p) {
  const Launch l = launch_on_current("cuda::rope");
  const int64_t pairs = p.count * (p.rope_dim / 2);
  rope_pairs<<<blocks_for(pairs, 256), 256, 0, l.stream>>>(p, p.ld ? p.ld : p.n);
  TROUPE_CUDA_LAUNCHED(rope_pairs);
}

}  // namespace troupe::kernels::cuda

// cuda::rms_norm and cuda::softmax: one block per row. RMSNorm sums squares in f64 (as
// ref) and rounds like it: mean to f32, sqrt and the divide IEEE (nvcc's defaults,
// no fast math), so rows match ref up to the f64 summation order. Softmax: f32 exp
// (CUDA's expf, within 2 ulp), f64 sum, as ref otherwise.
#include "kernels/norm.h"

#include "kernels/cuda/common.cuh"

namespace troupe::kernels::cuda {
namespace {

constexpr int kThreads = 256;

__global__ void __launch_bounds__(kThreads) rms_norm_rows(RmsNormParams p, int64_t ld, int64_t ld_out) {
  __shared__ double partial[32];
  const float* x = p.x + int64_t(blockIdx.x) * ld;
  float* out = p.out + int64_t(blockIdx.x) * ld_out;
  double sum_sq = 0;
  for (int64_t i = threadIdx.x; i < p.n; i += blockDim.x) sum_sq += double(x[i]) * double(x[i]);
  sum_sq = block_sum(sum_sq, partial);  // all reads of x are done: out may alias it
  const float mean = static_cast<float>(sum_sq / double(p.n));
  const float denom = sqrtf(__fadd_rn(mean, p.eps));
  for (int64_t i = threadIdx.x; i < p.n; i += blockDim.x) {
    const float w = p.weight ? p.weight[i] : 1.0f;
    out[i] = __fmul_rn(w, __fdiv_rn(x[i], denom));
  }
}

__global__ void __launch_bounds__(kThreads) softmax_rows(SoftmaxParams p, int64_t ld) {
  __shared__ float partial_max[32];
  __shared__ double partial_sum[32];
  float* x = p.x + int64_t(blockIdx.x) * ld;
  float mx = -INFINITY;
  for (int64_t i = threadIdx.x; i < p.n; i += blockDim.x) mx = fmaxf(mx, x[i]);
  mx = block_max(mx, partial_max);
  if (mx == -INFINITY) {  // every entry masked: no mass anywhere (not NaN)
    for (int64_t i = threadIdx.x; i < p.n; i += blockDim.x) x[i] = 0.0f;
    return;
  }
  double sum = 0;
  for (int64_t i = threadIdx.x; i < p.n; i += blockDim.x) {
    x[i] = expf(__fsub_rn(x[i], mx));
    sum += x[i];
  }
  const float total = static_cast<float>(block_sum(sum, partial_sum));
  for (int64_t i = threadIdx.x; i < p.n; i += blockDim.x) x[i] = __fdiv_rn(x[i], total);
}

}  // namespace

void rms_norm(const RmsNormParams& p) {
  const Launch l = launch_on_current("cuda::rms_norm");
  rms_norm_rows<<<static_cast<unsigned>(p.rows), kThreads, 0, l.stream>>>(
      p, p.ld ? p.ld : p.n, p.ld_out ? p.ld_out : p.n);
  TROUPE_CUDA_LAUNCHED(rms_norm_rows);
}

void softmax(const SoftmaxParams& p) {
  const Launch l = launch_on_current("cuda::softmax");
  softmax_rows<<<static_cast<unsigned>(p.rows), kThreads, 0, l.stream>>>(p, p.ld ? p.ld : p.n);
  TROUPE_CUDA_LAUNCHED(softmax_rows);
}

}  // namespace troupe::kernels::cuda

// cuda::attention: sink attention over gathered key rows (kernels/attention.h), one
// block per (query, head), three steps with the row's weights in pool scratch:
//   logits  warp per key: ℓ_k = (q · K_k) · scale (null key: skipped)
//   weights m = max(max_k ℓ_k, sink); w_k = e^{ℓ_k - m}; denominator Σ w_k + e^{sink - m}
//   values  thread per channel d: o_d = Σ_k w_k K_k[d] / denominator (0 without keys or sink)
// f32 throughout (ref uses f64 sums): within the CPU paths' tolerance, not bit for bit.
#include "kernels/attention.h"

#include "kernels/cuda/common.cuh"

namespace troupe::kernels::cuda {
namespace {

constexpr int kThreads = 256;

__global__ void __launch_bounds__(kThreads) attend(AttentionParams p, float* scratch) {
  __shared__ float partial[32];
  const int64_t mh = blockIdx.x, m = mh / p.heads, h = mh % p.heads;
  const float* q = p.q + mh * p.dim;
  const float* const* keys = p.keys + m * p.max_keys;
  float* w = scratch + mh * p.max_keys;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  for (int64_t k = warp; k < p.max_keys; k += warps) {
    const float* key = keys[k];
    if (!key) continue;
    float dot = 0;
    for (int64_t d = lane; d < p.dim; d += 32) dot = fmaf(q[d], key[d], dot);
    dot = warp_sum(dot);
    if (lane == 0) w[k] = dot * p.scale;
  }
  __syncthreads();
  float mx = p.sink ? p.sink[h] : -INFINITY;
  for (int64_t k = threadIdx.x; k < p.max_keys; k += blockDim.x)
    if (keys[k]) mx = fmaxf(mx, w[k]);
  mx = block_max(mx, partial);
  float denom = 0;
  for (int64_t k = threadIdx.x; k < p.max_keys; k += blockDim.x) {
    if (!keys[k]) continue;
    w[k] = expf(w[k] - mx);
    denom += w[k];
  }
  denom = block_sum(denom, partial);  // its barrier also publishes w
  if (p.sink) denom += expf(p.sink[h] - mx);
  float* out = p.out + mh * p.dim;
  for (int64_t d = threadIdx.x; d < p.dim; d += blockDim.x) {
    float acc = 0;
    for (int64_t k = 0; k < p.max_keys; ++k)
      if (keys[k]) acc = fmaf(w[k], keys[k][d], acc);
    out[d] = denom > 0 ? acc / denom : 0.0f;
  }
}

}  // namespace

void attention(const AttentionParams& p) {
  const Launch l = launch_on_current("cuda::attention");
  DeviceBuffer<float> scratch(l.dev, static_cast<size_t>(p.m * p.heads * p.max_keys));
  attend<<<static_cast<unsigned>(p.m * p.heads), kThreads, 0, l.stream>>>(p, scratch.get());
  TROUPE_CUDA_LAUNCHED(attend);
}

}  // namespace troupe::kernels::cuda

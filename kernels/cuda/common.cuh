// Internal to kernels/cuda: error checks, the launch context of an entry point, and
// the warp/block reductions the kernels share.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/check.h"
#include "kernels/cuda/device_context.h"

#define TROUPE_CUDA_CHECK(expr)                                                        \
  do {                                                                                 \
    const cudaError_t troupe_cuda_err_ = (expr);                                       \
    TROUPE_CHECK(troupe_cuda_err_ == cudaSuccess, #expr, ": ",                         \
                 cudaGetErrorString(troupe_cuda_err_));                                \
  } while (0)

// After a launch: a bad configuration shows up here; faults inside the kernel show
// up at the next synchronize().
#define TROUPE_CUDA_LAUNCHED(kernel) TROUPE_CUDA_CHECK(cudaGetLastError())

namespace troupe::kernels::cuda {

// What an entry point launches with: the calling thread's device (made current) and
// its stream.
struct Launch {
  DeviceContext& dev;
  cudaStream_t stream;
};
Launch launch_on_current(const char* kernel);

inline unsigned blocks_for(int64_t n, int threads) {
  return static_cast<unsigned>((n + threads - 1) / threads);
}

template <class T>
__device__ inline T warp_sum(T v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xFFFFFFFFu, v, o);
  return v;
}

__device__ inline float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xFFFFFFFFu, v, o));
  return v;
}

// Sum over the block (blockDim.x a multiple of 32, <= 1024); every thread gets it.
// `shared` holds 32 Ts. Ends with a barrier, so `shared` may be reused right after.
template <class T>
__device__ inline T block_sum(T v, T* shared) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  v = warp_sum(v);
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  T total = lane < warps ? shared[lane] : T(0);
  total = warp_sum(total);
  __syncthreads();
  return total;
}

__device__ inline float block_max(float v, float* shared) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  v = warp_max(v);
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  float m = lane < warps ? shared[lane] : -INFINITY;
  m = warp_max(m);
  __syncthreads();
  return m;
}

}  // namespace troupe::kernels::cuda

namespace troupe::kernels::cuda {

inline Launch launch_on_current(const char* kernel) {
  DeviceContext& dev = current_device(kernel);
  TROUPE_CUDA_CHECK(cudaSetDevice(dev.device()));
  return {dev, dev.stream()};
}

}  // namespace troupe::kernels::cuda

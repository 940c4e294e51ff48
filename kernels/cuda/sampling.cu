// cuda::sample: the rule of kernels/sampling.h run on the device with the CPU's own
// code for the rule (sampling_detail::draw, TROUPE_HD) and the same Philox stream
// (kernels/philox.h), so a seeded row gives the CPU's token whenever the weights e_i
// round alike:
//
//   prepare  block per row: greedy rows -> argmax (ties lowest, as kernels::argmax);
//            sampled rows -> e_i = exp(z_i - max z), z_i = logit_i / T, computed as
//            f32(exp(f64(z_i - max))) (the host's expf rounds correctly nearly always,
//            and so does this), ids_i = i
//   sort     all rows at once: (e desc, id) by a stable segmented radix sort -> order O
//   draw     one thread per sampled row: draw(e, vocab, params, u, O) with its f64 sums
//            in the CPU's order (sequential: that order is the definition)
#include <cub/device/device_segmented_radix_sort.cuh>

#include "kernels/cuda/common.cuh"
#include "kernels/philox.h"
#include "kernels/sampling.h"
#include "kernels/sampling_rules.h"

namespace troupe::kernels::cuda {
namespace {

constexpr int kThreads = 256;

// argmax with kernels::argmax's answer: the first maximum among non-NaN values, and 0
// when logits[0] is NaN (a sequential scan never moves off a NaN start).
__device__ int32_t block_argmax(const float* x, int64_t n) {
  __shared__ float best_v[kThreads];
  __shared__ int64_t best_i[kThreads];
  float bv = 0.0f;
  int64_t bi = -1;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    const float v = x[i];
    if (bi < 0 ? !isnan(v) : v > bv) bv = v, bi = i;
  }
  best_v[threadIdx.x] = bv;
  best_i[threadIdx.x] = bi;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) {
      const float ov = best_v[threadIdx.x + s];
      const int64_t oi = best_i[threadIdx.x + s];
      const int64_t mi = best_i[threadIdx.x];
      if (oi >= 0 && (mi < 0 || ov > best_v[threadIdx.x] || (ov == best_v[threadIdx.x] && oi < mi)))
        best_v[threadIdx.x] = ov, best_i[threadIdx.x] = oi;
    }
    __syncthreads();
  }
  if (isnan(x[0]) || best_i[0] < 0) return 0;
  return static_cast<int32_t>(best_i[0]);
}

__global__ void __launch_bounds__(kThreads) sample_prepare(SampleParams p, float* e, int32_t* ids,
                                                           int32_t* offsets) {
  __shared__ float partial[32];
  const int64_t r = blockIdx.x;
  const float* logits = p.logits + r * p.vocab;
  float* er = e + r * p.vocab;
  int32_t* idr = ids + r * p.vocab;
  if (threadIdx.x == 0) {
    offsets[r] = static_cast<int32_t>(r * p.vocab);
    if (r == p.m - 1) offsets[p.m] = static_cast<int32_t>(p.m * p.vocab);
  }
  const float t = p.sampling[r].temperature;
  if (t <= 0) {
    for (int64_t i = threadIdx.x; i < p.vocab; i += blockDim.x) er[i] = 0.0f, idr[i] = int32_t(i);
    const int32_t best = block_argmax(logits, p.vocab);
    if (threadIdx.x == 0) p.out[r] = best;
    return;
  }
  float mx = -INFINITY;
  for (int64_t i = threadIdx.x; i < p.vocab; i += blockDim.x) {
    const float z = __fdiv_rn(logits[i], t);
    if (z > mx) mx = z;  // NaN never wins, as on the host
  }
  mx = block_max(mx, partial);
  for (int64_t i = threadIdx.x; i < p.vocab; i += blockDim.x) {
    const float d = __fsub_rn(__fdiv_rn(logits[i], t), mx);
    const float w = static_cast<float>(exp(static_cast<double>(d)));
    er[i] = isnan(w) ? 0.0f : w;
    idr[i] = static_cast<int32_t>(i);
  }
}

__global__ void sample_draw(SampleParams p, const float* e, const int32_t* order) {
  const int64_t r = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (r >= p.m) return;
  const SamplingParams sp = p.sampling[r];
  if (sp.temperature <= 0) return;
  const float u = philox_detail::uniform(sp.seed, p.streams[r], p.counters[r]);
  const int32_t* o = order + r * p.vocab;
  p.out[r] = sampling_detail::draw(e + r * p.vocab, p.vocab, sp, u,
                                   [o](int64_t j) { return o[j]; });
}

}  // namespace

void sample(const SampleParams& p) {
  if (p.m == 0) return;
  const Launch l = launch_on_current("cuda::sample");
  TROUPE_CHECK(p.m * p.vocab <= INT32_MAX, "cuda::sample: m * vocab (", p.m * p.vocab,
               ") must fit in int32 for the segmented sort");
  const size_t total = static_cast<size_t>(p.m * p.vocab);
  DeviceBuffer<float> e(l.dev, total), e_sorted(l.dev, total);
  DeviceBuffer<int32_t> ids(l.dev, total), order(l.dev, total), offsets(l.dev, p.m + 1);
  sample_prepare<<<static_cast<unsigned>(p.m), kThreads, 0, l.stream>>>(p, e.get(), ids.get(),
                                                                         offsets.get());
  TROUPE_CUDA_LAUNCHED(sample_prepare);
  size_t temp_bytes = 0;
  const int items = static_cast<int>(total), segments = static_cast<int>(p.m);
  TROUPE_CUDA_CHECK(cub::DeviceSegmentedRadixSort::SortPairsDescending(
      nullptr, temp_bytes, e.get(), e_sorted.get(), ids.get(), order.get(), items, segments,
      offsets.get(), offsets.get() + 1, 0, 32, l.stream));
  DeviceBuffer<uint8_t> temp(l.dev, temp_bytes);
  TROUPE_CUDA_CHECK(cub::DeviceSegmentedRadixSort::SortPairsDescending(
      temp.get(), temp_bytes, e.get(), e_sorted.get(), ids.get(), order.get(), items, segments,
      offsets.get(), offsets.get() + 1, 0, 32, l.stream));
  sample_draw<<<blocks_for(p.m, 64), 64, 0, l.stream>>>(p, e.get(), order.get());
  TROUPE_CUDA_LAUNCHED(sample_draw);
}

}  // namespace troupe::kernels::cuda

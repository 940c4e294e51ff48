// cuda::indexer_score and cuda::topk (kernels/indexer.h).
//   score  fill the row with -inf, then one warp per scored (query, row j): Σ_h
//          relu(q_h · K_j) · w_h, each head's dot and term in f32 (ref: f64 dots), so
//          scores match ref within tolerance; exact zeros (all-relu-zero rows) stay
//          exact, which is what the tie rule cares about
//   topk   rank() exactly: scores -> the CPU's order-preserving u32 key (-0 folded onto
//          +0, -inf/NaN -> 0), a stable descending radix sort of (key, index) gives value
//          descending with ties by ascending index; the first min(k, #key > 0) indices
//          are the answer. Only the count comes back to the host (a wait on the stream).
#include <cub/device/device_radix_sort.cuh>

#include <algorithm>

#include "kernels/cuda/common.cuh"
#include "kernels/indexer.h"

namespace troupe::kernels::cuda {
namespace {

__global__ void fill_rows(float* score, int64_t n, float v) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) score[i] = v;
}

// Warp w of the grid scores item w: (query m, slot c) over [M, slots), where a slot is
// a candidate (or row j itself when candidates is null).
__global__ void score_items(IndexerScoreParams p, int64_t slots) {
  const int lane = threadIdx.x & 31;
  const int64_t item = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  if (item >= p.m * slots) return;
  const int64_t m = item / slots, c = item % slots;
  const int64_t j = p.candidates ? p.candidates[m * p.max_candidates + c] : c;
  if (j < 0 || j >= p.visible[m]) return;
  const float* key = p.keys + j * p.dim;
  float total = 0;
  for (int64_t h = 0; h < p.heads; ++h) {
    const float* q = p.q + (m * p.heads + h) * p.dim;
    float dot = 0;
    for (int64_t d = lane; d < p.dim; d += 32) dot = fmaf(q[d], key[d], dot);
    dot = warp_sum(dot);
    total += __fmul_rn(fmaxf(dot, 0.0f), p.w[m * p.heads + h]);
  }
  if (lane == 0) p.score[m * p.rows + j] = total;
}

// kernels/cpu/topk.cpp's order_key: larger float -> larger key, excluded -> 0.
__device__ inline uint32_t order_key(float v) {
  uint32_t bits = __float_as_uint(v);
  if (bits == 0x80000000u) bits = 0;  // -0 -> +0
  const uint32_t key = bits ^ ((bits >> 31) ? 0xFFFFFFFFu : 0x80000000u);
  const bool included = key - 0x00800000u <= 0xFF800000u - 0x00800000u;
  return included ? key : 0u;
}

__global__ void make_keys(const float* score, int64_t n, uint32_t* keys, int32_t* index,
                          unsigned long long* included) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  keys[i] = order_key(score[i]);
  index[i] = static_cast<int32_t>(i);
  const unsigned active = __activemask();  // the lanes still here after the bound check
  const unsigned ballot = __ballot_sync(active, keys[i] != 0);
  if ((threadIdx.x & 31) == __ffs(active) - 1 && ballot)
    atomicAdd(included, static_cast<unsigned long long>(__popc(ballot)));
}

}  // namespace

void indexer_score(const IndexerScoreParams& p) {
  const Launch l = launch_on_current("cuda::indexer_score");
  const int64_t cells = p.m * p.rows;
  fill_rows<<<blocks_for(cells, 256), 256, 0, l.stream>>>(p.score, cells, -INFINITY);
  TROUPE_CUDA_LAUNCHED(fill_rows);
  const int64_t slots = p.candidates ? p.max_candidates : p.rows;
  if (p.m * slots == 0) return;
  score_items<<<blocks_for(p.m * slots * 32, 256), 256, 0, l.stream>>>(p, slots);
  TROUPE_CUDA_LAUNCHED(score_items);
}

int64_t topk(const float* score, int64_t n, int64_t k, int32_t* out) {
  const Launch l = launch_on_current("cuda::topk");
  DeviceBuffer<uint32_t> keys(l.dev, n), keys_sorted(l.dev, n);
  DeviceBuffer<int32_t> index(l.dev, n), index_sorted(l.dev, n);
  DeviceBuffer<unsigned long long> included(l.dev, 1);
  l.dev.fill_zero(included.get(), sizeof(unsigned long long));
  make_keys<<<blocks_for(n, 256), 256, 0, l.stream>>>(score, n, keys.get(), index.get(),
                                                      included.get());
  TROUPE_CUDA_LAUNCHED(make_keys);
  size_t temp_bytes = 0;
  const int items = static_cast<int>(n);
  TROUPE_CUDA_CHECK(cub::DeviceRadixSort::SortPairsDescending(
      nullptr, temp_bytes, keys.get(), keys_sorted.get(), index.get(), index_sorted.get(), items,
      0, 32, l.stream));
  DeviceBuffer<uint8_t> temp(l.dev, temp_bytes);
  TROUPE_CUDA_CHECK(cub::DeviceRadixSort::SortPairsDescending(
      temp.get(), temp_bytes, keys.get(), keys_sorted.get(), index.get(), index_sorted.get(),
      items, 0, 32, l.stream));
  unsigned long long count = 0;
  l.dev.download(&count, included.get(), sizeof count);
  l.dev.synchronize();
  const int64_t take = std::min<int64_t>(k, static_cast<int64_t>(count));
  if (take > 0)
    TROUPE_CUDA_CHECK(cudaMemcpyAsync(out, index_sorted.get(), take * sizeof(int32_t),
                                      cudaMemcpyDeviceToDevice, l.stream));
  return take;
}

}  // namespace troupe::kernels::cuda

// cuda::moe_* (kernels/moe.h) with the grouping on the device, so a step needs no
// host round trip:
//
//   entries i = t·top_k + k with pick[i] = e >= 0
//   count    counts[e] = #entries of e                          (atomics)
//   plan     offset[e] = Σ_{e'<e} counts, tile_start[e] = Σ_{e'<e} ceil(counts/64)
//   scatter  rows[offset[e] ..) = e's entries (any order: a row's result does not
//            depend on its neighbours)
//   GEMMs    grouped tiles (kernels/cuda/gemm_tile.cuh): tile t belongs to the expert e
//            with tile_start[e] <= t < tile_start[e+1]; x rows gathered by entry / x_div,
//            results stored by entry:  A = w1·x, B = w3·x  [entries, I];  A = swiglu(A, B);
//            Y = w2·A  [entries, H]
//   combine  out[t] += weight[t, k] · Y[t·top_k + k], k ascending, unfused multiply-add:
//            the CPU's combine_row bit for bit given the same Y
//
// The gate runs one thread per token with the CPU's insertion top-k and scalar rules
// (moe_scalar.h, TROUPE_HD; CUDA's expf/log1pf differ from the host's in the last ulp,
// so weights match within tolerance, picks exactly unless scores tie to an ulp).
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/gemm_tile.cuh"
#include "kernels/cuda/moe_plan.h"
#include "kernels/moe.h"
#include "kernels/moe_scalar.h"

namespace troupe::kernels::cuda {
namespace {

constexpr int kMaxTopK = 32;

__global__ void gate_rows(MoeGateParams p) {
  const int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t >= p.m) return;
  const float* logits = p.logits + t * p.experts;
  int32_t* pick = p.pick + t * p.top_k;
  float best_score[kMaxTopK], best_s[kMaxTopK];
  int64_t filled = 0;
  for (int64_t e = 0; e < p.experts; ++e) {
    const float s = moe_detail::sqrt_softplus(logits[e]);
    const float score = p.bias ? s + p.bias[e] : s;
    if (filled == p.top_k &&
        !moe_detail::ranks_before(score, e, best_score[filled - 1], pick[filled - 1]))
      continue;
    int64_t i = filled < p.top_k ? filled++ : filled - 1;
    for (; i > 0 && moe_detail::ranks_before(score, e, best_score[i - 1], pick[i - 1]); --i) {
      best_score[i] = best_score[i - 1];
      best_s[i] = best_s[i - 1];
      pick[i] = pick[i - 1];
    }
    best_score[i] = score;
    best_s[i] = s;
    pick[i] = static_cast<int32_t>(e);
  }
  float sum = 0;
  for (int64_t k = 0; k < p.top_k; ++k) sum += best_s[k];
  for (int64_t k = 0; k < p.top_k; ++k)
    p.weight[t * p.top_k + k] =
        moe_detail::routing_weight(best_s[k], sum, p.norm_topk_prob, p.routed_scaling_factor);
}

struct Groups {
  int32_t* counts;      // [experts]
  int32_t* offset;      // [experts + 1]
  int32_t* tile_start;  // [experts + 1]
  int32_t* cursor;      // [experts]
  int32_t* rows;        // [entries]
};

__global__ void count_entries(const int32_t* pick, int64_t entries, int32_t* counts) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < entries && pick[i] >= 0) atomicAdd(&counts[pick[i]], 1);
}

// One thread: experts is at most a few hundred.
__global__ void plan_groups(Groups g, int64_t experts) {
  plan_expert_tiles(g.counts, experts, kTile, g.offset, g.tile_start);
  for (int64_t e = 0; e < experts; ++e) g.cursor[e] = g.offset[e];
}

__global__ void scatter_entries(const int32_t* pick, int64_t entries, Groups g) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < entries && pick[i] >= 0) g.rows[atomicAdd(&g.cursor[pick[i]], 1)] = static_cast<int32_t>(i);
}

struct GroupedGemm {
  const float* x;
  int64_t ldx;
  int32_t x_div;
  const ExpertWeights* experts;
  int64_t experts_count;
  int which;  // 0: w1, 1: w3, 2: w2
  float* y;   // [entries, ldy], by entry
  int64_t ldy;
  bool bf16;
};

__global__ void __launch_bounds__(256) grouped_gemm(GroupedGemm a, Groups g) {
  const int32_t t = static_cast<int32_t>(blockIdx.y);
  if (t >= g.tile_start[a.experts_count]) return;
  const int64_t e = expert_of_tile(g.tile_start, a.experts_count, t);
  const ExpertWeights& ex = a.experts[e];
  const WeightView& w = a.which == 0 ? ex.w1 : a.which == 1 ? ex.w3 : ex.w2;
  if (int64_t(blockIdx.x) * kTile >= w.rows) return;
  TileRows tr;
  tr.rows = g.rows;
  tr.row0 = g.offset[e] + int64_t(t - g.tile_start[e]) * kTile;
  tr.count = g.offset[e + 1];
  tr.x_div = a.x_div;
  gemm_tile(a.x, a.ldx, w, a.y, a.ldy, tr, int64_t(blockIdx.x) * kTile, false, a.bf16);
}

__global__ void swiglu_rows(float* a, const float* b, const int32_t* pick, int64_t entries,
                            int64_t inter, float limit) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= entries * inter || pick[i / inter] < 0) return;
  a[i] = moe_detail::swiglu(a[i], b[i], limit);
}

// out[t] += weight[t, k] · y[row(t, k)], k ascending; row from row_of, or t·top_k + k
// for a picked slot when row_of is null.
__global__ void combine_rows(float* out, const float* y, const int64_t* row_of,
                             const int32_t* pick, const float* weight, int64_t m, int64_t top_k,
                             int64_t hidden) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= m * hidden) return;
  const int64_t t = i / hidden, j = i % hidden;
  float acc = out[i];
  for (int64_t k = 0; k < top_k; ++k) {
    const int64_t slot = t * top_k + k;
    const int64_t row = row_of ? row_of[slot] : (pick[slot] >= 0 ? slot : -1);
    if (row >= 0) acc = __fadd_rn(acc, __fmul_rn(weight[slot], y[row * hidden + j]));
  }
  out[i] = acc;
}

struct ExpertRun {
  const float* x;
  const int32_t* pick;  // [entries]
  int64_t entries, top_k, hidden, inter, experts_count;
  const ExpertWeights* experts;
  float limit;
  bool bf16;
};

// Y[entry] = Expert_pick(x[entry / top_k]) for every picked entry (other rows untouched).
void run_experts(const Launch& l, const ExpertRun& r, float* y) {
  DeviceBuffer<int32_t> counts(l.dev, r.experts_count), offset(l.dev, r.experts_count + 1),
      tile_start(l.dev, r.experts_count + 1), cursor(l.dev, r.experts_count),
      rows(l.dev, r.entries);
  DeviceBuffer<float> a(l.dev, r.entries * r.inter), b(l.dev, r.entries * r.inter);
  const Groups g{counts.get(), offset.get(), tile_start.get(), cursor.get(), rows.get()};
  l.dev.fill_zero(g.counts, r.experts_count * sizeof(int32_t));
  count_entries<<<blocks_for(r.entries, 256), 256, 0, l.stream>>>(r.pick, r.entries, g.counts);
  plan_groups<<<1, 1, 0, l.stream>>>(g, r.experts_count);
  scatter_entries<<<blocks_for(r.entries, 256), 256, 0, l.stream>>>(r.pick, r.entries, g);
  TROUPE_CUDA_LAUNCHED(scatter_entries);
  // Tiles needed: at most ceil(entries/64) + one partial tile per expert.
  const unsigned max_tiles = blocks_for(r.entries, kTile) + static_cast<unsigned>(r.experts_count);
  GroupedGemm up{r.x, r.hidden, static_cast<int32_t>(r.top_k), r.experts, r.experts_count,
                 0, a.get(), r.inter, r.bf16};
  const dim3 grid_up(blocks_for(r.inter, kTile), max_tiles);
  grouped_gemm<<<grid_up, 256, 0, l.stream>>>(up, g);
  up.which = 1;
  up.y = b.get();
  grouped_gemm<<<grid_up, 256, 0, l.stream>>>(up, g);
  swiglu_rows<<<blocks_for(r.entries * r.inter, 256), 256, 0, l.stream>>>(
      a.get(), b.get(), r.pick, r.entries, r.inter, r.limit);
  const GroupedGemm down{a.get(), r.inter, 1, r.experts, r.experts_count, 2, y, r.hidden, r.bf16};
  grouped_gemm<<<dim3(blocks_for(r.hidden, kTile), max_tiles), 256, 0, l.stream>>>(down, g);
  TROUPE_CUDA_LAUNCHED(grouped_gemm);
}

}  // namespace

void moe_gate(const MoeGateParams& p) {
  TROUPE_CHECK(p.top_k <= kMaxTopK, "cuda::moe_gate: top_k (", p.top_k, ") must be <= ", kMaxTopK);
  const Launch l = launch_on_current("cuda::moe_gate");
  gate_rows<<<blocks_for(p.m, 128), 128, 0, l.stream>>>(p);
  TROUPE_CUDA_LAUNCHED(gate_rows);
}

void moe_experts(const MoeExpertsParams& p) {
  const Launch l = launch_on_current("cuda::moe_experts");
  const int64_t entries = p.m * p.top_k;
  DeviceBuffer<float> y(l.dev, entries * p.hidden);
  run_experts(l, {p.x, p.pick, entries, p.top_k, p.hidden, p.inter, p.experts_count, p.experts,
                  p.swiglu_limit, p.precision == GemmPrecision::Bf16},
              y.get());
  combine_rows<<<blocks_for(p.m * p.hidden, 256), 256, 0, l.stream>>>(
      p.out, y.get(), nullptr, p.pick, p.weight, p.m, p.top_k, p.hidden);
  TROUPE_CUDA_LAUNCHED(combine_rows);
}

void moe_expert_rows(const MoeExpertRowsParams& p) {
  const Launch l = launch_on_current("cuda::moe_expert_rows");
  l.dev.fill_zero(p.y, p.n * p.hidden * sizeof(float));  // rows with pick -1 stay 0
  run_experts(l, {p.x, p.pick, p.n, 1, p.hidden, p.inter, p.experts_count, p.experts,
                  p.swiglu_limit, p.precision == GemmPrecision::Bf16},
              p.y);
}

void moe_combine(const MoeCombineParams& p) {
  const Launch l = launch_on_current("cuda::moe_combine");
  combine_rows<<<blocks_for(p.m * p.hidden, 256), 256, 0, l.stream>>>(
      p.out, p.y, p.row_of, nullptr, p.weight, p.m, p.top_k, p.hidden);
  TROUPE_CUDA_LAUNCHED(combine_rows);
}

}  // namespace troupe::kernels::cuda

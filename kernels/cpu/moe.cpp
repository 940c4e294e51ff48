// Fast CPU MoE. The gate is cheap next to the experts (nE·(exp, log1p, sqrt) per
// token), so it is threaded over tokens in portable C++; the expert FFN time is in the
// GEMMs (kernels::cpu::gemm's paths) and the SwiGLU (kernels/cpu/swiglu.h: vector e^x
// in double, rounded once: nearly always the reference's std::exp bits, else one ulp).
//
// Expert FFN data flow (R = number of non-skipped (token, slot) entries; a decode step's
// experts run each stage for all of them at once, run_experts_grouped):
//
//   pick [M, top_k] --group_by_expert--> expert e owns grouped rows [offset[e], offset[e+1])
//   x rows of those tokens --gather--> xg [c, H] --w1, w3--> a, b [c, I] --swiglu--> h [c, I]
//   h --w2--> ys[offset[e] .. offset[e+1]) of ys [R, H]
//   out[t] += Σ_k weight[t, k] · ys[row_of[t, k]]       (k ascending, as in ref: moe_combine)
//
// Every ys row is produced by one GEMM call and the reduction order is fixed, so the
// result does not depend on the thread count or on how experts are spread over threads.
#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/cpu/moe_combine_rows.h"
#include "kernels/cpu/swiglu.h"
#include "kernels/dispatch.h"
#include "kernels/moe.h"
#include "kernels/moe_scalar.h"
#include "kernels/parallel.h"
#include "kernels/scratch.h"

namespace troupe::kernels::cpu {
namespace {

using moe_detail::ranks_before;

// Keeps the top_k best (score, id) seen so far in rank order: insertion into a short
// sorted list, O(experts · top_k) worst case with top_k <= 16 or so in practice.
// s [experts] and best_score [top_k] are scratch.
void gate_row(const MoeGateParams& p, const float* logits, float* s, float* best_score,
              int32_t* pick, float* weight) {
  int64_t filled = 0;
  for (int64_t e = 0; e < p.experts; ++e) {
    s[e] = moe_detail::sqrt_softplus(logits[e]);
    const float score = p.bias ? s[e] + p.bias[e] : s[e];
    if (filled == p.top_k && !ranks_before(score, e, best_score[filled - 1], pick[filled - 1])) {
      continue;
    }
    int64_t i = filled < p.top_k ? filled++ : filled - 1;
    for (; i > 0 && ranks_before(score, e, best_score[i - 1], pick[i - 1]); --i) {
      best_score[i] = best_score[i - 1];
      pick[i] = pick[i - 1];
    }
    best_score[i] = score;
    pick[i] = static_cast<int32_t>(e);
  }
  float sum = 0;
  for (int64_t k = 0; k < p.top_k; ++k) sum += s[pick[k]];
  for (int64_t k = 0; k < p.top_k; ++k) {
    weight[k] = moe_detail::routing_weight(s[pick[k]], sum, p.norm_topk_prob,
                                           p.routed_scaling_factor);
  }
}

struct Routing {
  scratch_vector<int64_t> offset;  // [experts + 1] grouped rows of expert e: [offset[e], offset[e+1])
  scratch_vector<int64_t> entry;   // [R] entry t·top_k + k of each grouped row, ascending per expert
  scratch_vector<int64_t> row_of;  // [M·top_k] grouped row of each entry; -1 = skipped slot
};

// Counting sort of the entries by expert; stable, so each expert sees its tokens in order.
Routing group_by_expert(const MoeExpertsParams& p) {
  const int64_t entries = p.m * p.top_k;
  Routing r;
  r.offset.assign(p.experts_count + 1, 0);
  for (int64_t i = 0; i < entries; ++i) {
    if (p.pick[i] >= 0) r.offset[p.pick[i] + 1]++;
  }
  for (int64_t e = 0; e < p.experts_count; ++e) r.offset[e + 1] += r.offset[e];
  scratch_vector<int64_t> next(r.offset.begin(), r.offset.end() - 1);
  r.entry.resize(r.offset.back());
  r.row_of.assign(entries, -1);
  for (int64_t i = 0; i < entries; ++i) {
    if (p.pick[i] < 0) continue;
    const int64_t row = next[p.pick[i]]++;
    r.entry[row] = i;
    r.row_of[i] = row;
  }
  return r;
}

// Whether an expert of c grouped rows reads them from x in place: with one pick per
// token, an expert every token picked (all_tokens: a dense MLP, a shared expert) has the
// tokens in order (the grouping is stable); an expert of one row has its token's row.
bool all_tokens(const MoeExpertsParams& p, int64_t c) { return c == p.m && p.top_k == 1; }
bool rows_in_place(const MoeExpertsParams& p, int64_t c) { return all_tokens(p, c) || c == 1; }

// The x rows of expert e's grouped rows: in place (rows_in_place), else gathered into
// xg [c, H].
const float* expert_x(const MoeExpertsParams& p, const Routing& r, int64_t e, float* xg) {
  const int64_t row0 = r.offset[e];
  const int64_t c = r.offset[e + 1] - row0;
  if (all_tokens(p, c)) return p.x;
  if (c == 1) return p.x + r.entry[row0] / p.top_k * p.hidden;
  for (int64_t i = 0; i < c; ++i) {
    const int64_t token = r.entry[row0 + i] / p.top_k;
    std::memcpy(xg + i * p.hidden, p.x + token * p.hidden, p.hidden * sizeof(float));
  }
  return xg;
}

// Expert e's three GEMMs: a = w1·x, b = w3·x (x: its rows, xs), y = w2·h with h in a.
struct ExpertGemms {
  GemmParams w1, w3, w2;
};
ExpertGemms expert_gemms(const MoeExpertsParams& p, const Routing& r, int64_t e, const float* xs,
                         float* a, float* b, float* ys) {
  const ExpertWeights& w = p.experts[e];
  GemmParams g;
  g.m = r.offset[e + 1] - r.offset[e];
  g.precision = p.precision;
  g.x = xs;
  ExpertGemms out{g, g, g};
  out.w1.w = w.w1;
  out.w1.y = a;
  out.w3.w = w.w3;
  out.w3.y = b;
  out.w2.x = a;
  out.w2.w = w.w2;
  out.w2.y = ys + r.offset[e] * p.hidden;
  return out;
}

// h = swiglu(a, b) over n values, threaded. Each value on its own: the threads' split
// (none inside an expert-range worker) changes nothing.
void swiglu_threaded(const MoeExpertsParams& p, float* a, const float* b, int64_t n) {
  parallel_for(n, 4096, [&](int64_t i0, int64_t i1) {
    swiglu(a + i0, b + i0, i1 - i0, p.swiglu_limit);
  });
}

// The step's largest expert: its rows, and those of the largest whose rows are gathered.
struct MostRows {
  int64_t any = 0, gathered = 0;
  MostRows(const MoeExpertsParams& p, const Routing& r) {
    for (int64_t e = 0; e < p.experts_count; ++e) {
      const int64_t c = r.offset[e + 1] - r.offset[e];
      any = std::max(any, c);
      if (!rows_in_place(p, c)) gathered = std::max(gathered, c);
    }
  }
};

struct Scratch {  // written in full by the gather and the GEMMs: not zeroed
  scratch_buffer<float> xg, a, b;  // [c, H], [c, I], [c, I] for the expert being run

  // Room for the step's largest expert up front: one block each, not a block per size
  // the experts grow through (each a fresh size class for this thread's pool).
  Scratch(const MoeExpertsParams& p, const MostRows& most) {
    xg.reserve(most.gathered * p.hidden);
    a.reserve(most.any * p.inter);
    b.reserve(most.any * p.inter);
  }
};

// Runs expert e on its grouped rows; writes ys rows [offset[e], offset[e+1]).
void run_expert(const MoeExpertsParams& p, const Routing& r, int64_t e, Scratch& s, float* ys) {
  const int64_t c = r.offset[e + 1] - r.offset[e];
  if (c == 0) return;
  s.a.resize(c * p.inter);
  s.b.resize(c * p.inter);
  if (!rows_in_place(p, c)) s.xg.resize(c * p.hidden);
  const float* xs = expert_x(p, r, e, s.xg.data());
  const ExpertGemms g = expert_gemms(p, r, e, xs, s.a.data(), s.b.data(), ys);
  const GemmParams gate_up[2] = {g.w1, g.w3};  // one call: x quantized once where the GEMM does
  cpu::gemm_shared_x(gate_up);
  swiglu_threaded(p, s.a.data(), s.b.data(), c * p.inter);
  cpu::gemm(g.w2);
}

// Every active expert at once, all in grouped-row order: w1 / w3 of all of them in one
// cpu::gemm_grouped call (one fork-join: each thread streams a share of every expert's
// rows, so both stay busy to the end whatever the experts' sizes), the SwiGLU of all
// rows, then every w2 in one more call. Each GEMM is the one run_expert makes (the same
// x rows, m and weight), so every ys row has the same bits.
void run_experts_grouped(const MoeExpertsParams& p, const Routing& r, float* ys) {
  const int64_t rows = static_cast<int64_t>(r.entry.size());
  scratch_buffer<float> xg(rows * p.hidden), a(rows * p.inter), b(rows * p.inter);
  scratch_vector<GemmParams> gate_up, down;
  for (int64_t e = 0; e < p.experts_count; ++e) {
    const int64_t row0 = r.offset[e];
    if (r.offset[e + 1] == row0) continue;
    const float* xs = expert_x(p, r, e, &xg[row0 * p.hidden]);
    const ExpertGemms g = expert_gemms(p, r, e, xs, &a[row0 * p.inter], &b[row0 * p.inter], ys);
    gate_up.push_back(g.w1);
    gate_up.push_back(g.w3);
    down.push_back(g.w2);
  }
  cpu::gemm_grouped(gate_up);
  swiglu_threaded(p, a.data(), b.data(), rows * p.inter);
  cpu::gemm_grouped(down);
}

// Heuristic (kept apart from the kernel): cost of an active expert ~ its rows plus a
// fixed part for streaming its weights, worth about kFixedRows rows of arithmetic.
// Returns part boundaries [parts + 1] over expert ids with roughly equal cost.
scratch_vector<int64_t> split_experts(const Routing& r, int64_t parts) {
  constexpr int64_t kFixedRows = 8;
  const int64_t experts = static_cast<int64_t>(r.offset.size()) - 1;
  scratch_vector<int64_t> cost_before(experts + 1, 0);
  for (int64_t e = 0; e < experts; ++e) {
    const int64_t c = r.offset[e + 1] - r.offset[e];
    cost_before[e + 1] = cost_before[e] + (c > 0 ? c + kFixedRows : 0);
  }
  scratch_vector<int64_t> bound(parts + 1, experts);
  bound[0] = 0;
  for (int64_t j = 1; j < parts; ++j) {
    const int64_t target = cost_before.back() * j / parts;
    bound[j] = std::lower_bound(cost_before.begin(), cost_before.end(), target) - cost_before.begin();
  }
  return bound;
}

// Heuristic (kept apart from the kernel): a decode step's experts (at most
// kGroupedMaxRows rows each) go through run_experts_grouped where this CPU path groups
// their weights' GEMMs at decode rows (gemm_grouped runs an expert whose GEMMs it does
// not take, e.g. Bf16 precision past the AVX-512 direct tiles' 4 rows, one GEMM at a time
// over the threads); else experts run whole, as run_all_experts spreads them.
bool group_the_experts(const MoeExpertsParams& p, const Routing& r) {
  constexpr int64_t kGroupedMaxRows = 16;
  int64_t active = -1;
  for (int64_t e = 0; e < p.experts_count; ++e) {
    const int64_t c = r.offset[e + 1] - r.offset[e];
    if (c > kGroupedMaxRows) return false;
    if (c > 0 && active < 0) active = e;
  }
  if (active < 0) return false;
  GemmParams g;
  g.m = 1;
  g.precision = p.precision;
  g.w = p.experts[active].w1;
  return cpu::gemm_joins_group(g);
}

void run_all_experts(const MoeExpertsParams& p, const Routing& r, float* ys) {
  if (num_threads() > 1 && group_the_experts(p, r)) return run_experts_grouped(p, r, ys);
  int64_t active = 0;
  for (int64_t e = 0; e < p.experts_count; ++e) active += r.offset[e + 1] > r.offset[e];
  const int64_t parts = num_threads();
  if (active < 2 * parts) {
    // Few experts: one at a time, each GEMM spreads over the threads.
    Scratch s(p, MostRows(p, r));
    for (int64_t e = 0; e < p.experts_count; ++e) run_expert(p, r, e, s, ys);
    return;
  }
  // Many experts: threads take disjoint expert ranges; their GEMMs run inline.
  const scratch_vector<int64_t> bound = split_experts(r, parts);
  const MostRows most(p, r);  // once, for every part's scratch
  parallel_for(parts, 1, [&](int64_t part0, int64_t part1) {
    Scratch s(p, most);
    for (int64_t e = bound[part0]; e < bound[part1]; ++e) run_expert(p, r, e, s, ys);
  });
}

}  // namespace

void swiglu(float* a, const float* b, int64_t n, float limit) {
  switch (active_cpu_path()) {
    case CpuPath::Avx512: return swiglu_avx512(a, b, n, limit);
    case CpuPath::Avx2: return swiglu_avx2(a, b, n, limit);
    case CpuPath::Portable: break;
  }
  for (int64_t i = 0; i < n; ++i) a[i] = moe_detail::swiglu(a[i], b[i], limit);
}

void moe_gate(const MoeGateParams& p) {
  parallel_for(p.m, 16, [&](int64_t t0, int64_t t1) {
    scratch_vector<float> s(p.experts), best_score(p.top_k);
    for (int64_t t = t0; t < t1; ++t) {
      gate_row(p, p.logits + t * p.experts, s.data(), best_score.data(), p.pick + t * p.top_k,
               p.weight + t * p.top_k);
    }
  });
}

void moe_combine(const MoeCombineParams& p) {
  using CombineToken = void (*)(float*, const float* const*, const float*, int64_t, int64_t);
  const CpuPath path = active_cpu_path();
  const CombineToken vector_form = path == CpuPath::Avx512 ? combine_token_avx512
                                   : path == CpuPath::Avx2 ? combine_token_avx2
                                                           : nullptr;
  parallel_for(p.m, 4, [&](int64_t t0, int64_t t1) {
    scratch_vector<const float*> y(p.top_k);
    scratch_vector<float> w(p.top_k);
    for (int64_t t = t0; t < t1; ++t) {
      int64_t count = 0;  // the token's picked rows, k ascending
      for (int64_t k = 0; k < p.top_k; ++k) {
        const int64_t row = p.row_of[t * p.top_k + k];
        if (row < 0) continue;
        y[count] = p.y + row * p.hidden;
        w[count++] = p.weight[t * p.top_k + k];
      }
      float* out = p.out + t * p.hidden;
      if (vector_form) {
        vector_form(out, y.data(), w.data(), count, p.hidden);
      } else {
        for (int64_t c = 0; c < count; ++c) moe_detail::combine_row(out, w[c], y[c], p.hidden);
      }
    }
  });
}

void moe_experts(const MoeExpertsParams& p) {
  const Routing r = group_by_expert(p);
  scratch_buffer<float> ys(r.entry.size() * p.hidden);  // every row one GEMM's output
  run_all_experts(p, r, ys.data());
  MoeCombineParams c;
  c.out = p.out;
  c.y = ys.data();
  c.row_of = r.row_of.data();
  c.weight = p.weight;
  c.m = p.m;
  c.top_k = p.top_k;
  c.hidden = p.hidden;
  cpu::moe_combine(c);
}

// The rows as tokens with one pick each: grouped and run exactly as moe_experts would,
// then put back in row order.
void moe_expert_rows(const MoeExpertRowsParams& p) {
  MoeExpertsParams e;
  e.x = p.x;
  e.pick = p.pick;
  e.experts = p.experts;
  e.m = p.n;
  e.hidden = p.hidden;
  e.inter = p.inter;
  e.experts_count = p.experts_count;
  e.top_k = 1;
  e.swiglu_limit = p.swiglu_limit;
  e.precision = p.precision;
  const Routing r = group_by_expert(e);
  scratch_buffer<float> ys(r.entry.size() * p.hidden);
  run_all_experts(e, r, ys.data());
  for (int64_t i = 0; i < p.n; ++i) {
    float* y = p.y + i * p.hidden;
    if (r.row_of[i] < 0) std::fill(y, y + p.hidden, 0.0f);
    else std::memcpy(y, &ys[r.row_of[i] * p.hidden], p.hidden * sizeof(float));
  }
}

}  // namespace troupe::kernels::cpu

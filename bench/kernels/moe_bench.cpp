// MoE benchmarks: the gate at the full config (nE 384, top 6) and the grouped expert
// FFN with FP4 experts at the full shape (H 5120, I 2304) and /work/v41-small's (H 2048,
// I 1024, 64 experts: moe/experts/v41s/*). The full shape's decode reads 6 experts'
// weights per call (~106 MB, past the LLC; calls alternate between two expert sets);
// decode is judged against DRAM bandwidth, prefill against the fp32 peak.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "bench/kernels/bench.h"
#include "bench/kernels/huge_arena.h"
#include "kernels/moe.h"

namespace troupe::bench {
namespace {

using kernels::ExpertWeights;
using kernels::WeightFormat;
using kernels::WeightView;

constexpr int64_t kTopK = 6;

// An expert shape and the bank of experts its calls pick from (whose weights, fp4,
// outrun the 32 MiB L3 between two calls of a set).
struct MoeShape {
  const char* name;      // for the table
  int64_t hidden, inter;
  int64_t bank;          // experts in the bank
  int64_t sets;          // disjoint sets of bank / sets experts, alternated call by call
};
constexpr MoeShape kFlash{"H=5120 I=2304", 5120, 2304, 12, 2};  // full V4.1 experts
// /work/v41-small's experts (64 of [1024 x 2048]): a batch of 1 picks 6 (4 sets of 6
// rotate through 78 MiB), a batch of 8 or 16 ~30-51 of all 64 (209 MiB).
constexpr MoeShape kV41sOne{"v41s H=2048 I=1024", 2048, 1024, 24, 4};
constexpr MoeShape kV41sAll{"v41s H=2048 I=1024", 2048, 1024, 64, 1};

// Fast fill for hundreds of MB of weight bytes (values only need to be plausible).
void fill_bytes(std::span<uint8_t> v, uint64_t seed) {
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
  for (size_t i = 0; i < v.size(); i += 8) {
    s ^= s << 13, s ^= s >> 7, s ^= s << 17;
    std::memcpy(&v[i], &s, std::min<size_t>(8, v.size() - i));
  }
}

// An FP4 matrix's codes and scales (scales 2^-5: plausible values), from the bank's arena.
WeightView fp4_matrix(int64_t rows, int64_t cols, uint64_t seed, HugeArena& arena) {
  uint8_t* data = arena.take(rows * cols / 2);
  fill_bytes({data, static_cast<size_t>(rows * cols / 2)}, seed);
  uint8_t* scale = arena.take(rows * cols / 32);
  std::memset(scale, 122, rows * cols / 32);
  return {WeightFormat::FP4, rows, cols, data, scale};
}

// The bank's weights on 2 MiB pages (bench/kernels/huge_arena.h), as the loaders hold them.
struct ExpertBank {
  HugeArena arena;
  std::vector<ExpertWeights> experts;
  explicit ExpertBank(const MoeShape& sh) : arena(3 * sh.bank * (sh.inter * sh.hidden / 2 + sh.inter * sh.hidden / 32 + 128)) {
    for (int64_t e = 0; e < sh.bank; ++e)
      experts.push_back({fp4_matrix(sh.inter, sh.hidden, 3 * e, arena),
                         fp4_matrix(sh.inter, sh.hidden, 3 * e + 1, arena),
                         fp4_matrix(sh.hidden, sh.inter, 3 * e + 2, arena)});
  }
};

// Built once per shape, shared by its cases (not timed).
const ExpertBank& bank_of(const MoeShape& sh) {
  static ExpertBank* flash = nullptr;
  static ExpertBank* v41s = nullptr;
  ExpertBank*& b = sh.hidden == kFlash.hidden ? flash : v41s;
  if (!b) b = new ExpertBank(sh.hidden == kFlash.hidden ? kFlash : kV41sAll);
  return *b;
}

// M tokens, each picking 6 distinct experts of the call's set (seeded), sets alternated.
void bench_experts(State& s, int64_t m, const MoeShape& sh) {
  const ExpertBank& bank = bank_of(sh);
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> x(m * sh.hidden), out(m * sh.hidden, 0.0f), weight(m * kTopK, 0.2f);
  for (float& v : x) v = u(rng);
  const int64_t per_set = sh.bank / sh.sets;
  std::vector<std::vector<int32_t>> picks(sh.sets);
  std::vector<int32_t> ids(per_set);
  double distinct = 0;
  for (int64_t set = 0; set < sh.sets; ++set) {
    std::vector<bool> used(per_set, false);
    for (int64_t t = 0; t < m; ++t) {
      std::iota(ids.begin(), ids.end(), 0);
      std::shuffle(ids.begin(), ids.end(), rng);
      for (int64_t k = 0; k < kTopK; ++k) {
        picks[set].push_back(static_cast<int32_t>(set * per_set + ids[k]));
        used[ids[k]] = true;
      }
    }
    distinct += double(std::count(used.begin(), used.end(), true)) / double(sh.sets);
  }
  kernels::MoeExpertsParams p;
  p.x = x.data();
  p.weight = weight.data();
  p.experts = bank.experts.data();
  p.out = out.data();
  p.m = m;
  p.hidden = sh.hidden;
  p.inter = sh.inter;
  p.experts_count = sh.bank;
  p.top_k = kTopK;
  p.swiglu_limit = 10.0f;
  char text[96];
  std::snprintf(text, sizeof text, "M=%lld %s top6 FP4, %.1f experts/call", static_cast<long long>(m),
                sh.name, distinct);
  s.shape = text;
  s.flops = 2.0 * 3 * sh.hidden * sh.inter * m * kTopK;
  s.bytes = distinct * 3.0 * sh.inter * sh.hidden * (0.5 + 1.0 / 32);
  s.bound = m <= 4 || sh.hidden == kV41sOne.hidden ? Bound::Memory : Bound::Fp32;
  int64_t call = 0;
  s.run([&] {
    p.pick = picks[call++ % sh.sets].data();
    kernels::moe_experts(p);
  });
}

void bench_gate(State& s, int64_t m) {
  constexpr int64_t kExperts = 384;
  std::mt19937 rng(9);
  std::normal_distribution<float> nd(0.0f, 2.0f);
  std::vector<float> logits(m * kExperts), bias(kExperts);
  for (float& v : logits) v = nd(rng);
  for (float& v : bias) v = nd(rng) * 0.1f;
  std::vector<int32_t> pick(m * kTopK);
  std::vector<float> weight(m * kTopK);
  kernels::MoeGateParams p{logits.data(), bias.data(), pick.data(), weight.data(),
                           m, kExperts, kTopK, true, 1.5f};
  s.shape = "M=" + std::to_string(m) + " nE=384 top6";
  s.bytes = 4.0 * m * kExperts;
  s.run([&] { kernels::moe_gate(p); });
}

TROUPE_BENCH("moe/experts/decode/m1", [](State& s) { bench_experts(s, 1, kFlash); });
TROUPE_BENCH("moe/experts/decode/m2", [](State& s) { bench_experts(s, 2, kFlash); });
TROUPE_BENCH("moe/experts/prefill/m8", [](State& s) {
  if (s.quick()) return s.skip("slow; runs without --quick");
  bench_experts(s, 8, kFlash);
});
TROUPE_BENCH("moe/experts/prefill/m64", [](State& s) {
  if (!s.full()) return s.skip("needs --full");
  bench_experts(s, 64, kFlash);
});
// A decode step's routed experts of /work/v41-small, one layer, at batch 1, 8 and 16.
TROUPE_BENCH("moe/experts/v41s/m1", [](State& s) { bench_experts(s, 1, kV41sOne); });
TROUPE_BENCH("moe/experts/v41s/m8", [](State& s) { bench_experts(s, 8, kV41sAll); });
TROUPE_BENCH("moe/experts/v41s/m16", [](State& s) { bench_experts(s, 16, kV41sAll); });
TROUPE_BENCH("moe/gate/m1", [](State& s) { bench_gate(s, 1); });
TROUPE_BENCH("moe/gate/m512", [](State& s) { bench_gate(s, 512); });

}  // namespace
}  // namespace troupe::bench

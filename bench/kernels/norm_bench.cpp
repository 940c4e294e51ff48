// RMSNorm and softmax: one decode-sized row (cache-resident, as in the model) and
// a prefill-sized batch that streams from DRAM, for the fast path, its portable
// fallback and the reference in the same run.
#include <random>
#include <string>
#include <vector>

#include "bench/kernels/bench.h"
#include "kernels/cpu/norm_rows.h"
#include "kernels/dispatch.h"
#include "kernels/norm.h"

namespace troupe::bench {
namespace {

using kernels::Backend;

std::vector<float> normal(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

// variant: "cpu" (dispatched), "portable" (the fallback's row kernels), "ref".
template <class Params>
void run_variant(State& s, const std::string& variant, const Params& p,
                 void (*entry)(const Params&),
                 void (*with)(const Params&, const kernels::cpu::NormRowKernels&)) {
  if (variant == "portable") return s.run([&] { with(p, kernels::cpu::portable_norm_kernels()); });
  kernels::ScopedBackend b(variant == "ref" ? Backend::Ref : Backend::Cpu);
  s.run([&] { entry(p); });
}

void bench_rms(State& s, const std::string& variant, int64_t rows, int64_t n) {
  const auto x = normal(rows * n, 1), w = normal(n, 2);
  std::vector<float> out(rows * n);
  const kernels::RmsNormParams p{
      .x = x.data(), .weight = w.data(), .out = out.data(), .rows = rows, .n = n};
  s.shape = std::to_string(rows) + "x" + std::to_string(n);
  s.flops = 4.0 * rows * n;
  s.bytes = 8.0 * rows * n;
  run_variant(s, variant, p, kernels::rms_norm, kernels::cpu::rms_norm);
}

void bench_softmax(State& s, const std::string& variant, int64_t rows, int64_t n) {
  auto x = normal(rows * n, 3);
  const kernels::SoftmaxParams p{.x = x.data(), .rows = rows, .n = n};
  s.shape = std::to_string(rows) + "x" + std::to_string(n);
  s.flops = 4.0 * rows * n;  // max, exp (counted once), sum, scale
  s.bytes = 8.0 * rows * n;
  // In place: repeated calls see softmax outputs, which is still a valid input.
  run_variant(s, variant, p, kernels::softmax, kernels::cpu::softmax);
}

[[maybe_unused]] const int kRegistered = [] {
  const int64_t rms_shapes[][2] = {{1, 5120}, {4, 16384}, {4096, 5120}};
  const int64_t softmax_shapes[][2] = {{64, 4096}, {4096, 4096}};
  for (const char* v : {"cpu", "portable", "ref"}) {
    const std::string variant = v;
    for (const auto& sh : rms_shapes) {
      const int64_t rows = sh[0], n = sh[1];
      add("norm/rms/" + variant + "/" + std::to_string(rows) + "x" + std::to_string(n),
          [=](State& s) { bench_rms(s, variant, rows, n); });
    }
    for (const auto& sh : softmax_shapes) {
      const int64_t rows = sh[0], n = sh[1];
      add("norm/softmax/" + variant + "/" + std::to_string(rows) + "x" + std::to_string(n),
          [=](State& s) {
            if (variant == "ref" && rows > 64 && s.quick())
              return s.skip("slow; runs without --quick");
            bench_softmax(s, variant, rows, n);
          });
    }
  }
  return 0;
}();

}  // namespace
}  // namespace troupe::bench

// Sampling benchmarks at the full vocabulary (129280): greedy, plain temperature
// sampling and the usual filters, for the fast path and, as the in-run baseline, the
// reference (which sorts the whole vocabulary per row).
#include <random>
#include <string>
#include <vector>

#include "bench/kernels/bench.h"
#include "kernels/dispatch.h"
#include "kernels/sampling.h"

namespace troupe::bench {
namespace {

constexpr int64_t kVocab = 129280;

struct Variant {
  const char* name;
  kernels::SamplingParams sp;
};

const Variant kVariants[] = {
    {"greedy", {0.0f, 0, 1.0f, 0.0f, 1}},
    {"t1", {1.0f, 0, 1.0f, 0.0f, 1}},
    {"t1_topk50", {1.0f, 50, 1.0f, 0.0f, 1}},
    {"t0.7_topp0.9", {0.7f, 0, 0.9f, 0.0f, 1}},
    {"t1_topk50_topp0.9_minp0.05", {1.0f, 50, 0.9f, 0.05f, 1}},
};

void bench_sample(State& s, kernels::Backend backend, const Variant& v, int64_t m) {
  std::mt19937 rng(3);
  std::normal_distribution<float> nd(0.0f, 3.0f);
  std::vector<float> logits(m * kVocab);
  for (float& x : logits) x = nd(rng);
  std::vector<kernels::SamplingParams> params(m, v.sp);
  std::vector<uint64_t> streams(m), counters(m, 0);
  for (int64_t r = 0; r < m; ++r) streams[r] = r;
  std::vector<int32_t> out(m);
  kernels::SampleParams p{logits.data(), out.data(), m, kVocab, params.data(), streams.data(),
                          counters.data()};
  s.shape = "M=" + std::to_string(m) + " V=129280 " + v.name;
  s.bytes = 4.0 * m * kVocab;
  kernels::ScopedBackend sb(backend);
  s.run([&] {
    for (auto& c : counters) ++c;  // a new draw each call
    kernels::sample(p);
  });
}

[[maybe_unused]] const int kRegistered = [] {
  for (const Variant& v : kVariants) {
    for (int64_t m : {1, 16}) {
      const std::string suffix = std::string(v.name) + "/m" + std::to_string(m);
      add("sampling/cpu/" + suffix, [&v, m](State& s) { bench_sample(s, kernels::Backend::Cpu, v, m); });
      add("sampling/ref/" + suffix, [&v, m](State& s) {
        if (m > 1 && s.quick()) return s.skip("slow; runs without --quick");
        bench_sample(s, kernels::Backend::Ref, v, m);
      });
    }
  }
  return 0;
}();

}  // namespace
}  // namespace troupe::bench

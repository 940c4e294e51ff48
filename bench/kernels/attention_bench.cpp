// Attention at the full config: 64 heads x 512 dim, each query over 128 window
// rows + 512 selected compressed rows (640 key pointers into an 8 MiB pool),
// decode (1 query) and a prefill chunk (16 queries). Judged against the fp32 peak:
// per query, head and key one 512-long dot and one 512-long axpy.
#include <random>
#include <string>
#include <vector>

#include "bench/kernels/bench.h"
#include "kernels/attention.h"
#include "kernels/cpu/attention_rows.h"
#include "kernels/dispatch.h"

namespace troupe::bench {
namespace {

constexpr int64_t kHeads = 64, kDim = 512, kWindow = 128, kSelected = 512, kPool = 4096;

void bench_attention(State& s, const std::string& variant, int64_t m) {
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> pool(kPool * kDim), q(m * kHeads * kDim), sink(kHeads, 0.0f);
  for (float& x : pool) x = nd(rng);
  for (float& x : q) x = nd(rng);
  const int64_t max_keys = kWindow + kSelected;
  std::vector<const float*> keys(m * max_keys);
  for (auto& k : keys) k = pool.data() + (rng() % kPool) * kDim;
  std::vector<float> out(m * kHeads * kDim);
  const kernels::AttentionParams p{.q = q.data(),
                                   .keys = keys.data(),
                                   .sink = sink.data(),
                                   .out = out.data(),
                                   .m = m,
                                   .heads = kHeads,
                                   .dim = kDim,
                                   .max_keys = max_keys,
                                   .scale = 0.044194174f};
  s.shape = "M=" + std::to_string(m) + " 64x512, 128+512 keys";
  s.flops = 4.0 * m * kHeads * max_keys * kDim;
  s.bytes = 4.0 * m * max_keys * kDim;  // key rows, each read once per query at best
  s.bound = Bound::Fp32;
  if (variant == "portable")
    return s.run([&] { kernels::cpu::attention(p, kernels::cpu::portable_attention_kernels()); });
  kernels::ScopedBackend b(variant == "ref" ? kernels::Backend::Ref : kernels::Backend::Cpu);
  s.run([&] { kernels::attention(p); });
}

[[maybe_unused]] const int kRegistered = [] {
  for (const char* v : {"cpu", "portable", "ref"})
    for (int64_t m : {1, 16}) {
      const std::string variant = v;
      add("attention/" + variant + "/m" + std::to_string(m), [=](State& s) {
        if (variant == "ref" && m > 1 && s.quick()) return s.skip("slow; runs without --quick");
        bench_attention(s, variant, m);
      });
    }
  return 0;
}();

}  // namespace
}  // namespace troupe::bench

// Rope at the full config: queries [tokens, 64 heads, 512] with Dr = 64 (one
// position per 64 heads) for decode (1 token) and prefill (4096 tokens), and
// window/compressed KV rows [4096, 512] (one position each). Bytes are the rotated
// channels read and written; the f64 cos/sin per position are part of the time.
#include <random>
#include <string>
#include <vector>

#include "bench/kernels/bench.h"
#include "kernels/cpu/rope_rows.h"
#include "kernels/dispatch.h"
#include "kernels/rope.h"

namespace troupe::bench {
namespace {

void bench_rope(State& s, const std::string& variant, int64_t tokens, int64_t heads) {
  constexpr int64_t kDim = 512, kRopeDim = 64;
  std::vector<float> x(tokens * heads * kDim, 0.5f);
  std::vector<int64_t> pos(tokens);
  std::mt19937 rng(1);
  for (auto& q : pos) q = rng() % 1000000;
  const auto freqs =
      kernels::rope_frequencies(160000.0, kRopeDim, {.factor = 16, .original_max_position = 65536});
  const kernels::RopeParams p{.x = x.data(),
                              .count = tokens * heads,
                              .n = kDim,
                              .rope_dim = kRopeDim,
                              .positions = pos.data(),
                              .per_position = heads,
                              .freqs = freqs.data()};
  s.shape = "[" + std::to_string(tokens) + ", " + std::to_string(heads) + ", 512] Dr=64";
  s.flops = 3.0 * tokens * heads * kRopeDim;  // per pair: 4 mul + 2 add
  s.bytes = 8.0 * tokens * heads * kRopeDim;
  if (variant == "portable")
    return s.run([&] { kernels::cpu::rope(p, kernels::cpu::portable_rope_rotate()); });
  kernels::ScopedBackend b(variant == "ref" ? kernels::Backend::Ref : kernels::Backend::Cpu);
  s.run([&] { kernels::rope(p); });
}

[[maybe_unused]] const int kRegistered = [] {
  const int64_t shapes[][2] = {{1, 64}, {4096, 64}, {4096, 1}};
  for (const char* v : {"cpu", "portable", "ref"})
    for (const auto& sh : shapes) {
      const std::string variant = v;
      const int64_t tokens = sh[0], heads = sh[1];
      add("rope/" + variant + "/" + std::to_string(tokens) + "x" + std::to_string(heads) + "x512",
          [=](State& s) {
            if (variant == "ref" && tokens * heads > 4096 && s.quick())
              return s.skip("slow; runs without --quick");
            bench_rope(s, variant, tokens, heads);
          });
    }
  return 0;
}();

}  // namespace
}  // namespace troupe::bench

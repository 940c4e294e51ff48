// Indexer at the full config (32 heads x 128 dim) over 64K index-key rows (32 MiB,
// past the LLC) for decode (1 query) and a prefill chunk (16 queries); level-2
// scoring of 2048 candidate blocks of 8 rows among 128K rows; and top-k at the
// sizes the model asks for (K 512 over rows, Kb 2048 over blocks, up to 1M rows),
// including an all-tied (all-zero) input.
#include <random>
#include <string>
#include <vector>

#include "bench/kernels/bench.h"
#include "kernels/cpu/indexer_rows.h"
#include "kernels/dispatch.h"
#include "kernels/indexer.h"

namespace troupe::bench {
namespace {

constexpr int64_t kHeads = 32, kDim = 128;

std::vector<float> normal(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

void run_score(State& s, const std::string& variant, const kernels::IndexerScoreParams& p) {
  if (variant == "portable")
    return s.run([&] { kernels::cpu::indexer_score(p, kernels::cpu::portable_indexer_rows()); });
  kernels::ScopedBackend b(variant == "ref" ? kernels::Backend::Ref : kernels::Backend::Cpu);
  s.run([&] { kernels::indexer_score(p); });
}

// candidate_blocks = 0: score every visible row; else that many random 8-row blocks.
void bench_score(State& s, const std::string& variant, int64_t m, int64_t rows,
                 int64_t candidate_blocks) {
  const auto q = normal(m * kHeads * kDim, 1), w = normal(m * kHeads, 2),
             keys = normal(rows * kDim, 3);
  std::vector<int64_t> visible(m, rows);
  std::vector<int32_t> cand;
  std::mt19937 rng(4);
  for (int64_t i = 0; i < m * candidate_blocks; ++i) {
    const int32_t block = rng() % (rows / 8);
    for (int32_t r = 0; r < 8; ++r) cand.push_back(block * 8 + r);
  }
  std::vector<float> score(m * rows);
  const kernels::IndexerScoreParams p{.q = q.data(),
                                      .w = w.data(),
                                      .keys = keys.data(),
                                      .visible = visible.data(),
                                      .candidates = candidate_blocks ? cand.data() : nullptr,
                                      .max_candidates = 8 * candidate_blocks,
                                      .score = score.data(),
                                      .m = m,
                                      .heads = kHeads,
                                      .dim = kDim,
                                      .rows = rows};
  const int64_t scored = candidate_blocks ? 8 * candidate_blocks : rows;
  s.shape = "M=" + std::to_string(m) + " 32x128 over " + std::to_string(scored) + " of " +
            std::to_string(rows) + " rows";
  s.flops = 2.0 * m * kHeads * kDim * scored;
  s.bytes = 4.0 * kDim * scored + 4.0 * m * rows;
  s.bound = Bound::Fp32;
  run_score(s, variant, p);
}

// kind 0: random normal scores; kind 1: all zero (every entry tied).
void bench_topk(State& s, kernels::Backend backend, int64_t n, int64_t k, int kind) {
  const auto score = kind == 0 ? normal(n, 5) : std::vector<float>(n, 0.0f);
  std::vector<int32_t> out(k);
  s.shape = "n=" + std::to_string(n) + " k=" + std::to_string(k) + (kind ? " all tied" : "");
  s.bytes = 4.0 * n;
  kernels::ScopedBackend b(backend);
  s.run([&] { kernels::topk(score.data(), n, k, out.data()); });
}

[[maybe_unused]] const int kRegistered = [] {
  for (const char* v : {"cpu", "portable", "ref"}) {
    const std::string variant = v;
    for (int64_t m : {1, 16})
      add("indexer/score/" + variant + "/m" + std::to_string(m) + "/64k", [=](State& s) {
        if (variant == "ref" && s.quick()) return s.skip("slow; runs without --quick");
        bench_score(s, variant, m, 65536, 0);
      });
    add("indexer/score/" + variant + "/m1/cand2048x8/128k",
        [=](State& s) { bench_score(s, variant, 1, 131072, 2048); });
  }
  const int64_t topk_cases[][3] = {
      {65536, 512, 0}, {131072, 2048, 0}, {1 << 20, 512, 0}, {1 << 20, 2048, 0}, {1 << 20, 512, 1}};
  for (const auto& c : topk_cases)
    for (const auto backend : {kernels::Backend::Cpu, kernels::Backend::Ref}) {
      const int64_t n = c[0], k = c[1];
      const int kind = int(c[2]);
      add(std::string("indexer/topk/") + kernels::to_string(backend) + "/n" + std::to_string(n) +
              "/k" + std::to_string(k) + (kind ? "/tied" : ""),
          [=](State& s) {
            if (backend == kernels::Backend::Ref && n > 65536 && s.quick())
              return s.skip("slow; runs without --quick");
            bench_topk(s, backend, n, k, kind);
          });
    }
  return 0;
}();

}  // namespace
}  // namespace troupe::bench

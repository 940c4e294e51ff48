// The decode step's GEMMs back to back: every matrix of the peer bench's dense LLaMA
// (bench/peer: D 1024, 16 heads of 64, 4 KV heads, F 4096, 24 layers, vocab 32000) at
// M = 1, each layer's own weights, in the forward's order (q k v, o, gate up, down; then
// the head). Beside the single-matrix cases (gemm/ll_*) this shows what a decode token
// loses between GEMMs (fork-joins, each matrix's start and tail) with nothing else in the
// step; "shared_x" runs q / k / v and gate / up as one kernels::gemm_shared_x call each.
// F16 (~760 MB), Q8_0 (~430 MB) and Q4_0 (~230 MB) weights, the latter two with their
// row groups (kernels/q8_row_groups.h) as the GGUF loader keeps them, all on 2 MiB pages
// where THP allows: every call streams from DRAM. Inputs are fixed small values (outputs
// are not fed back, so no value drifts to subnormal or infinite over the repeats).
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <span>
#include <string>
#include <vector>

#include "bench/kernels/bench.h"
#include "bench/kernels/huge_arena.h"
#include "kernels/dispatch.h"
#include "kernels/gemm.h"
#include "kernels/ggml_blocks.h"
#include "kernels/q8_row_groups.h"

namespace troupe::bench {
namespace {

using kernels::GemmParams;
using kernels::WeightFormat;

constexpr int64_t kLayers = 24, kDim = 1024, kKvDim = 256, kFfn = 4096, kVocab = 32000;

// Bytes of one [n x k] matrix in format f, and with its row groups (Q8_0 / Q4_0).
size_t stored_bytes(WeightFormat f, int64_t n, int64_t k) {
  return f == WeightFormat::F16 ? size_t(2 * n * k) : size_t(n * kernels::ggml_row_bytes(f, k));
}
size_t arena_bytes(WeightFormat f, int64_t n, int64_t k) {
  const size_t b = (stored_bytes(f, n, k) + 63) / 64 * 64;
  return kernels::is_ggml_block(f) ? 2 * b : b;  // the row groups are as large
}

// Small finite halves for F16; for Q8_0 / Q4_0 blocks of hashed codes with f16 scales
// near 2^-7, then their row groups.
kernels::WeightView make_matrix(WeightFormat f, int64_t n, int64_t k, HugeArena& arena, uint32_t salt) {
  uint8_t* data = arena.take(stored_bytes(f, n, k));
  kernels::WeightView w{f, n, k, data, nullptr};
  if (f == WeightFormat::F16) {
    auto* h = reinterpret_cast<uint16_t*>(data);
    for (int64_t i = 0; i < n * k; ++i)
      h[i] = kernels::f16_encode(static_cast<float>((uint64_t(i) * 2654435761u + salt) % 2001) * 1e-3f - 1.0f);
    return w;
  }
  const int64_t block = f == WeightFormat::Q8_0 ? kernels::kQ8_0Bytes : kernels::kQ4_0Bytes;
  const size_t bytes = stored_bytes(f, n, k);
  for (size_t b = 0; b < bytes; b += size_t(block)) {
    const uint16_t d = kernels::f16_encode(0x1p-7f * (1.0f + float((b / size_t(block) + salt) % 7) / 8));
    std::memcpy(data + b, &d, 2);
    for (int64_t i = 2; i < block; ++i) data[b + size_t(i)] = static_cast<uint8_t>((uint64_t(b + i) * 2654435761u + salt) >> 13);
  }
  uint8_t* groups = arena.take(size_t(kernels::q8_row_groups_bytes(w)));
  kernels::pack_q8_row_groups(w, groups);
  w.groups = groups;
  return w;
}

struct Layer {
  kernels::WeightView q, k, v, o, gate, up, down;
};

// One format's chain, built on first use and kept until another format's is asked for
// (so at most one is in memory: Q8_0's is ~860 MB with its row groups).
struct Chain {
  WeightFormat format;
  std::unique_ptr<HugeArena> arena;
  std::vector<Layer> layers;
  kernels::WeightView head;
  double bytes = 0;  // the weights one token reads (the row groups for Q8_0 / Q4_0)
};

const Chain& chain_for(WeightFormat f) {
  static std::unique_ptr<Chain> cached;
  if (cached && cached->format == f) return *cached;
  cached.reset();
  auto c = std::make_unique<Chain>();
  c->format = f;
  const std::pair<int64_t, int64_t> shapes[] = {{kDim, kDim},  {kKvDim, kDim}, {kKvDim, kDim}, {kDim, kDim},
                                                {kFfn, kDim}, {kFfn, kDim},   {kDim, kFfn}};
  size_t total = arena_bytes(f, kVocab, kDim);
  for (const auto& [n, k] : shapes) total += kLayers * arena_bytes(f, n, k);
  c->arena = std::make_unique<HugeArena>(total);
  for (int64_t l = 0; l < kLayers; ++l) {
    const auto salt = static_cast<uint32_t>(l * 7);
    Layer layer;
    kernels::WeightView* fields[] = {&layer.q, &layer.k, &layer.v, &layer.o, &layer.gate, &layer.up, &layer.down};
    for (int i = 0; i < 7; ++i) *fields[i] = make_matrix(f, shapes[i].first, shapes[i].second, *c->arena, salt + i);
    c->layers.push_back(layer);
  }
  c->head = make_matrix(f, kVocab, kDim, *c->arena, 999);
  c->bytes = double(stored_bytes(f, kVocab, kDim));
  for (const auto& [n, k] : shapes) c->bytes += kLayers * double(stored_bytes(f, n, k));
  cached = std::move(c);
  return *cached;
}

void run_chain(State& s, WeightFormat f, bool shared_x) {
  if (!kernels::cpu_supports(kernels::CpuPath::Avx512) && !kernels::cpu_supports(kernels::CpuPath::Avx2))
    return s.skip("no AVX2 or AVX-512: the portable path is not a decode figure");
  const Chain& c = chain_for(f);  // built once per format for both variants (seconds)
  const std::vector<float> x(kFfn, 0.01f);  // every GEMM's input (its first K values)
  std::vector<float> q(kDim), k(kKvDim), v(kKvDim), o(kDim), g(kFfn), h(kFfn), d(kDim), logits(kVocab);
  auto params = [](const float* in, const kernels::WeightView& w, float* out) {
    GemmParams p;
    p.x = in;
    p.w = w;
    p.y = out;
    p.m = 1;
    return p;
  };
  s.shape = "24 layers x 7 + head, M=1";
  s.bytes = c.bytes;
  s.flops = 2.0 * (c.bytes / double(stored_bytes(f, 1, 32))) * 32;  // 2 flops per weight
  s.bound = Bound::Memory;
  auto over_one_x = [&](std::span<const GemmParams> ps) {  // the variant's way
    if (shared_x) return kernels::gemm_shared_x(ps);
    for (const GemmParams& p : ps) kernels::gemm(p);
  };
  s.run([&] {
    for (const Layer& l : c.layers) {
      const GemmParams qkv[] = {params(x.data(), l.q, q.data()), params(x.data(), l.k, k.data()),
                                params(x.data(), l.v, v.data())};
      over_one_x(qkv);
      kernels::gemm(params(x.data(), l.o, o.data()));
      const GemmParams gate_up[] = {params(x.data(), l.gate, g.data()), params(x.data(), l.up, h.data())};
      over_one_x(gate_up);
      kernels::gemm(params(x.data(), l.down, d.data()));
    }
    kernels::gemm(params(x.data(), c.head, logits.data()));
  });
}

const bool registered = [] {
  for (WeightFormat f : {WeightFormat::F16, WeightFormat::Q8_0, WeightFormat::Q4_0})
    for (bool shared_x : {false, true}) {
      const std::string name = std::string("decode_chain/llama-dense/") + kernels::to_string(f) + "/m0001/" +
                               (shared_x ? "shared_x" : "separate");
      add(name, [f, shared_x](State& s) { run_chain(s, f, shared_x); });
    }
  return true;
}();

}  // namespace
}  // namespace troupe::bench

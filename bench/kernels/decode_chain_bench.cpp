// The decode step's GEMMs back to back: every matrix of the peer bench's dense LLaMA
// (bench/peer: D 1024, 16 heads of 64, 4 KV heads, F 4096, 24 layers, vocab 32000) at
// M = 1, each layer's own weights, in the forward's order (q k v, o, gate up, down; then
// the head). Beside the single-matrix cases (gemm/ll_*) this shows what a decode token
// loses between GEMMs (fork-joins, each matrix's start and tail) with nothing else in the
// step; "shared_x" runs q / k / v and gate / up as one kernels::gemm_shared_x call each.
// ~760 MB of F16 weights on 2 MiB pages where THP allows (as the GGUF loader keeps
// them): every call streams from DRAM. Inputs are fixed small values (outputs are not
// fed back, so no value drifts to subnormal or infinite over the repeats).
#include <sys/mman.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <vector>

#include "bench/kernels/bench.h"
#include "kernels/dispatch.h"
#include "kernels/gemm.h"
#include "kernels/ggml_blocks.h"

namespace troupe::bench {
namespace {

using kernels::GemmParams;
using kernels::WeightFormat;

constexpr int64_t kLayers = 24, kDim = 1024, kKvDim = 256, kFfn = 4096, kVocab = 32000;

struct Matrix {
  int64_t n = 0, k = 0;
  const uint16_t* data = nullptr;  // F16, in the arena
};

// All the chain's weights in one allocation on huge pages (advice only), kept for the
// process: both variants read the same bytes.
uint16_t* arena(size_t halves) {
  constexpr size_t kHuge = size_t{2} << 20;
  const size_t bytes = (halves * 2 + kHuge - 1) / kHuge * kHuge;
  auto* p = static_cast<uint16_t*>(std::aligned_alloc(kHuge, bytes));
  if (p == nullptr) throw std::bad_alloc();
  ::madvise(p, bytes, MADV_HUGEPAGE);
  return p;
}

Matrix f16_matrix(int64_t n, int64_t k, uint16_t*& next, uint16_t salt) {
  Matrix m{n, k, next};
  for (int64_t i = 0; i < n * k; ++i)  // small finite halves
    next[i] = kernels::f16_encode(static_cast<float>((uint64_t(i) * 2654435761u + salt) % 2001) * 1e-3f - 1.0f);
  next += n * k;
  return m;
}

struct Layer {
  Matrix q, k, v, o, gate, up, down;
};

void run_chain(State& s, bool shared_x) {
  if (!kernels::cpu_supports(kernels::CpuPath::Avx512) && !kernels::cpu_supports(kernels::CpuPath::Avx2))
    return s.skip("no AVX2 or AVX-512: the portable path is not a decode figure");
  static std::vector<Layer> layers;  // built once for both variants (~10 s)
  static Matrix head;
  if (layers.empty()) {
    const int64_t per_layer = 2 * kDim * kDim + 2 * kKvDim * kDim + 3 * kFfn * kDim;
    uint16_t* next = arena(static_cast<size_t>(kLayers * per_layer + kVocab * kDim));
    for (int64_t l = 0; l < kLayers; ++l) {
      const auto salt = static_cast<uint16_t>(l * 7);
      Layer layer;
      layer.q = f16_matrix(kDim, kDim, next, salt);
      layer.k = f16_matrix(kKvDim, kDim, next, salt + 1);
      layer.v = f16_matrix(kKvDim, kDim, next, salt + 2);
      layer.o = f16_matrix(kDim, kDim, next, salt + 3);
      layer.gate = f16_matrix(kFfn, kDim, next, salt + 4);
      layer.up = f16_matrix(kFfn, kDim, next, salt + 5);
      layer.down = f16_matrix(kDim, kFfn, next, salt + 6);
      layers.push_back(layer);
    }
    head = f16_matrix(kVocab, kDim, next, 999);
  }
  const std::vector<float> x(kFfn, 0.01f);  // every GEMM's input (its first K values)
  std::vector<float> q(kDim), k(kKvDim), v(kKvDim), o(kDim), g(kFfn), h(kFfn), d(kDim), logits(kVocab);
  auto params = [](const float* in, const Matrix& w, float* out) {
    GemmParams p;
    p.x = in;
    p.w = {WeightFormat::F16, w.n, w.k, w.data, nullptr};
    p.y = out;
    p.m = 1;
    return p;
  };
  double bytes = 2.0 * kVocab * kDim;
  for (const Layer& l : layers)
    for (const Matrix* m : {&l.q, &l.k, &l.v, &l.o, &l.gate, &l.up, &l.down}) bytes += 2.0 * double(m->n * m->k);
  s.shape = "24 layers x 7 + head, M=1";
  s.bytes = bytes;
  s.flops = bytes;  // one multiply-add per F16 weight
  s.bound = Bound::Memory;
  s.run([&] {
    for (const Layer& l : layers) {
      const GemmParams qkv[] = {params(x.data(), l.q, q.data()), params(x.data(), l.k, k.data()),
                                params(x.data(), l.v, v.data())};
      if (shared_x) {
        kernels::gemm_shared_x(qkv);
      } else {
        for (const GemmParams& p : qkv) kernels::gemm(p);
      }
      kernels::gemm(params(x.data(), l.o, o.data()));
      const GemmParams gate_up[] = {params(x.data(), l.gate, g.data()), params(x.data(), l.up, h.data())};
      if (shared_x) {
        kernels::gemm_shared_x(gate_up);
      } else {
        for (const GemmParams& p : gate_up) kernels::gemm(p);
      }
      kernels::gemm(params(x.data(), l.down, d.data()));
    }
    kernels::gemm(params(x.data(), head, logits.data()));
  });
}

const bool registered = [] {
  add("decode_chain/llama-dense/F16/m0001/separate", [](State& s) { run_chain(s, false); });
  add("decode_chain/llama-dense/F16/m0001/shared_x", [](State& s) { run_chain(s, true); });
  return true;
}();

}  // namespace
}  // namespace troupe::bench

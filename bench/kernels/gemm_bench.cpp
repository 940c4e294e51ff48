// GEMM benchmarks on real V4.1-Flash shapes ([N out x K in], MODEL.md §2):
//   wq_a   [1280 x 5120]  every weight format (FP8 in the checkpoint; F16 as GGUF f16 files)
//   wo_b   [5120 x 1024]  FP8 (one o-group's slice of wo_b's input width)
//   exp_w1 [2304 x 5120]  FP4 routed expert w1/w3
//   exp_w2 [5120 x 2304]  FP4 routed expert w2
//   v41s_w13 [1024 x 2048], v41s_w2 [2048 x 1024]  FP4 experts of /work/v41-small
//           (make-tiny-model --preset v41-small), also at decode M = 2 and 8: a decode
//           batch of B gives each active expert ~B·6/64 rows; FP8: its shared expert
//   v41s_wq_a [768 x 2048], v41s_wq_b [2048 x 768], v41s_wo_a [512 x 512] (one of its
//           4 o-groups), v41s_wo_b [2048 x 2048]  FP8 attention projections of v41-small,
//           at the decode rows of a batch of 1-16
//   v41s_hc [24 x 8192]  F32: a layer's hyper-connection mix of v41-small ((2 + 4) · 4
//           outputs over its 4 streams of 2048), at the decode rows of a batch of 1-16
//   ll_w13 [4096 x 1024], ll_w2 [1024 x 4096]  the peer bench's dense LLaMA FFN (f16, q8_0,
//           q4_0), also at decode M = 2 and M = 64 (where the row-group kernel changes tiles)
//   ll_q [1024 x 1024], ll_kv [256 x 1024], ll_head [32000 x 1024]  its attention's q (and o),
//           k (and v) and its output head, decode only (M = 1, 2, 4, 16)
//   mx_w1 [512 x 1024], mx_w2 [1024 x 512]  an expert of the peer bench's MoE at the ~48
//           rows (and 96) a pp512 (pp1024) gives each of its 64 experts at top-6
// at decode M = 1, 4, 16 (judged against DRAM bandwidth: decode streams each weight
// once per step and the model's weights never fit in cache) and prefill M = 512, 2048
// (4096 under --full), in f32 and bf16 precision (judged against the matching peak),
// and FP4 decode also in int8 precision (GemmPrecision::Int8: q8_0 activations, int8 dot
// products; judged against DRAM like every decode case).
// Decode cases rotate over enough copies of the weights (>= 128 MiB) that every call
// reads them from DRAM rather than the 32 MiB L3. Every case runs on each CPU path
// (avx512, avx2, portable: the name's last part) so they read side by side; a path the
// CPU lacks is a skipped row, and portable prefill beyond M = 512 needs --full.
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
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

using kernels::GemmPrecision;
using kernels::WeightFormat;
using kernels::WeightView;

struct Shape {
  const char* name;
  int64_t n, k;
  std::vector<WeightFormat> formats;
  std::vector<int64_t> ms = {1, 4, 16, 512, 2048, 4096};  // rows of x
};

uint64_t splitmix64(uint64_t& s) {
  uint64_t z = (s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Random codes for one stored matrix: values in [-1, 1) for F32/BF16/F16, any non-NaN
// E4M3 byte, any FP4 nibble, scale codes 110..135; q8_0 / q4_0 blocks of random codes
// with f16 scales near 2^-7.
struct StoredWeight {
  std::vector<uint8_t> data, scale;

  StoredWeight(WeightFormat f, int64_t n, int64_t k) {
    uint64_t s = 42;
    auto unit = [&] { return static_cast<float>(splitmix64(s) >> 40) * 0x1p-23f - 1.0f; };
    if (f == WeightFormat::F32 || f == WeightFormat::BF16 || f == WeightFormat::F16) {
      const int64_t width = f == WeightFormat::F32 ? 4 : 2;
      data.resize(n * k * width);
      for (int64_t i = 0; i < n * k; ++i) {
        const float v = unit();
        const uint16_t h = kernels::f16_encode(v);
        const void* src = f == WeightFormat::F16 ? static_cast<const void*>(&h)
                                                 : reinterpret_cast<const char*>(&v) + 4 - width;
        std::memcpy(&data[i * width], src, width);
      }
      return;
    }
    if (f == WeightFormat::Q8_0 || f == WeightFormat::Q4_0) {  // GGUF blocks: f16 scale, codes
      const int64_t block = f == WeightFormat::Q8_0 ? kernels::kQ8_0Bytes : kernels::kQ4_0Bytes;
      data.resize(n * (k / kernels::kQBlock) * block);
      for (size_t b = 0; b < data.size(); b += block) {
        const uint16_t d = kernels::f16_encode(0x1p-7f * (1.0f + unit()));
        std::memcpy(&data[b], &d, 2);
        for (int64_t i = 2; i < block; ++i) data[b + i] = static_cast<uint8_t>(splitmix64(s));
      }
      return;
    }
    data.resize(f == WeightFormat::FP4 ? n * k / 2 : n * k);
    for (auto& b : data) {
      b = static_cast<uint8_t>(splitmix64(s));
      if (f != WeightFormat::FP4 && (b & 0x7F) == 0x7F) b ^= 1;
    }
    scale.resize(f == WeightFormat::FP8 ? ((n + 31) / 32) * ((k + 31) / 32) : n * (k / 32));
    for (auto& c : scale) c = static_cast<uint8_t>(110 + splitmix64(s) % 26);
  }
  double bytes() const { return static_cast<double>(data.size() + scale.size()); }
};

// A Q8_0 / Q4_0 / FP4 weight's row groups (kernels/q8_row_groups.h), as a loader makes them.
std::vector<uint8_t> row_groups(const StoredWeight& w, WeightFormat f, int64_t n, int64_t k) {
  const WeightView v{f, n, k, w.data.data(), w.scale.empty() ? nullptr : w.scale.data()};
  std::vector<uint8_t> out(static_cast<size_t>(kernels::q8_row_groups_bytes(v)));
  kernels::pack_q8_row_groups(v, out.data());
  return out;
}

// Copies of one weight, enough to stream >= 128 MiB per rotation, on 2 MiB pages as the
// loaders hold a model's weights (bench/kernels/huge_arena.h); the last set built is kept
// so the cases of one (shape, format) share it (names sort them together).
struct WeightSet {
  std::string key;
  double bytes = 0;  // one copy's stored bytes (codes and scales)
  std::unique_ptr<HugeArena> arena;
  std::vector<WeightView> copies;  // groups set for Q8_0 / Q4_0 / FP4 (their row groups)
};

const WeightSet& weights_for(const Shape& sh, WeightFormat f) {
  static std::unique_ptr<WeightSet> cached;
  const std::string key = std::string(sh.name) + kernels::to_string(f);
  if (!cached || cached->key != key) {
    cached.reset();  // free the previous set first
    cached = std::make_unique<WeightSet>();
    cached->key = key;
    const StoredWeight first(f, sh.n, sh.k);
    const std::vector<uint8_t> groups =
        kernels::is_ggml_block(f) || f == WeightFormat::FP4 ? row_groups(first, f, sh.n, sh.k) : std::vector<uint8_t>{};
    cached->bytes = first.bytes();
    const int copies = static_cast<int>(1 + (double{128 << 20} / first.bytes()));
    auto padded = [](size_t b) { return (b + 63) / 64 * 64; };
    cached->arena = std::make_unique<HugeArena>(
        copies * (padded(first.data.size()) + padded(first.scale.size()) + padded(groups.size())));
    auto place = [&](const std::vector<uint8_t>& v) -> const uint8_t* {
      if (v.empty()) return nullptr;
      uint8_t* p = cached->arena->take(v.size());
      std::memcpy(p, v.data(), v.size());
      return p;
    };
    // FP8 / ROWFP8 without NaN codes (these have none) marked as the model's binder marks them.
    const bool e4m3 = f == WeightFormat::FP8 || f == WeightFormat::ROWFP8;
    const bool no_nan =
        e4m3 && kernels::e4m3_nan_free(first.data.data(), static_cast<int64_t>(first.data.size()));
    for (int c = 0; c < copies; ++c) {
      WeightView w{f, sh.n, sh.k, place(first.data), place(first.scale)};
      w.groups = place(groups);
      w.no_nan_codes = no_nan;
      cached->copies.push_back(w);
    }
  }
  return *cached;
}

// groups: a Q8_0 / Q4_0 weight with its row groups (the AVX-512 VNNI and AVX2 layout), or
// an FP4 one under Int8 precision with them.
void run_case(State& s, const Shape& sh, WeightFormat f, int64_t m, GemmPrecision prec,
              kernels::CpuPath path, bool groups) {
  const bool decode = m <= 16;
  if (!kernels::cpu_supports(path)) return s.skip(kernels::missing_reason(path));
  if (m > 2048 && !s.full()) return s.skip("needs --full");
  if (m > 512 && path == kernels::CpuPath::Portable && !s.full())
    return s.skip("portable prefill: slow, needs --full");
  kernels::ScopedCpuPath scoped(path);
  const WeightSet& ws = weights_for(sh, f);
  std::vector<float> x(static_cast<size_t>(m * sh.k)), y(static_cast<size_t>(m * sh.n));
  uint64_t seed = 7;
  for (float& v : x) v = static_cast<float>(splitmix64(seed) >> 40) * 0x1p-23f - 1.0f;
  s.shape = "M=" + std::to_string(m) + " N=" + std::to_string(sh.n) + " K=" + std::to_string(sh.k);
  s.flops = 2.0 * m * sh.n * sh.k;
  s.bytes = ws.bytes;
  const bool ggml = f == WeightFormat::Q8_0 || f == WeightFormat::Q4_0;
  s.bound = decode ? Bound::Memory
            : ggml || prec == GemmPrecision::Int8 ? Bound::Int8
            : prec == GemmPrecision::Bf16 ? Bound::Bf16 : Bound::Fp32;
  s.compute = ggml || prec == GemmPrecision::Int8 ? Bound::Int8 : Bound::Fp32;
  size_t next = 0;
  s.run([&] {
    kernels::GemmParams p;
    p.x = x.data();
    p.w = ws.copies[next++ % ws.copies.size()];
    if (!groups) p.w.groups = nullptr;
    p.y = y.data();
    p.m = m;
    p.precision = prec;
    kernels::gemm(p);
  });
}

const char* precision_name(GemmPrecision p) {
  return p == GemmPrecision::Bf16 ? "bf16" : p == GemmPrecision::Int8 ? "int8" : "f32";
}

const bool registered = [] {
  const std::vector<Shape> shapes = {
      {"wq_a",
       1280,
       5120,
       {WeightFormat::F32, WeightFormat::BF16, WeightFormat::F16, WeightFormat::FP8,
        WeightFormat::FP4, WeightFormat::ROWFP8}},
      {"wo_b", 5120, 1024, {WeightFormat::FP8}},
      {"exp_w1", 2304, 5120, {WeightFormat::FP4}},
      {"exp_w2", 5120, 2304, {WeightFormat::FP4}},
      {"v41s_w13", 1024, 2048, {WeightFormat::FP4, WeightFormat::FP8}, {1, 2, 4, 8, 16}},
      {"v41s_w2", 2048, 1024, {WeightFormat::FP4, WeightFormat::FP8}, {1, 2, 4, 8, 16}},
      {"v41s_wq_a", 768, 2048, {WeightFormat::FP8}, {1, 2, 4, 8, 16}},
      {"v41s_wq_b", 2048, 768, {WeightFormat::FP8}, {1, 2, 4, 8, 16}},
      {"v41s_wo_a", 512, 512, {WeightFormat::FP8}, {1, 2, 4, 8, 16}},
      {"v41s_wo_b", 2048, 2048, {WeightFormat::FP8}, {1, 2, 4, 8, 16}},
      {"v41s_hc", 24, 8192, {WeightFormat::F32}, {1, 2, 4, 8, 16}},
      // The dense LLaMA of bench/peer (D 1024, F 4096): its FFN's up/gate and down, and
      // its attention's q and o, k and v (decode rows and a pp512's), and the output head.
      {"ll_w13", 4096, 1024, {WeightFormat::F16, WeightFormat::Q8_0, WeightFormat::Q4_0}, {1, 2, 4, 16, 64, 512, 2048, 4096}},
      {"ll_w2", 1024, 4096, {WeightFormat::F16, WeightFormat::Q8_0, WeightFormat::Q4_0}, {1, 2, 4, 16, 64, 512, 2048, 4096}},
      {"ll_q", 1024, 1024, {WeightFormat::F16, WeightFormat::Q8_0, WeightFormat::Q4_0}, {1, 2, 4, 16, 512}},
      {"ll_kv", 256, 1024, {WeightFormat::F16, WeightFormat::Q8_0, WeightFormat::Q4_0}, {1, 2, 4, 16, 512}},
      {"ll_head", 32000, 1024, {WeightFormat::F16, WeightFormat::Q8_0, WeightFormat::Q4_0}, {1, 2, 4, 16}},
      // The peer bench's MoE (D 1024, 64 experts of F 512, top-6): an expert's w1 (or w3)
      // and w2 at the ~48 rows a pp512 gives each expert, and at 96.
      {"mx_w1", 512, 1024, {WeightFormat::Q8_0, WeightFormat::Q4_0}, {48, 96}},
      {"mx_w2", 1024, 512, {WeightFormat::Q8_0, WeightFormat::Q4_0}, {48, 96}},
  };
  for (const Shape& sh : shapes)
    for (WeightFormat f : sh.formats)
      for (int64_t m : sh.ms)
        for (GemmPrecision prec : {GemmPrecision::F32, GemmPrecision::Bf16, GemmPrecision::Int8}) {
          if (m <= 16 && prec == GemmPrecision::Bf16) continue;  // decode: f32 and int8
          // Int8 FP4 at prefill sizes: only with the row groups (without them kernels::gemm
          // runs f32 above kInt8MaxRows), "int8-groups" at M = 512 beside f32 and bf16.
          if (prec == GemmPrecision::Int8 && (f != WeightFormat::FP4 || (m > 16 && m != 512))) continue;
          // q8_0 / q4_0 always run on int8 dot products: one case each, and one more with
          // the weight's row groups ("groups", read by the AVX-512 VNNI and AVX2 paths);
          // FP4 on int8 also with its row groups ("int8-groups").
          const bool ggml = kernels::is_ggml_block(f);
          if (ggml && prec != GemmPrecision::F32) continue;
          char mm[16];
          std::snprintf(mm, sizeof mm, "m%04lld", static_cast<long long>(m));
          for (kernels::CpuPath path :
               {kernels::CpuPath::Avx512, kernels::CpuPath::Avx2, kernels::CpuPath::Portable})
            for (bool groups : {false, true}) {
              const bool fp4_int8 = f == WeightFormat::FP4 && prec == GemmPrecision::Int8;
              if (groups && ((!ggml && !fp4_int8) || path == kernels::CpuPath::Portable)) continue;
              if (fp4_int8 && m > 16 && !groups) continue;
              const std::string label = !groups ? precision_name(prec) : ggml ? "groups" : "int8-groups";
              const std::string name = std::string("gemm/") + sh.name + "/" + kernels::to_string(f) +
                                       "/" + mm + "/" + label +
                                       "/" + kernels::to_string(path);
              add(name, [sh, f, m, prec, path, groups](State& s) { run_case(s, sh, f, m, prec, path, groups); });
            }
        }
  return true;
}();

}  // namespace
}  // namespace troupe::bench

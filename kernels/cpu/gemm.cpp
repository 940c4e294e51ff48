// cpu::gemm: the AVX-512 (kernels/cpu/gemm_avx512.cpp), AVX2+FMA (gemm_avx2.cpp) or
// portable path (the blocked loops below), per active_cpu_path(); F16 weights take the
// AVX2 path only with F16C; GGUF block weights go to cpu::gemm_q8 (kernels/cpu/gemm_q8.h).
// All thread over output columns, so every y element is computed by one thread in a
// fixed order.
#include <algorithm>
#include <bit>
#include <vector>

#include "kernels/check.h"
#include "kernels/cpu/gemm_internal.h"
#include "kernels/cpu/gemm_q8.h"
#include "kernels/cpu/gemm_weight_src.h"
#include "kernels/dispatch.h"
#include "kernels/parallel.h"
#include "kernels/quant.h"
#include "kernels/scratch.h"

namespace troupe::kernels::cpu {
namespace {

constexpr int64_t kPanelRows = 8;  // weight rows dequantized together (stays in L1/L2)

// Sixteen partial sums in a fixed order: vectorisable without -ffast-math.
float dot(const float* a, const float* b, int64_t n) {
  float part[16] = {};
  int64_t k = 0;
  for (; k + 16 <= n; k += 16)
    for (int j = 0; j < 16; ++j) part[j] += a[k + j] * b[k + j];
  for (int j = 0; k + j < n; ++j) part[j] += a[k + j] * b[k + j];
  for (int width = 8; width > 0; width /= 2)
    for (int j = 0; j < width; ++j) part[j] += part[j + width];
  return part[0];
}

}  // namespace

WeightSrc weight_src(const WeightView& w) {
  static const float* ue8m0 = [] {
    static float t[256];
    for (int c = 0; c < 256; ++c) t[c] = ue8m0_decode(static_cast<uint8_t>(c));
    return t;
  }();
  static const float* e4m3_scale = [] {
    static float t[256] = {};
    for (int c = 0; c <= kMaxFoldedScale; ++c)
      t[c] = 0x1p120f * ue8m0_decode(static_cast<uint8_t>(c));
    return t;
  }();
  static const float* fp4_scaled = [] {
    alignas(64) static float t[256 * 16];
    for (int c = 0; c < 256; ++c)
      for (int i = 0; i < 16; ++i) t[c * 16 + i] = e2m1_table()[i] * ue8m0[c];
    return t;
  }();
  static const uint8_t* fp4_bf16 = [] {
    alignas(64) static uint8_t t[256 * 64];
    for (int c = 0; c < 256; ++c)
      for (int i = 0; i < 16; ++i) {
        // E2M1 · 2^(c-127) has two significant bits and bf16's exponent range (its least,
        // 2^-128, is above bf16's smallest subnormal 2^-133): the low half is zero, also
        // for the overflow to inf and the NaN of code 255.
        const uint32_t f = std::bit_cast<uint32_t>(fp4_scaled[c * 16 + i]);
        TROUPE_CHECK((f & 0xFFFF) == 0, "an E2M1 value times a UE8M0 scale is a bf16 value");
        for (int lane = 0; lane < 2; ++lane) {  // each half twice: one per 128-bit lane
          t[c * 64 + 16 * lane + i] = static_cast<uint8_t>(f >> 16);
          t[c * 64 + 32 + 16 * lane + i] = static_cast<uint8_t>(f >> 24);
        }
      }
    return t;
  }();
  const int64_t k = w.cols;
  int64_t row_bytes = k, scale_ld = k / 32;
  if (w.format == WeightFormat::F32) row_bytes = 4 * k;
  if (w.format == WeightFormat::BF16 || w.format == WeightFormat::F16) row_bytes = 2 * k;
  if (w.format == WeightFormat::FP4) row_bytes = k / 2;
  if (w.format == WeightFormat::FP8) scale_ld = (k + 31) / 32;
  return {static_cast<const uint8_t*>(w.data),
          w.scale,
          k,
          row_bytes,
          scale_ld,
          ue8m0,
          e4m3_scale,
          fp4_scaled,
          fp4_bf16,
          w.no_nan_codes};
}

bool gemm_trivial(const GemmParams& p, const GemmShape& sh) {
  if (sh.m == 0 || sh.n == 0) return true;
  if (sh.k > 0) return false;
  if (!p.accumulate)  // empty sums
    for (int64_t m = 0; m < sh.m; ++m) std::fill(p.y + m * sh.ldy, p.y + m * sh.ldy + sh.n, 0.0f);
  return true;
}

void gemm_portable(const GemmParams& p) {
  const GemmShape sh = gemm_shape(p);
  if (gemm_trivial(p, sh)) return;
  const float* x = p.x;
  int64_t ldx = sh.ldx;
  scratch_vector<float> rounded;  // GemmPrecision::Bf16: the activations as bf16 values
  if (p.precision == GemmPrecision::Bf16) {
    rounded.resize(static_cast<size_t>(sh.m * sh.k));
    for (int64_t m = 0; m < sh.m; ++m)
      for (int64_t k = 0; k < sh.k; ++k)
        rounded[m * sh.k + k] = bf16_decode(bf16_encode(p.x[m * sh.ldx + k]));
    x = rounded.data();
    ldx = sh.k;
  }
  parallel_for(sh.n, gemm_min_chunk(sh, kPanelRows), [&](int64_t nb, int64_t ne) {
    scratch_vector<float> panel(static_cast<size_t>(kPanelRows * sh.k));
    for (int64_t n0 = nb; n0 < ne; n0 += kPanelRows) {
      const int64_t rows = std::min(kPanelRows, ne - n0);
      dequantize_rows(p.w, n0, rows, panel.data());
      for (int64_t m = 0; m < sh.m; ++m) {
        float* y = p.y + m * sh.ldy + n0;
        for (int64_t r = 0; r < rows; ++r) {
          const float s = dot(x + m * ldx, panel.data() + r * sh.k, sh.k);
          y[r] = p.accumulate ? y[r] + s : s;
        }
      }
    }
  });
}

void gemm(const GemmParams& p) {
  if (q8_activations(p)) return gemm_q8(p, best_q_kernel());
  switch (active_cpu_path()) {
    case CpuPath::Avx512:
      return gemm_avx512(p, cpu_features().avx512bf16);
    case CpuPath::Avx2:
      // F16 weights decode with F16C's vcvtph2ps, which every AVX2 CPU known has but
      // AVX2 does not imply (nor does TROUPE_CPU=avx2 check it).
      if (p.w.format == WeightFormat::F16 && !cpu_features().f16c) return gemm_portable(p);
      return gemm_avx2(p);
    case CpuPath::Portable:
      return gemm_portable(p);
  }
}

void gemm_shared_x(std::span<const GemmParams> ps) {
  const auto shares_quantized_x = [&](const GemmParams& p) {
    return q8_activations(p) && (p.w.format == WeightFormat::FP4) == (ps[0].w.format == WeightFormat::FP4);
  };
  if (!ps.empty() && std::all_of(ps.begin(), ps.end(), shares_quantized_x))
    return gemm_q8_shared_x(ps, best_q_kernel());
  if (active_cpu_path() == CpuPath::Avx512 && avx512_shares_x(ps)) return gemm_avx512_shared_x(ps);
  if (active_cpu_path() == CpuPath::Avx2 && std::all_of(ps.begin(), ps.end(), avx2_direct))
    return gemm_avx2_grouped(ps);
  for (const GemmParams& p : ps) cpu::gemm(p);
}

bool gemm_joins_group(const GemmParams& p) {
  if (q8_activations(p)) return true;
  switch (active_cpu_path()) {
    case CpuPath::Avx512: return avx512_direct(p);
    case CpuPath::Avx2: return avx2_direct(p);
    case CpuPath::Portable: return false;
  }
  return false;
}

void gemm_grouped(std::span<const GemmParams> ps) {
  scratch_vector<GemmParams> q8, direct;
  for (const GemmParams& p : ps) {
    if (q8_activations(p)) q8.push_back(p);
    else if (gemm_joins_group(p)) direct.push_back(p);
    else cpu::gemm(p);
  }
  if (!q8.empty()) gemm_q8_grouped(q8, best_q_kernel());
  if (direct.empty()) return;
  if (active_cpu_path() == CpuPath::Avx512) gemm_avx512_grouped(direct);
  else gemm_avx2_grouped(direct);
}

}  // namespace troupe::kernels::cpu

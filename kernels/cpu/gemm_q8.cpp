// cpu::gemm_q8 (kernels/cpu/gemm_q8.h): the activation quantizer, the portable range
// kernel, and the one place that picks a range kernel.
#include "kernels/cpu/gemm_q8.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <span>

#include "kernels/cpu/gemm_internal.h"
#include "kernels/cpu/gemm_weight_src.h"
#include "kernels/dispatch.h"
#include "kernels/parallel.h"
#include "kernels/q8_row_groups.h"
#include "kernels/quant.h"
#include "kernels/scratch.h"

namespace troupe::kernels::cpu {
namespace {

// Round to nearest even for |v| < 2^22: adding 1.5 · 2^23 leaves no fraction bits, and
// the FPU's default rounding is to even (the same value std::nearbyint gives).
inline float round_even(float v) {
  constexpr float kMagic = 12582912.0f;
  return (v + kMagic) - kMagic;
}

// Same definition as ref::quantize_row_q8, written apart on purpose (a vectorisable
// rounding, the Q4_0 lane offsets): the test holds it to the reference bit for bit.
void quantize_row(const float* x, int64_t k, int8_t* q, float* d, int32_t* off, int32_t* sum,
                  bool fp4_order) {
  for (int64_t b = 0; b < k / kQBlock; ++b) {
    const float* xb = x + b * kQBlock;
    float amax = 0;
    // std::fmax as a compare (amax is never NaN: a NaN |x| keeps amax, as fmax does), so
    // the loop vectorises instead of calling fmaxf per value.
    for (int i = 0; i < kQBlock; ++i) {
      const float ax = std::fabs(xb[i]);
      amax = ax > amax ? ax : amax;
    }
    const float scale = amax / 127.0f;
    const float inv = scale != 0.0f ? 1.0f / scale : 0.0f;
    int8_t* qb = q + b * kQBlock;
    for (int i = 0; i < kQBlock; ++i) qb[i] = q8_code(round_even(xb[i] * inv));
    if (fp4_order) {  // [even columns | odd columns]: the FP4 codes' low and high nibbles
      int8_t t[kQBlock];
      for (int i = 0; i < kQBlock / 2; ++i) t[i] = qb[2 * i], t[kQBlock / 2 + i] = qb[2 * i + 1];
      std::memcpy(qb, t, kQBlock);
    }
    d[b] = f16_decode(f16_encode(scale));
    if (sum != nullptr) {
      int32_t t = 0;
      for (int i = 0; i < kQBlock; ++i) t += qb[i];
      sum[b] = t;
    }
    if (off == nullptr) continue;
    for (int lane = 0; lane < 8; ++lane)
      off[b * 8 + lane] =
          -8 * (qb[4 * lane] + qb[4 * lane + 1] + qb[4 * lane + 2] + qb[4 * lane + 3]);
  }
}

inline float stored_scale(const uint8_t* blk) {
  uint16_t h;
  std::memcpy(&h, blk, 2);
  return f16_decode(h);
}

// Σ over one block, in int32; the compiler vectorises the 32-wide loops.
inline int32_t dot_fp4(const uint8_t* codes, const int8_t* xq) {
  int32_t s = 0;
  for (int i = 0; i < 16; ++i)
    s += int32_t(kFp4Int8[codes[i] & 0xF]) * xq[2 * i] + int32_t(kFp4Int8[codes[i] >> 4]) * xq[2 * i + 1];
  return s;
}

inline int32_t dot_q8_0(const uint8_t* blk, const int8_t* xq) {
  const int8_t* wq = reinterpret_cast<const int8_t*>(blk + 2);
  int32_t s = 0;
  for (int i = 0; i < kQBlock; ++i) s += int32_t(wq[i]) * xq[i];
  return s;
}

inline int32_t dot_q4_0(const uint8_t* blk, const int8_t* xq) {
  int32_t s = 0;
  for (int i = 0; i < 16; ++i)
    s += int32_t(blk[2 + i] & 0xF) * xq[i] + int32_t(blk[2 + i] >> 4) * xq[i + 16];
  int32_t sx = 0;
  for (int i = 0; i < kQBlock; ++i) sx += xq[i];
  return s - 8 * sx;
}

}  // namespace

const float* fp4_int8_scales() {
  static const float* table = [] {
    static float t[256];
    for (int c = 0; c < 256; ++c) t[c] = 0.5f * ue8m0_decode(static_cast<uint8_t>(c));
    return t;
  }();
  return table;
}

void quantize_rows_q8(const float* x, int64_t m, int64_t k, int64_t ldx, int8_t* q, float* d,
                      int32_t* off, int32_t* sum, bool fp4_order) {
  const int64_t blocks = k / kQBlock;
  for (int64_t r = 0; r < m; ++r)
    quantize_row(x + r * ldx, k, q + r * k, d + r * blocks, off ? off + r * blocks * 8 : nullptr,
                 sum ? sum + r * blocks : nullptr, fp4_order);
}

// One weight row at a time, every activation row against it while it is in L1.
void gemm_q8_range_portable(const QGemmArgs& a, int64_t n0, int64_t n1) {
  const int64_t blocks = a.x.k / kQBlock;
  const bool fp4 = a.format == WeightFormat::FP4;
  const int64_t bb = fp4 ? kQBlock / 2 : a.format == WeightFormat::Q8_0 ? kQ8_0Bytes : kQ4_0Bytes;
  const float* fp4_scale = a.scale_value;
  for (int64_t n = n0; n < n1; ++n) {
    const uint8_t* row = a.w + n * a.row_bytes;
    for (int64_t m = 0; m < a.x.m; ++m) {
      const int8_t* xq = a.x.q + m * a.x.k;
      const float* xd = a.x.d + m * blocks;
      float s = 0;
      for (int64_t b = 0; b < blocks; ++b) {
        const uint8_t* blk = row + b * bb;
        if (fp4) {
          s += fp4_scale[a.scale[n * blocks + b]] * xd[b] * float(dot_fp4(blk, xq + b * kQBlock));
          continue;
        }
        const int32_t dot = a.format == WeightFormat::Q8_0 ? dot_q8_0(blk, xq + b * kQBlock)
                                                           : dot_q4_0(blk, xq + b * kQBlock);
        s += stored_scale(blk) * xd[b] * float(dot);
      }
      float& y = a.y[m * a.ldy + n];
      y = a.accumulate ? y + s : s;
    }
  }
}

const char* to_string(QGemmKernel k) {
  switch (k) {
    case QGemmKernel::Portable: return "portable";
    case QGemmKernel::Avx2: return "avx2";
    case QGemmKernel::Avx512Vnni: return "avx512-vnni";
    case QGemmKernel::Avx512VnniPacked: return "avx512-vnni-packed";
    case QGemmKernel::Avx512VnniGroups: return "avx512-vnni-groups";
    case QGemmKernel::Avx2Groups: return "avx2-groups";
    case QGemmKernel::AmxGroups: return "amx-groups";
    case QGemmKernel::AmxGroupsEmulated: return "amx-groups-emulated";
  }
  return "?";
}

bool q_kernel_supported(QGemmKernel k) {
  const CpuFeatures& f = cpu_features();
  switch (k) {
    case QGemmKernel::Portable: return true;
    case QGemmKernel::Avx2:
    case QGemmKernel::Avx2Groups: return f.has_avx2() && f.f16c;
    case QGemmKernel::Avx512Vnni:
    case QGemmKernel::Avx512VnniPacked:
    case QGemmKernel::Avx512VnniGroups:
    case QGemmKernel::AmxGroupsEmulated: return f.has_avx512() && f.avx512vnni && f.f16c;
    case QGemmKernel::AmxGroups: return f.has_avx512() && f.avx512vnni && f.f16c && f.amx_int8;
  }
  return false;
}

const char* missing_q_kernel_reason(QGemmKernel k) {
  if (q_kernel_supported(k)) return "";
  if (k == QGemmKernel::AmxGroups && cpu_features().has_avx512())
    return "this CPU lacks AMX-INT8 (or the OS did not grant its tile state)";
  return k == QGemmKernel::Avx2 || k == QGemmKernel::Avx2Groups ? "this CPU (or TROUPE_CPU) lacks AVX2+FMA+F16C"
                                : "this CPU (or TROUPE_CPU) lacks AVX-512 F/BW/VL/DQ+VNNI";
}

// The rung active_cpu_path() allows, then the features inside it: an AVX-512 CPU
// without VNNI runs the AVX2 kernel.
QGemmKernel best_q_kernel() {
  const CpuPath path = active_cpu_path();
  if (path == CpuPath::Avx512 && q_kernel_supported(QGemmKernel::Avx512Vnni))
    return QGemmKernel::Avx512Vnni;
  if (path != CpuPath::Portable && q_kernel_supported(QGemmKernel::Avx2)) return QGemmKernel::Avx2;
  return QGemmKernel::Portable;
}

namespace {

// How one weight of a call runs: the row-group, packed or a per-block range kernel, and
// the columns a thread takes at a time (the row groups' 16, or 32 for AVX-512's prefill
// tiles; the packed kernel's 32-wide panels; else the widest tile's 4 weight rows).
struct QPlan {
  bool groups = false, packed = false;
  bool fp4_order = false;  // x quantized in fp4_order (the per-block FP4 kernels' order)
  void (*range)(const QGemmArgs&, int64_t, int64_t) = gemm_q8_range_portable;
  int64_t unit = 4;
};

QPlan plan_for(const GemmParams& p, int64_t m, QGemmKernel kernel) {
  QPlan q;
  const bool fp4 = p.w.format == WeightFormat::FP4;
  // The packed kernel has no FP4 (FP4 without row groups is int8 only up to
  // kInt8MaxRows); the row-group ones have.
  const bool avx2 = kernel == QGemmKernel::Avx2 || kernel == QGemmKernel::Avx2Groups;
  // AMX-INT8 takes the row groups' prefill (gemm_q8_groups_amx.cpp) where the CPU has
  // it; named, at any M (the tests' and benchmarks' choice).
  const bool amx = kernel == QGemmKernel::AmxGroups || kernel == QGemmKernel::AmxGroupsEmulated ||
                   (kernel == QGemmKernel::Avx512Vnni && m > kGroupsDecodeMaxRows &&
                    cpu_features().amx_int8);
  const bool named_groups = kernel == QGemmKernel::Avx512VnniGroups ||
                            kernel == QGemmKernel::AmxGroups ||
                            kernel == QGemmKernel::AmxGroupsEmulated;
  // Both ISAs read the row groups at any M where the weight has them (no per-call
  // repack; AVX2: faster than its per-block tiles everywhere measured).
  q.groups = p.w.groups != nullptr && (avx2 || named_groups || kernel == QGemmKernel::Avx512Vnni);
  // The row groups hold columns k and k + 16 in one byte, as Q4_0 blocks do: x in order.
  q.fp4_order = fp4 && !q.groups && kernel != QGemmKernel::Portable;
  q.packed = !fp4 && !q.groups &&
             (kernel == QGemmKernel::Avx512VnniPacked || named_groups ||
              (kernel == QGemmKernel::Avx512Vnni && m >= kPackedMinRows));
  if (q.groups) {
    q.range = avx2                                           ? gemm_q8_groups_avx2
              : kernel == QGemmKernel::AmxGroupsEmulated ? gemm_q8_groups_amx_emulated
              : amx                                          ? gemm_q8_groups_amx
                                                             : gemm_q8_groups_avx512;
    // AVX-512's prefill tiles and AMX's are 2 groups wide: chunks of whole tiles (a chunk
    // of one group, which the pool's shrinking chunks would hand out, runs a tile half as
    // wide).
    q.unit = !avx2 && (amx || m > kGroupsDecodeMaxRows) ? 2 * kGroupRows : kGroupRows;
  } else if (q.packed) {
    q.range = gemm_q8_range_avx512_packed;
    q.unit = 32;
  } else if (kernel == QGemmKernel::Avx512Vnni || kernel == QGemmKernel::Avx512VnniPacked ||
             named_groups) {
    q.range = gemm_q8_range_avx512;
  } else if (avx2) {
    q.range = gemm_q8_range_avx2;
  }
  return q;
}

}  // namespace

void gemm_q8(const GemmParams& p, QGemmKernel kernel) { gemm_q8_shared_x({&p, 1}, kernel); }

void gemm_q8_shared_x(std::span<const GemmParams> ps, QGemmKernel kernel) {
  gemm_q8_grouped(ps, kernel);
}

namespace {

// Whether b's activations, quantized, are a's: the same x rows in the same byte order.
bool same_quantized_x(const GemmParams& a, const QPlan& pa, const GemmParams& b, const QPlan& pb) {
  const GemmShape sa = gemm_shape(a), sb = gemm_shape(b);
  return a.x == b.x && sa.m == sb.m && sa.k == sb.k && sa.ldx == sb.ldx && pa.fp4_order == pb.fp4_order;
}

// Where one run of GEMMs over the same x has its quantized x in the call's buffer: q [m,
// k], then d [m, blocks], then off [m, blocks, 8], then sum [m, blocks] (each where some
// weight of the call wants it), each part 64-byte aligned.
struct QuantizedAt {
  int64_t q, d, off, sum, end;
};
QuantizedAt quantized_at(const GemmShape& sh, int64_t at, bool q4_off, bool sums) {
  const int64_t blocks = sh.k / kQBlock;
  QuantizedAt r;
  r.q = at;
  r.d = r.q + (sh.m * sh.k + 63) / 64 * 64;
  r.off = r.d + (sh.m * blocks * 4 + 63) / 64 * 64;
  r.sum = r.off + (q4_off ? sh.m * blocks * 32 : 0);
  r.end = r.sum + (sums ? (sh.m * blocks * 4 + 63) / 64 * 64 : 0);
  return r;
}

// p's x quantized to q, d, off, sum (where not null; quantized_at's parts) on the
// kernel's path, its rows split between the pool's threads (each row's bytes are the
// same either way).
void quantize_x(const GemmParams& p, const GemmShape& sh, QGemmKernel kernel, bool fp4_order, int8_t* q,
                float* d, int32_t* off, int32_t* sum) {
  const int64_t blocks = sh.k / kQBlock;
  const bool avx2 = kernel == QGemmKernel::Avx2 || kernel == QGemmKernel::Avx2Groups;
  const auto quantize = kernel == QGemmKernel::Portable ? quantize_rows_q8
                        : avx2                          ? quantize_rows_q8_avx2
                                                        : quantize_rows_q8_avx512;
  parallel_for(sh.m, std::max<int64_t>(1, (int64_t{1} << 14) / sh.k), [&](int64_t r0, int64_t r1) {
    quantize(p.x + r0 * sh.ldx, r1 - r0, sh.k, sh.ldx, q + r0 * sh.k, d + r0 * blocks,
             off ? off + r0 * blocks * 8 : nullptr, sum ? sum + r0 * blocks : nullptr, fp4_order);
  });
}

}  // namespace

void gemm_q8_grouped(std::span<const GemmParams> ps, QGemmKernel kernel) {
  scratch_vector<QPlan> plans(ps.size());
  bool sums = false, q4_off = false;
  for (size_t i = 0; i < ps.size(); ++i) {
    plans[i] = plan_for(ps[i], ps[i].m, kernel);
    if (!plans[i].groups) require_data(ps[i].w, to_string(kernel));
    // The packed and row-group kernels want the block sums, the others (Q4_0) the
    // per-lane offsets.
    const bool wants_sums = plans[i].groups || plans[i].packed;
    sums |= wants_sums;
    q4_off |= !wants_sums && ps[i].w.format == WeightFormat::Q4_0;
  }
  // A run of consecutive GEMMs over the same x shares one quantized x: first[i] is the
  // first GEMM of i's run, at[first] where its parts start in the one scratch buffer.
  scratch_vector<size_t> first(ps.size());
  scratch_vector<QuantizedAt> at(ps.size());
  int64_t bytes = 0;
  for (size_t i = 0; i < ps.size(); ++i) {
    first[i] = i > 0 && same_quantized_x(ps[i - 1], plans[i - 1], ps[i], plans[i]) ? first[i - 1] : i;
    if (first[i] != i) continue;
    at[i] = quantized_at(gemm_shape(ps[i]), bytes, q4_off, sums);
    bytes = at[i].end;
  }
  uint8_t* buf = gemm_x_scratch().get<uint8_t>(bytes);
  scratch_vector<QGemmArgs> args(ps.size());
  scratch_vector<int64_t> unit_end(ps.size());  // units of weights [0, i]
  int64_t units = 0;
  for (size_t i = 0; i < ps.size(); ++i) {
    const GemmParams& p = ps[i];
    const GemmShape sh = gemm_shape(p);
    const bool fp4 = p.w.format == WeightFormat::FP4;
    const QuantizedAt& where = at[first[i]];
    int8_t* q = reinterpret_cast<int8_t*>(buf + where.q);
    float* d = reinterpret_cast<float*>(buf + where.d);
    int32_t* off = q4_off ? reinterpret_cast<int32_t*>(buf + where.off) : nullptr;
    int32_t* sum = sums ? reinterpret_cast<int32_t*>(buf + where.sum) : nullptr;
    if (first[i] == i && sh.m > 0 && sh.k > 0) quantize_x(p, sh, kernel, plans[i].fp4_order, q, d, off, sum);
    unit_end[i] = units;
    if (sh.m == 0 || sh.k == 0 || sh.n == 0) {
      gemm_trivial(p, sh);
      continue;
    }
    QGemmArgs& a = args[i];
    a.x = {q, d, off, sum, sh.m, sh.k};
    a.format = p.w.format;
    a.w = static_cast<const uint8_t*>(p.w.data);
    a.scale = fp4 ? p.w.scale : nullptr;
    a.scale_value = fp4_int8_scales();
    a.groups = p.w.groups;
    a.row_bytes = fp4 ? sh.k / 2 : ggml_row_bytes(p.w.format, sh.k);
    a.y = p.y;
    a.ldy = sh.ldy;
    a.accumulate = p.accumulate;
    units += (sh.n + plans[i].unit - 1) / plans[i].unit;
    unit_end[i] = units;
  }
  // Threads take runs of units across all the weights: one fork-join for the call (the
  // first weight's chunk size, as a call of its own would take).
  if (units > 0) {
    const int64_t min_units = gemm_min_chunk(gemm_shape(ps[0]), plans[0].unit) / plans[0].unit;
    parallel_for(units, min_units, [&](int64_t u0, int64_t u1) {
      for_each_weight_run(unit_end, u0, u1, [&](size_t i, int64_t a, int64_t b) {
        const int64_t unit = plans[i].unit;
        plans[i].range(args[i], a * unit, std::min(ps[i].w.rows, b * unit));
      });
    });
  }
  gemm_x_scratch().trim(kKeepScratchBytes);
}

}  // namespace troupe::kernels::cpu

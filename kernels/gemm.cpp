// gemm(): validates GemmParams at the op boundary, then dispatches to the backend.
#include "kernels/gemm.h"

#include "kernels/check.h"
#include "kernels/dispatch.h"

namespace troupe::kernels {
namespace {

void validate(const GemmParams& p) {
  const WeightView& w = p.w;
  TROUPE_CHECK(p.m >= 0, "gemm: m (", p.m, ") must be >= 0");
  TROUPE_CHECK(w.rows >= 0 && w.cols >= 0, "gemm: w shape [", w.rows, ", ", w.cols,
               "] must be non-negative");
  const int64_t ldx = p.ldx ? p.ldx : w.cols, ldy = p.ldy ? p.ldy : w.rows;
  TROUPE_CHECK(ldx >= w.cols, "gemm: ldx (", p.ldx, ") must be >= K (", w.cols, ")");
  TROUPE_CHECK(ldy >= w.rows, "gemm: ldy (", p.ldy, ") must be >= N (", w.rows, ")");
  TROUPE_CHECK(p.precision == GemmPrecision::F32 || p.precision == GemmPrecision::Bf16 ||
                   p.precision == GemmPrecision::Int8,
               "gemm: unknown precision ", static_cast<int>(p.precision));
  const bool scaled = w.format == WeightFormat::FP8 || w.format == WeightFormat::FP4 ||
                      w.format == WeightFormat::ROWFP8;
  TROUPE_CHECK(scaled || is_ggml_block(w.format) || w.format == WeightFormat::F32 ||
                   w.format == WeightFormat::BF16 || w.format == WeightFormat::F16,
               "gemm: unknown weight format ", static_cast<int>(w.format));
  if (w.format == WeightFormat::FP4 || w.format == WeightFormat::ROWFP8 || is_ggml_block(w.format))
    TROUPE_CHECK(w.cols % 32 == 0, "gemm: w.cols (", w.cols, ") must be a multiple of 32 for ",
                 to_string(w.format));
  if (p.m > 0) {
    TROUPE_CHECK(p.x != nullptr || w.cols == 0, "gemm: x is null with m = ", p.m);
    TROUPE_CHECK(p.y != nullptr || w.rows == 0, "gemm: y is null with m = ", p.m);
  }
  if (w.rows > 0 && w.cols > 0) {
    // A Q8_0 / Q4_0 matrix regrouped in place, or FP4 experts whose checkpoint bytes were
    // given back (model/row_groups_copy.h), have only their groups: only an int8 GEMM
    // reads them (cpu::gemm_q8 checks that its kernel is a row-group one).
    const bool groups_only = w.data == nullptr && reads_row_groups(w, p.precision);
    TROUPE_CHECK(w.data != nullptr || groups_only, "gemm: w.data is null (", to_string(w.format),
                 w.groups ? ": only its row groups are kept, which only GemmPrecision::Int8 reads" : "", ")");
    TROUPE_CHECK(!scaled || w.scale != nullptr || groups_only, "gemm: w.scale is null (",
                 to_string(w.format), ")");
  }
}

}  // namespace

void gemm(const GemmParams& p) {
  validate(p);
  switch (active_backend()) {
    case Backend::Ref:
      return ref::gemm(p);
    case Backend::Cpu:
      return cpu::gemm(p);
    case Backend::Cuda:
      // No int8 FP4 kernel there: refused rather than run with other numerics unasked.
      TROUPE_CHECK(!fp4_on_int8(p), "gemm: GemmPrecision::Int8 FP4 runs on the CPU backend only");
      return cuda::gemm(p);
  }
}

void gemm_shared_x(std::span<const GemmParams> ps) {
  for (const GemmParams& p : ps) {
    validate(p);
    TROUPE_CHECK(p.x == ps[0].x && p.m == ps[0].m && p.precision == ps[0].precision &&
                     (p.ldx ? p.ldx : p.w.cols) == (ps[0].ldx ? ps[0].ldx : ps[0].w.cols) &&
                     p.w.cols == ps[0].w.cols,
                 "gemm_shared_x: every GEMM must share x, m, ldx, K and precision");
  }
  if (active_backend() == Backend::Cpu) return cpu::gemm_shared_x(ps);
  for (const GemmParams& p : ps) gemm(p);
}

void gemm_grouped(std::span<const GemmParams> ps) {
  for (const GemmParams& p : ps) validate(p);
  if (active_backend() == Backend::Cpu) return cpu::gemm_grouped(ps);
  for (const GemmParams& p : ps) gemm(p);
}

}  // namespace troupe::kernels

// Exact scalar dequantization of stored weight rows (MODEL.md §2 layouts, §3 values).
// Every product code·scale is exact in f32, so this is the definition the fast GEMM
// paths are compared against.
#include "kernels/weights.h"

#include <algorithm>
#include <cstring>

#include "kernels/check.h"
#include "kernels/ggml_blocks.h"
#include "kernels/q8_row_groups.h"
#include "kernels/quant.h"

namespace troupe::kernels {

const char* to_string(WeightFormat f) {
  switch (f) {
    case WeightFormat::F32:
      return "F32";
    case WeightFormat::BF16:
      return "BF16";
    case WeightFormat::F16:
      return "F16";
    case WeightFormat::FP8:
      return "FP8";
    case WeightFormat::FP4:
      return "FP4";
    case WeightFormat::ROWFP8:
      return "ROWFP8";
    case WeightFormat::Q8_0:
      return "Q8_0";
    case WeightFormat::Q4_0:
      return "Q4_0";
  }
  return "?";
}

bool e4m3_nan_free(const uint8_t* codes, int64_t n) {
  // The largest code without its sign, per 64 KiB: a loop the compiler vectorises.
  for (int64_t i = 0; i < n; i += 65536) {
    uint8_t most = 0;
    for (int64_t j = i; j < std::min(n, i + 65536); ++j)
      most = std::max<uint8_t>(most, codes[j] & 0x7F);
    if (most == 0x7F) return false;
  }
  return true;
}

int64_t data_bytes(const WeightView& w) {
  switch (w.format) {
    case WeightFormat::F32:
      return w.rows * w.cols * 4;
    case WeightFormat::BF16:
    case WeightFormat::F16:
      return w.rows * w.cols * 2;
    case WeightFormat::FP8:
    case WeightFormat::ROWFP8:
      return w.rows * w.cols;
    case WeightFormat::FP4:
      return w.rows * w.cols / 2;
    case WeightFormat::Q8_0:
    case WeightFormat::Q4_0:  // blocks with their f16 scales inline
      return w.rows * ggml_row_bytes(w.format, w.cols);
  }
  return 0;
}

int64_t scale_bytes(const WeightView& w) {
  switch (w.format) {
    case WeightFormat::F32:
    case WeightFormat::BF16:
    case WeightFormat::F16:
    case WeightFormat::Q8_0:
    case WeightFormat::Q4_0:
      return 0;
    case WeightFormat::FP8:
      return ((w.rows + 31) / 32) * ((w.cols + 31) / 32);
    case WeightFormat::FP4:
    case WeightFormat::ROWFP8:
      return w.rows * (w.cols / 32);
  }
  return 0;
}

namespace {
int64_t groups_bytes(const WeightView& w) { return w.groups ? q8_row_groups_bytes(w) : 0; }

// The codes and scales a copy takes: none for a matrix whose groups are all there is
// (a GGUF matrix regrouped in place; FP4 experts whose checkpoint bytes were given back).
bool groups_only(const WeightView& w) { return w.data == nullptr && w.groups != nullptr; }
int64_t copied_data_bytes(const WeightView& w) { return groups_only(w) ? 0 : data_bytes(w); }
int64_t copied_scale_bytes(const WeightView& w) { return groups_only(w) ? 0 : scale_bytes(w); }
}  // namespace

int64_t copied_bytes(const WeightView& w) {
  return (copied_data_bytes(w) + 63) / 64 * 64 + (copied_scale_bytes(w) + 63) / 64 * 64 +
         (groups_bytes(w) + 63) / 64 * 64;
}

WeightView copy_weight(const WeightView& w, std::byte* dst) {
  const int64_t data = copied_data_bytes(w), scale = copied_scale_bytes(w);
  TROUPE_CHECK(has_bytes(w) && (scale == 0 || w.scale != nullptr),
               "copy_weight: a ", to_string(w.format), " weight without its bytes");
  TROUPE_CHECK(reinterpret_cast<uintptr_t>(dst) % 64 == 0, "copy_weight: dst is not 64-byte aligned");
  WeightView c = w;
  if (data > 0) {
    std::memcpy(dst, w.data, static_cast<size_t>(data));
    c.data = dst;
  }
  if (scale > 0) {
    std::byte* s = dst + (data + 63) / 64 * 64;
    std::memcpy(s, w.scale, static_cast<size_t>(scale));
    c.scale = reinterpret_cast<const uint8_t*>(s);
  }
  // The row groups too, so a copy runs the same GEMM kernel as the original (bit for bit).
  if (const int64_t groups = groups_bytes(w); groups > 0) {
    std::byte* g = dst + (data + 63) / 64 * 64 + (scale + 63) / 64 * 64;
    std::memcpy(g, w.groups, static_cast<size_t>(groups));
    c.groups = reinterpret_cast<const uint8_t*>(g);
  }
  return c;
}

namespace {

void check_view(const WeightView& w, int64_t r0, int64_t n, const float* out) {
  TROUPE_CHECK(w.rows >= 0 && w.cols >= 0, "dequantize_rows: negative shape [", w.rows, ", ",
               w.cols, "]");
  TROUPE_CHECK(r0 >= 0 && n >= 0 && r0 + n <= w.rows, "dequantize_rows: rows [", r0, ", ", r0 + n,
               ") outside [0, ", w.rows, ")");
  if (n == 0 || w.cols == 0) return;
  TROUPE_CHECK(w.data != nullptr, "dequantize_rows: w.data is null (", to_string(w.format),
               w.groups ? ", regrouped in place: only the row-group GEMM reads it" : "", ")");
  TROUPE_CHECK(out != nullptr, "dequantize_rows: out is null");
  const bool scaled = w.format == WeightFormat::FP8 || w.format == WeightFormat::FP4 ||
                      w.format == WeightFormat::ROWFP8;
  TROUPE_CHECK(!scaled || w.scale != nullptr, "dequantize_rows: w.scale is null (",
               to_string(w.format), ")");
  const bool row_blocks = w.format == WeightFormat::FP4 || w.format == WeightFormat::ROWFP8 ||
                          is_ggml_block(w.format);
  TROUPE_CHECK(!row_blocks || w.cols % 32 == 0, "dequantize_rows: w.cols (", w.cols,
               ") must be a multiple of 32 for ", to_string(w.format));
}

// E4M3 codes of one row times the UE8M0 scale of each 32-column block (the last
// block may be short: FP8 allows ragged column counts).
void dequant_e4m3_row(const uint8_t* q, const uint8_t* scale_row, int64_t cols, float* out) {
  const float* t = e4m3_table();
  for (int64_t c0 = 0; c0 < cols; c0 += 32) {
    const float s = ue8m0_decode(scale_row[c0 / 32]);
    const int64_t end = std::min<int64_t>(c0 + 32, cols);
    for (int64_t c = c0; c < end; ++c) out[c] = t[q[c]] * s;
  }
}

// FP8: E4M3 [rows, cols], UE8M0 scale [ceil(rows/32), ceil(cols/32)].
void dequant_fp8_row(const WeightView& w, int64_t r, float* out) {
  const uint8_t* q = static_cast<const uint8_t*>(w.data) + r * w.cols;
  dequant_e4m3_row(q, w.scale + (r / 32) * ((w.cols + 31) / 32), w.cols, out);
}

// ROWFP8: E4M3 [rows, cols], UE8M0 scale [rows, cols/32].
void dequant_rowfp8_row(const WeightView& w, int64_t r, float* out) {
  const uint8_t* q = static_cast<const uint8_t*>(w.data) + r * w.cols;
  dequant_e4m3_row(q, w.scale + r * (w.cols / 32), w.cols, out);
}

// FP4: packed E2M1 [rows, cols/2] (even column in the low nibble), scale [rows, cols/32].
void dequant_fp4_row(const WeightView& w, int64_t r, float* out) {
  const uint8_t* q = static_cast<const uint8_t*>(w.data) + r * (w.cols / 2);
  const uint8_t* scale_row = w.scale + r * (w.cols / 32);
  const float* t = e2m1_table();
  for (int64_t c0 = 0; c0 < w.cols; c0 += 32) {
    const float s = ue8m0_decode(scale_row[c0 / 32]);
    for (int64_t c = c0; c < c0 + 32; c += 2) {
      out[c] = t[q[c / 2] & 0xF] * s;
      out[c + 1] = t[q[c / 2] >> 4] * s;
    }
  }
}

void dequant_bf16_row(const WeightView& w, int64_t r, float* out) {
  const uint16_t* q = static_cast<const uint16_t*>(w.data) + r * w.cols;
  for (int64_t c = 0; c < w.cols; ++c) out[c] = bf16_decode(q[c]);
}

void dequant_f16_row(const WeightView& w, int64_t r, float* out) {
  const uint16_t* q = static_cast<const uint16_t*>(w.data) + r * w.cols;
  for (int64_t c = 0; c < w.cols; ++c) out[c] = f16_decode(q[c]);
}

void dequant_ggml_row(const WeightView& w, int64_t r, float* out) {
  const uint8_t* row = static_cast<const uint8_t*>(w.data) + r * ggml_row_bytes(w.format, w.cols);
  if (w.format == WeightFormat::Q8_0) dequant_q8_0_row(row, w.cols, out);
  else dequant_q4_0_row(row, w.cols, out);
}

void dequant_f32_row(const WeightView& w, int64_t r, float* out) {
  const float* q = static_cast<const float*>(w.data) + r * w.cols;
  std::memcpy(out, q, static_cast<size_t>(w.cols) * sizeof(float));
}

}  // namespace

void dequantize_rows(const WeightView& w, int64_t r0, int64_t n, float* out) {
  check_view(w, r0, n, out);
  if (n == 0 || w.cols == 0) return;
  void (*row_fn)(const WeightView&, int64_t, float*) = nullptr;
  switch (w.format) {
    case WeightFormat::F32:
      row_fn = dequant_f32_row;
      break;
    case WeightFormat::BF16:
      row_fn = dequant_bf16_row;
      break;
    case WeightFormat::F16:
      row_fn = dequant_f16_row;
      break;
    case WeightFormat::FP8:
      row_fn = dequant_fp8_row;
      break;
    case WeightFormat::FP4:
      row_fn = dequant_fp4_row;
      break;
    case WeightFormat::ROWFP8:
      row_fn = dequant_rowfp8_row;
      break;
    case WeightFormat::Q8_0:
    case WeightFormat::Q4_0:
      row_fn = dequant_ggml_row;
      break;
  }
  TROUPE_CHECK(row_fn != nullptr, "dequantize_rows: unknown format ", static_cast<int>(w.format));
  for (int64_t i = 0; i < n; ++i) row_fn(w, r0 + i, out + i * w.cols);
}

}  // namespace troupe::kernels

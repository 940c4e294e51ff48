// A view of one stored weight matrix in any of MODEL.md §2's formats, as the GEMM
// kernels consume it. Shape is [rows = out, cols = in]; y = W·x.
#pragma once

#include <cstddef>
#include <cstdint>

namespace troupe::kernels {

enum class WeightFormat : uint8_t {
  F32,     // float [rows, cols]
  BF16,    // uint16 [rows, cols]
  F16,     // IEEE half [rows, cols], no scale (GGUF f16 tensors, read in place)
  FP8,     // E4M3 [rows, cols] + UE8M0 scale [ceil(rows/32), ceil(cols/32)] (32x32 blocks)
  FP4,     // packed E2M1 [rows, cols/2] + UE8M0 scale [rows, cols/32]
  ROWFP8,  // E4M3 [rows, cols] + UE8M0 scale [rows, cols/32]
  Q8_0,    // GGUF q8_0 blocks [rows, cols/32] of 34 bytes, no scale (kernels/ggml_blocks.h)
  Q4_0,    // GGUF q4_0 blocks [rows, cols/32] of 18 bytes, no scale
};

const char* to_string(WeightFormat f);

struct WeightView {
  WeightFormat format = WeightFormat::F32;
  int64_t rows = 0;               // out features
  int64_t cols = 0;               // in features
  const void* data = nullptr;     // layout per format above, row-major
  const uint8_t* scale = nullptr; // UE8M0 codes (FP8, FP4, ROWFP8), else null
  // Q8_0 / Q4_0 / FP4 only: the same matrix regrouped 16 rows at a time
  // (kernels/q8_row_groups.h) for the int8 row-group kernels, or null. `data` stays the
  // GGUF (FP4: codes and `scale`) layout either way, unless regrouped in place.
  const uint8_t* groups = nullptr;
  // FP8 / ROWFP8 only: true where whoever made the view checked that `data` holds no NaN
  // code (0x7F / 0xFF, e4m3_nan_free), so the GEMMs skip their NaN test per block: on
  // AVX2 that test's two registers pushed a decode tile's accumulators onto the stack.
  // False, the default, is always correct: the kernels then look for NaN codes.
  bool no_nan_codes = false;
};

// Whether none of the n E4M3 codes at `codes` is a NaN (0x7F / 0xFF).
bool e4m3_nan_free(const uint8_t* codes, int64_t n);

// Bytes of a view's codes and of its UE8M0 scales as stored (the layouts above; 0 scale
// bytes for F32, BF16 and F16), e.g. to copy a weight into memory of its own.
int64_t data_bytes(const WeightView& w);
int64_t scale_bytes(const WeightView& w);
// Bytes copy_weight uses: the codes, then the scales, then the row groups where w has
// them, each padded to 64 bytes (so copies placed one after another all start 64-byte
// aligned).
int64_t copied_bytes(const WeightView& w);
// Copies w's codes and scales into dst (64-byte aligned, copied_bytes(w) long) and
// returns the view of the copy.
WeightView copy_weight(const WeightView& w, std::byte* dst);
// GGUF block formats (Q8_0, Q4_0): the GEMM multiplies them on int8 dot products with
// the activations quantized to q8_0 (kernels/ggml_blocks.h), not in f32.
inline bool is_ggml_block(WeightFormat f) { return f == WeightFormat::Q8_0 || f == WeightFormat::Q4_0; }
// Bytes of one stored row of a GGUF block format (cols % 32 == 0).
inline int64_t ggml_row_bytes(WeightFormat f, int64_t cols) {
  return cols / 32 * (f == WeightFormat::Q8_0 ? 34 : 18);
}

// Dequantizes rows [r0, r0+n) to f32 (exact, §3): out[n, cols].
void dequantize_rows(const WeightView& w, int64_t r0, int64_t n, float* out);

}  // namespace troupe::kernels

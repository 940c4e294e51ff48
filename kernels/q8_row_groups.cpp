#include "kernels/q8_row_groups.h"

#include <cstring>
#include <vector>

#include "kernels/check.h"
#include "kernels/cpu/gemm_q8.h"
#include "kernels/ggml_blocks.h"
#include "kernels/parallel.h"

namespace troupe::kernels {
namespace {

// The stored code of value k (0..31) of one GGUF block, as the regrouped layout keeps it.
uint8_t q8_code(const uint8_t* blk, int k) { return static_cast<uint8_t>(blk[2 + k] ^ 0x80); }
uint8_t q4_nibble(const uint8_t* blk, int k) {
  return k < 16 ? blk[2 + k] & 0x0F : blk[2 + k - 16] >> 4;
}
// FP4 stores column 2i in byte i's low nibble and 2i + 1 in its high one (weights.h).
uint8_t fp4_code(const uint8_t* blk, int k) { return k % 2 == 0 ? blk[k / 2] & 0x0F : blk[k / 2] >> 4; }

}  // namespace

int64_t q8_group_block_bytes(WeightFormat f) {
  // FP4: a block's 16 code bytes and its UE8M0 byte per row.
  return kGroupRows * (f == WeightFormat::Q8_0 ? kQ8_0Bytes : f == WeightFormat::Q4_0 ? kQ4_0Bytes : kQBlock / 2 + 1);
}

int64_t q8_row_groups_bytes(const WeightView& w) {
  const int64_t groups = (w.rows + kGroupRows - 1) / kGroupRows;
  return groups * (w.cols / kQBlock) * q8_group_block_bytes(w.format);
}

namespace {

// Group g of w (rows 16g .. 16g + 15 at w.data; rows past w.rows are padding) in the
// row-group layout at dst (its blocks · q8_group_block_bytes bytes).
void pack_group(const WeightView& w, int64_t g, uint8_t* dst_group) {
  const bool q8 = w.format == WeightFormat::Q8_0, fp4 = w.format == WeightFormat::FP4;
  const int64_t blocks = w.cols / kQBlock;
  const int64_t row_bytes = fp4 ? w.cols / 2 : ggml_row_bytes(w.format, w.cols);
  const int64_t src_block_bytes = fp4 ? kQBlock / 2 : q8 ? kQ8_0Bytes : kQ4_0Bytes;
  const int64_t block_bytes = q8_group_block_bytes(w.format);
  const int64_t data_bytes = block_bytes - (fp4 ? 1 : 2) * kGroupRows;
  const auto* src = static_cast<const uint8_t*>(w.data);
  std::memset(dst_group, 0, static_cast<size_t>(blocks * block_bytes));  // padding rows: 0
  for (int64_t j = 0; j < kGroupRows && g * kGroupRows + j < w.rows; ++j) {
    const int64_t row = g * kGroupRows + j;
    for (int64_t b = 0; b < blocks; ++b) {
      const uint8_t* blk = src + row * row_bytes + b * src_block_bytes;
      uint8_t* dst = dst_group + b * block_bytes;
      for (int c = 0; c < (q8 ? 8 : 4); ++c)
        for (int t = 0; t < 4; ++t) {
          const int k = 4 * c + t;
          dst[(c * kGroupRows + j) * 4 + t] =
              q8    ? q8_code(blk, k)
              : fp4 ? static_cast<uint8_t>(fp4_code(blk, k) | fp4_code(blk, k + 16) << 4)
                    : static_cast<uint8_t>(q4_nibble(blk, k) | q4_nibble(blk, k + 16) << 4);
        }
      if (fp4) dst[data_bytes + j] = w.scale[row * blocks + b];
      else std::memcpy(dst + data_bytes + 2 * j, blk, 2);  // the f16 scale's bits
    }
  }
}

void check_blocks(const WeightView& w, const char* fn, bool fp4_ok) {
  TROUPE_CHECK((is_ggml_block(w.format) || (fp4_ok && w.format == WeightFormat::FP4)) && w.cols % kQBlock == 0,
               fn, fp4_ok ? ": a Q8_0, Q4_0 or FP4" : ": a Q8_0 or Q4_0", " matrix of whole blocks, not ",
               to_string(w.format));
  TROUPE_CHECK(w.data != nullptr || w.rows == 0, fn, ": the matrix's bytes are null");
  TROUPE_CHECK(w.format != WeightFormat::FP4 || w.scale != nullptr || w.rows == 0, fn,
               ": the FP4 matrix's scales are null");
}

}  // namespace

void pack_q8_row_groups(const WeightView& w, uint8_t* out) {
  check_blocks(w, "pack_q8_row_groups", true);
  const int64_t group_bytes = w.cols / kQBlock * q8_group_block_bytes(w.format);
  parallel_for((w.rows + kGroupRows - 1) / kGroupRows, 1, [&](int64_t g0, int64_t g1) {
    for (int64_t g = g0; g < g1; ++g) pack_group(w, g, out + g * group_bytes);
  });
}

const uint8_t* regroup_q8_in_place(const WeightView& w, uint8_t* data) {
  check_blocks(w, "regroup_q8_in_place", false);
  TROUPE_CHECK(w.rows % kGroupRows == 0, "regroup_q8_in_place: ", w.rows,
               " rows, not a multiple of ", kGroupRows, " (the last group would outgrow the matrix)");
  TROUPE_CHECK(static_cast<const void*>(data) == w.data, "regroup_q8_in_place: data is not w.data");
  const int64_t group_bytes = w.cols / kQBlock * q8_group_block_bytes(w.format);
  // Group g is exactly the bytes of its own 16 GGUF rows: packed into a buffer, then copied
  // over them; no other group reads those rows, so threads take groups independently.
  parallel_for(w.rows / kGroupRows, 1, [&](int64_t g0, int64_t g1) {
    std::vector<uint8_t> buf(static_cast<size_t>(group_bytes));
    for (int64_t g = g0; g < g1; ++g) {
      pack_group(w, g, buf.data());
      std::memcpy(data + g * group_bytes, buf.data(), buf.size());
    }
  });
  return data;
}

void require_data(const WeightView& w, const char* who) {
  TROUPE_CHECK(w.data != nullptr || w.groups == nullptr || w.rows == 0, who, ": this ", to_string(w.format),
               " matrix was regrouped in place (no GGUF blocks left), and only the row-group kernels "
               "read it");
}

bool q8_row_groups_used() {
  const cpu::QGemmKernel k = cpu::best_q_kernel();
  return k == cpu::QGemmKernel::Avx512Vnni || k == cpu::QGemmKernel::Avx2;
}

}  // namespace troupe::kernels

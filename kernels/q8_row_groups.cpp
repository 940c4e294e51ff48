#include "kernels/q8_row_groups.h"

#include <cstring>

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

}  // namespace

int64_t q8_group_block_bytes(WeightFormat f) {
  return kGroupRows * (f == WeightFormat::Q8_0 ? kQ8_0Bytes : kQ4_0Bytes);
}

int64_t q8_row_groups_bytes(const WeightView& w) {
  const int64_t groups = (w.rows + kGroupRows - 1) / kGroupRows;
  return groups * (w.cols / kQBlock) * q8_group_block_bytes(w.format);
}

void pack_q8_row_groups(const WeightView& w, uint8_t* out) {
  TROUPE_CHECK(is_ggml_block(w.format) && w.cols % kQBlock == 0,
               "pack_q8_row_groups: a Q8_0 or Q4_0 matrix of whole blocks, not ", to_string(w.format));
  const bool q8 = w.format == WeightFormat::Q8_0;
  const int64_t blocks = w.cols / kQBlock, row_bytes = ggml_row_bytes(w.format, w.cols);
  const int64_t block_bytes = q8_group_block_bytes(w.format), data_bytes = block_bytes - 2 * kGroupRows;
  const int64_t groups = (w.rows + kGroupRows - 1) / kGroupRows;
  const auto* src = static_cast<const uint8_t*>(w.data);
  parallel_for(groups, 1, [&](int64_t g0, int64_t g1) {
    for (int64_t g = g0; g < g1; ++g) {
      uint8_t* group = out + g * blocks * block_bytes;
      std::memset(group, 0, static_cast<size_t>(blocks * block_bytes));  // padding rows: 0
      for (int64_t j = 0; j < kGroupRows && g * kGroupRows + j < w.rows; ++j) {
        const uint8_t* row = src + (g * kGroupRows + j) * row_bytes;
        for (int64_t b = 0; b < blocks; ++b) {
          const uint8_t* blk = row + b * (q8 ? kQ8_0Bytes : kQ4_0Bytes);
          uint8_t* dst = group + b * block_bytes;
          for (int c = 0; c < (q8 ? 8 : 4); ++c)
            for (int t = 0; t < 4; ++t) {
              const int k = 4 * c + t;
              dst[(c * kGroupRows + j) * 4 + t] =
                  q8 ? q8_code(blk, k)
                     : static_cast<uint8_t>(q4_nibble(blk, k) | q4_nibble(blk, k + 16) << 4);
            }
          std::memcpy(dst + data_bytes + 2 * j, blk, 2);  // the f16 scale's bits
        }
      }
    }
  });
}

bool q8_row_groups_used() {
  const cpu::QGemmKernel k = cpu::best_q_kernel();
  return k == cpu::QGemmKernel::Avx512Vnni || k == cpu::QGemmKernel::Avx2;
}

}  // namespace troupe::kernels

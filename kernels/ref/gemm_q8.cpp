// ref::gemm_q8: the Q8_0 / Q4_0 GEMM as kernels/ggml_blocks.h defines it, one output at
// a time: x rows quantized by ref::quantize_row_q8, each block's integer dot product
// exact, the blocks' dw · dx · sum added in f32 in block order.
#include <cstring>
#include <vector>

#include "kernels/gemm.h"
#include "kernels/ggml_blocks.h"

namespace troupe::kernels::ref {
namespace {

float block_scale(const uint8_t* blk) {
  uint16_t h;
  std::memcpy(&h, blk, 2);
  return f16_decode(h);
}

// Σ w.q[i] · x.q[i] of one weight block and one activation block.
int32_t block_dot(WeightFormat f, const uint8_t* blk, const int8_t* xq) {
  int32_t sum = 0;
  if (f == WeightFormat::Q8_0) {
    const int8_t* wq = reinterpret_cast<const int8_t*>(blk + 2);
    for (int i = 0; i < kQBlock; ++i) sum += int32_t(wq[i]) * xq[i];
    return sum;
  }
  for (int i = 0; i < 16; ++i)
    sum += (int32_t(blk[2 + i] & 0xF) - 8) * xq[i] + (int32_t(blk[2 + i] >> 4) - 8) * xq[i + 16];
  return sum;
}

}  // namespace

void gemm_q8(const GemmParams& p) {
  const int64_t m_rows = p.m, n_cols = p.w.rows, k_len = p.w.cols, blocks = k_len / kQBlock;
  const int64_t ldx = p.ldx ? p.ldx : k_len, ldy = p.ldy ? p.ldy : n_cols;
  const int64_t block_bytes = p.w.format == WeightFormat::Q8_0 ? kQ8_0Bytes : kQ4_0Bytes;
  std::vector<int8_t> xq(static_cast<size_t>(m_rows * k_len));
  std::vector<float> xd(static_cast<size_t>(m_rows * blocks));
  for (int64_t m = 0; m < m_rows; ++m)
    quantize_row_q8(p.x + m * ldx, k_len, xq.data() + m * k_len, xd.data() + m * blocks);
  const uint8_t* w = static_cast<const uint8_t*>(p.w.data);
  for (int64_t n = 0; n < n_cols; ++n)
    for (int64_t m = 0; m < m_rows; ++m) {
      float s = 0;
      for (int64_t b = 0; b < blocks; ++b) {
        const uint8_t* blk = w + (n * blocks + b) * block_bytes;
        const int32_t dot = block_dot(p.w.format, blk, xq.data() + m * k_len + b * kQBlock);
        s += block_scale(blk) * xd[m * blocks + b] * float(dot);
      }
      float& y = p.y[m * ldy + n];
      y = p.accumulate ? y + s : s;
    }
}

}  // namespace troupe::kernels::ref

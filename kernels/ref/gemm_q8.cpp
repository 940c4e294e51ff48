// ref::gemm_q8: the GEMMs on q8_0 activations (kernels/ggml_blocks.h: Q8_0 / Q4_0
// weights, and FP4 weights under GemmPrecision::Int8), one output at a time: x rows
// quantized by ref::quantize_row_q8, each block's integer dot product exact, the blocks'
// dw · dx · sum added in f32 in block order.
#include <cstring>
#include <vector>

#include "kernels/gemm.h"
#include "kernels/ggml_blocks.h"
#include "kernels/q8_row_groups.h"
#include "kernels/quant.h"

namespace troupe::kernels::ref {
namespace {

// One weight block of 32 values as int8 codes and the f32 scale they are multiplied by.
struct IntBlock {
  int8_t q[kQBlock];
  float d;
};

IntBlock weight_block(const WeightView& w, int64_t row, int64_t b) {
  IntBlock out;
  const uint8_t* data = static_cast<const uint8_t*>(w.data);
  if (w.format == WeightFormat::FP4) {
    // 2 · E2M1 is an integer; the halving moves into the scale (2^(e-127) / 2, exact).
    const uint8_t* codes = data + row * (w.cols / 2) + b * (kQBlock / 2);
    for (int i = 0; i < kQBlock; ++i)
      out.q[i] = int8_t(2.0f * e2m1_decode(i % 2 ? codes[i / 2] >> 4 : codes[i / 2] & 0xF));
    out.d = 0.5f * ue8m0_decode(w.scale[row * (w.cols / kQBlock) + b]);
    return out;
  }
  const int64_t bytes = w.format == WeightFormat::Q8_0 ? kQ8_0Bytes : kQ4_0Bytes;
  const uint8_t* blk = data + (row * (w.cols / kQBlock) + b) * bytes;
  uint16_t h;
  std::memcpy(&h, blk, 2);
  out.d = f16_decode(h);
  for (int i = 0; i < kQBlock; ++i) {
    if (w.format == WeightFormat::Q8_0) out.q[i] = int8_t(blk[2 + i]);
    else out.q[i] = int8_t((i < 16 ? blk[2 + i] & 0xF : blk[2 + i - 16] >> 4) - 8);
  }
  return out;
}

}  // namespace

void gemm_q8(const GemmParams& p) {
  require_data(p.w, "ref::gemm_q8");
  const int64_t m_rows = p.m, n_cols = p.w.rows, k_len = p.w.cols, blocks = k_len / kQBlock;
  const int64_t ldx = p.ldx ? p.ldx : k_len, ldy = p.ldy ? p.ldy : n_cols;
  std::vector<int8_t> xq(static_cast<size_t>(m_rows * k_len));
  std::vector<float> xd(static_cast<size_t>(m_rows * blocks));
  for (int64_t m = 0; m < m_rows; ++m)
    quantize_row_q8(p.x + m * ldx, k_len, xq.data() + m * k_len, xd.data() + m * blocks);
  for (int64_t n = 0; n < n_cols; ++n)
    for (int64_t m = 0; m < m_rows; ++m) {
      float s = 0;
      for (int64_t b = 0; b < blocks; ++b) {
        const IntBlock wb = weight_block(p.w, n, b);
        const int8_t* xb = xq.data() + m * k_len + b * kQBlock;
        int32_t dot = 0;
        for (int i = 0; i < kQBlock; ++i) dot += int32_t(wb.q[i]) * xb[i];
        s += wb.d * xd[m * blocks + b] * float(dot);
      }
      float& y = p.y[m * ldy + n];
      y = p.accumulate ? y + s : s;
    }
}

}  // namespace troupe::kernels::ref

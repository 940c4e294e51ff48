#include "model/kv_rows.h"

#include <cstring>

#include "kernels/quant.h"

namespace troupe::model {

int64_t RowCodec::data_bytes() const {
  if (format == RowFormat::F32) return dim * int64_t(sizeof(float));
  return format == RowFormat::Fp8Ue8m0 ? dim : dim / 2;
}

int64_t RowCodec::scale_bytes() const {
  if (format == RowFormat::F32) return 0;
  return format == RowFormat::Nvfp4 ? dim / 16 : dim / 32;
}

void RowCodec::encode(const float* x, uint8_t* row) const {
  uint8_t* scale = row + data_bytes();
  switch (format) {
    case RowFormat::Fp8Ue8m0: return kernels::quantize_fp8_ue8m0(x, dim, row, scale);
    case RowFormat::Nvfp4: return kernels::quantize_nvfp4(x, dim, row, scale);
    case RowFormat::Mxfp4: return kernels::quantize_mxfp4(x, dim, row, scale);
    case RowFormat::F32: std::memcpy(row, x, size_t(data_bytes())); return;
  }
}

void RowCodec::decode(const uint8_t* row, float* out) const {
  const uint8_t* scale = row + data_bytes();
  switch (format) {
    case RowFormat::Fp8Ue8m0: return kernels::dequantize_fp8_ue8m0(row, scale, dim, out);
    case RowFormat::Nvfp4: return kernels::dequantize_nvfp4(row, scale, dim, out);
    case RowFormat::Mxfp4: return kernels::dequantize_mxfp4(row, scale, dim, out);
    case RowFormat::F32: std::memcpy(out, row, size_t(data_bytes())); return;
  }
}

KvRowLayout KvRowLayout::of(const ModelConfig& c) {
  return {{RowFormat::Fp8Ue8m0, c.head_dim},
          {RowFormat::Nvfp4, c.head_dim},
          {RowFormat::Mxfp4, c.index_head_dim}};
}

}  // namespace troupe::model

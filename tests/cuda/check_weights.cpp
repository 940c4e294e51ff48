#include "tests/cuda/check_weights.h"

#include <cstring>

#include "kernels/check.h"
#include "kernels/ggml_blocks.h"
#include "kernels/quant.h"
#include "kernels/weights.h"

namespace troupe::cuda_check {

using kernels::WeightFormat;

HostWeight make_weight(WeightFormat f, int64_t rows, int64_t cols, uint32_t seed) {
  const std::vector<float> w = normal(rows * cols, seed, 0.05f);
  HostWeight h{f, rows, cols, {}, {}};
  switch (f) {
    case WeightFormat::F32:
      h.data.resize(w.size() * 4);
      std::memcpy(h.data.data(), w.data(), h.data.size());
      break;
    case WeightFormat::BF16:
    case WeightFormat::F16:
      h.data.resize(w.size() * 2);
      for (size_t i = 0; i < w.size(); ++i) {
        const uint16_t b = f == WeightFormat::BF16 ? kernels::bf16_encode(w[i]) : kernels::f16_encode(w[i]);
        std::memcpy(&h.data[i * 2], &b, 2);
      }
      break;
    case WeightFormat::FP8:
      h.data.resize(w.size());
      h.scale.resize(((rows + 31) / 32) * ((cols + 31) / 32));
      kernels::quantize_weight_fp8(w.data(), rows, cols, h.data.data(), h.scale.data());
      break;
    case WeightFormat::FP4:
      h.data.resize(w.size() / 2);
      h.scale.resize(w.size() / 32);
      kernels::quantize_weight_fp4(w.data(), rows, cols, h.data.data(), h.scale.data());
      break;
    case WeightFormat::ROWFP8:
      h.data.resize(w.size());
      h.scale.resize(w.size() / 32);
      kernels::quantize_weight_rowfp8(w.data(), rows, cols, h.data.data(), h.scale.data());
      break;
    case WeightFormat::Q8_0:
    case WeightFormat::Q4_0:
      TROUPE_FAIL("cuda check: " << kernels::to_string(f) << " has no CUDA path");
  }
  return h;
}

kernels::WeightView HostWeight::view() const {
  return {format, rows, cols, data.empty() ? nullptr : data.data(),
          scale.empty() ? nullptr : scale.data()};
}

DeviceWeight::DeviceWeight(DeviceContext& dev, const HostWeight& h)
    : host(&h), data(upload(dev, h.data)), scale(upload(dev, h.scale)) {}

kernels::WeightView DeviceWeight::view() const {
  return {host->format, host->rows, host->cols, data.get(), scale.get()};
}

}  // namespace troupe::cuda_check

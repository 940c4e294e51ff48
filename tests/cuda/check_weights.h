// Stored weights for the device check, made the checkpoint writer's way (kernels/quant.h
// quantizers), on the host and in device memory.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/weights.h"
#include "tests/cuda/check.h"

namespace troupe::cuda_check {

struct HostWeight {
  kernels::WeightFormat format;
  int64_t rows, cols;
  std::vector<uint8_t> data, scale;
  kernels::WeightView view() const;  // host pointers
};

HostWeight make_weight(kernels::WeightFormat f, int64_t rows, int64_t cols, uint32_t seed);

// A HostWeight's device copy; view() has device pointers.
struct DeviceWeight {
  DeviceWeight(DeviceContext& dev, const HostWeight& h);
  kernels::WeightView view() const;
  const HostWeight* host;
  DeviceBuffer<uint8_t> data, scale;
};

}  // namespace troupe::cuda_check

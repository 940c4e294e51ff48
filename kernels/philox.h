// Philox4x32-10 (Salmon et al., SC'11) as one host/device definition: the CPU's
// philox4x32() / philox_uniform() (kernels/sampling.h) and the CUDA sampler call these,
// so a (seed, stream, counter) triple draws the same u on both.
#pragma once

#include <cstdint>

#include "kernels/hd.h"

namespace troupe::kernels::philox_detail {

struct Block {
  uint32_t w[4];
};

TROUPE_HD inline Block philox4x32_10(Block c, uint32_t k0, uint32_t k1) {
  constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;
  constexpr uint32_t kW0 = 0x9E3779B9u;  // key schedule (golden ratio)
  constexpr uint32_t kW1 = 0xBB67AE85u;  // key schedule (sqrt(3) - 1)
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      k0 += kW0;
      k1 += kW1;
    }
    const uint64_t p0 = static_cast<uint64_t>(kM0) * c.w[0];
    const uint64_t p1 = static_cast<uint64_t>(kM1) * c.w[2];
    c = {{static_cast<uint32_t>(p1 >> 32) ^ c.w[1] ^ k0, static_cast<uint32_t>(p1),
          static_cast<uint32_t>(p0 >> 32) ^ c.w[3] ^ k1, static_cast<uint32_t>(p0)}};
  }
  return c;
}

// key = seed, counter = (counter, stream) as 64-bit halves, low words first; the
// 24 high bits of the first output word fill a float's mantissa exactly.
TROUPE_HD inline float uniform(uint64_t seed, uint64_t stream, uint64_t counter) {
  const Block ctr = {{static_cast<uint32_t>(counter), static_cast<uint32_t>(counter >> 32),
                      static_cast<uint32_t>(stream), static_cast<uint32_t>(stream >> 32)}};
  const Block out =
      philox4x32_10(ctr, static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32));
  return static_cast<float>(out.w[0] >> 8) * 0x1p-24f;
}

}  // namespace troupe::kernels::philox_detail

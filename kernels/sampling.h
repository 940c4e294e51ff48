// Token sampling: greedy (argmax, ties -> lowest id), temperature, top-k, top-p,
// min-p, seeded by a counter-based Philox4x32-10 stream so a (seed, stream,
// counter) triple always gives the same draw on any thread count.
#pragma once

#include <array>
#include <cstdint>

namespace troupe::kernels {

// Philox4x32-10 block for key (k0, k1) and 128-bit counter.
std::array<uint32_t, 4> philox4x32(std::array<uint32_t, 4> counter, std::array<uint32_t, 2> key);
// A uniform float in [0, 1) from (seed, stream, counter).
float philox_uniform(uint64_t seed, uint64_t stream, uint64_t counter);

struct SamplingParams {
  float temperature = 0.0f;  // <= 0: greedy
  int32_t top_k = 0;         // <= 0: off
  float top_p = 1.0f;        // 1: off
  float min_p = 0.0f;        // 0: off
  uint64_t seed = 0;
};

struct SampleParams {
  const float* logits = nullptr;  // [M, vocab]
  int32_t* out = nullptr;         // [M]
  int64_t m = 0;
  int64_t vocab = 0;
  const SamplingParams* sampling = nullptr;  // [M] per-row parameters
  const uint64_t* streams = nullptr;         // [M] e.g. request id
  const uint64_t* counters = nullptr;        // [M] e.g. the request's step
};
void sample(const SampleParams& p);

int32_t argmax(const float* x, int64_t n);  // ties -> lowest index

namespace ref { void sample(const SampleParams& p); }
namespace cpu { void sample(const SampleParams& p); }

}  // namespace troupe::kernels

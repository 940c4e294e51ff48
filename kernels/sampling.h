// Token sampling: greedy (argmax, ties -> lowest id), temperature, top-k, top-p,
// min-p, seeded by a counter-based Philox4x32-10 stream so a (seed, stream,
// counter) triple always gives the same draw on any thread count.
#pragma once

#include <array>
#include <cstdint>

namespace troupe::kernels {

// Philox4x32-10 block for key (k0, k1) and 128-bit counter.
std::array<uint32_t, 4> philox4x32(std::array<uint32_t, 4> counter, std::array<uint32_t, 2> key);
// A uniform float in [0, 1) from (seed, stream, counter): key = seed, counter words =
// (counter lo, counter hi, stream lo, stream hi); u = (word0 >> 8) · 2^-24.
float philox_uniform(uint64_t seed, uint64_t stream, uint64_t counter);

struct SamplingParams {
  float temperature = 0.0f;  // finite, >= 0; 0: greedy
  int32_t top_k = 0;         // >= 0; 0: off
  float top_p = 1.0f;        // (0, 1]; 1: off
  float min_p = 0.0f;        // [0, 1]; 0: off
  uint64_t seed = 0;

  bool operator==(const SamplingParams&) const = default;
};

struct SampleParams {
  const float* logits = nullptr;  // [M, vocab]
  int32_t* out = nullptr;         // [M]
  int64_t m = 0;
  int64_t vocab = 0;
  const SamplingParams* sampling = nullptr;  // [M] per-row parameters
  const uint64_t* streams = nullptr;         // [M] a sub-stream of the seed (the engine: 0)
  const uint64_t* counters = nullptr;        // [M] e.g. the request's step
};
// Row r with temperature T > 0 (rows with T = 0 take argmax), u = philox_uniform(seed,
// streams[r], counters[r]):
//   e_i = exp(z_i − max z), z_i = logit_i / T (f32)        unnormalised softmax, max e = 1
//   O   = tokens by e descending, equal e -> lower id     the fixed order of every step below
//   C   = first top_k of O (all of O when top_k = 0)
//   top-p: M = Σ_{C} e (f64, ascending id); keep the shortest prefix of C whose running
//          Σ e (f64, in O order) >= top_p·M (all of C if none); always >= 1 token
//   min-p: drop tokens with e_i < min_p (p_i < min_p·p_max); O[0] always stays
//   draw:  F = Σ_{kept} e (f64, ascending id); the first kept token in O whose running
//          Σ e > u·F (the renormalised inverse CDF)
// Logits should be finite (-inf masks a token). Bad parameters throw troupe::Error.
void sample(const SampleParams& p);

int32_t argmax(const float* x, int64_t n);  // ties -> lowest index

namespace ref { void sample(const SampleParams& p); }
namespace cpu { void sample(const SampleParams& p); }
namespace cuda { void sample(const SampleParams& p); }

}  // namespace troupe::kernels

// Philox4x32-10, argmax, and validation + dispatch of sample() (kernels/sampling.h).
#include "kernels/sampling.h"

#include <cmath>
#include <limits>

#include "kernels/check.h"
#include "kernels/dispatch.h"

namespace troupe::kernels {
namespace {

constexpr uint32_t kPhiloxM0 = 0xD2511F53u;
constexpr uint32_t kPhiloxM1 = 0xCD9E8D57u;
constexpr uint32_t kPhiloxW0 = 0x9E3779B9u;  // key schedule (golden ratio)
constexpr uint32_t kPhiloxW1 = 0xBB67AE85u;  // key schedule (sqrt(3) - 1)

void philox_round(std::array<uint32_t, 4>& c, const std::array<uint32_t, 2>& k) {
  const uint64_t p0 = static_cast<uint64_t>(kPhiloxM0) * c[0];
  const uint64_t p1 = static_cast<uint64_t>(kPhiloxM1) * c[2];
  c = {static_cast<uint32_t>(p1 >> 32) ^ c[1] ^ k[0], static_cast<uint32_t>(p1),
       static_cast<uint32_t>(p0 >> 32) ^ c[3] ^ k[1], static_cast<uint32_t>(p0)};
}

void check_row(const SamplingParams& s, int64_t row) {
  TROUPE_CHECK(std::isfinite(s.temperature) && s.temperature >= 0, "sampling[", row,
               "].temperature = ", s.temperature, " (must be finite and >= 0; 0 = greedy)");
  TROUPE_CHECK(s.top_k >= 0, "sampling[", row, "].top_k = ", s.top_k, " (must be >= 0; 0 = off)");
  TROUPE_CHECK(s.top_p > 0 && s.top_p <= 1, "sampling[", row, "].top_p = ", s.top_p,
               " (must be in (0, 1]; 1 = off)");
  TROUPE_CHECK(s.min_p >= 0 && s.min_p <= 1, "sampling[", row, "].min_p = ", s.min_p,
               " (must be in [0, 1]; 0 = off)");
}

}  // namespace

std::array<uint32_t, 4> philox4x32(std::array<uint32_t, 4> counter, std::array<uint32_t, 2> key) {
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      key[0] += kPhiloxW0;
      key[1] += kPhiloxW1;
    }
    philox_round(counter, key);
  }
  return counter;
}

// key = seed, counter = (counter, stream) as 64-bit halves, low words first; the
// 24 high bits of the first output word fill a float's mantissa exactly.
float philox_uniform(uint64_t seed, uint64_t stream, uint64_t counter) {
  const std::array<uint32_t, 4> ctr = {
      static_cast<uint32_t>(counter), static_cast<uint32_t>(counter >> 32),
      static_cast<uint32_t>(stream), static_cast<uint32_t>(stream >> 32)};
  const std::array<uint32_t, 2> key = {static_cast<uint32_t>(seed),
                                       static_cast<uint32_t>(seed >> 32)};
  return static_cast<float>(philox4x32(ctr, key)[0] >> 8) * 0x1p-24f;
}

int32_t argmax(const float* x, int64_t n) {
  TROUPE_CHECK(x != nullptr && n >= 1, "argmax needs n >= 1 values, got n = ", n);
  int64_t best = 0;
  for (int64_t i = 1; i < n; ++i) {
    if (x[i] > x[best]) best = i;
  }
  return static_cast<int32_t>(best);
}

void sample(const SampleParams& p) {
  TROUPE_CHECK(p.m >= 0, "m = ", p.m);
  if (p.m == 0) return;
  TROUPE_CHECK(p.vocab >= 1 && p.vocab <= std::numeric_limits<int32_t>::max(),
               "vocab = ", p.vocab);
  TROUPE_CHECK(p.logits != nullptr, "logits is null");
  TROUPE_CHECK(p.out != nullptr, "out is null");
  TROUPE_CHECK(p.sampling != nullptr, "sampling is null");
  for (int64_t i = 0; i < p.m; ++i) {
    check_row(p.sampling[i], i);
    if (p.sampling[i].temperature > 0) {
      TROUPE_CHECK(p.streams != nullptr && p.counters != nullptr, "streams/counters are null but row ",
                   i, " samples (temperature ", p.sampling[i].temperature, " > 0)");
    }
  }
  switch (active_backend()) {
    case Backend::Ref: return ref::sample(p);
    case Backend::Cpu: return cpu::sample(p);
  }
}

}  // namespace troupe::kernels

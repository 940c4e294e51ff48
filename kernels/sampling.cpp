// Philox4x32-10 (kernels/philox.h), argmax, and validation + dispatch of sample() (kernels/sampling.h).
#include "kernels/sampling.h"

#include <cmath>
#include <limits>

#include "kernels/check.h"
#include "kernels/dispatch.h"
#include "kernels/philox.h"

namespace troupe::kernels {
namespace {

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
  const philox_detail::Block out =
      philox_detail::philox4x32_10({{counter[0], counter[1], counter[2], counter[3]}}, key[0], key[1]);
  return {out.w[0], out.w[1], out.w[2], out.w[3]};
}

float philox_uniform(uint64_t seed, uint64_t stream, uint64_t counter) {
  return philox_detail::uniform(seed, stream, counter);
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
  // Under Backend::Cuda the per-row parameters are device memory: not read here.
  for (int64_t i = 0; active_backend() != Backend::Cuda && i < p.m; ++i) {
    check_row(p.sampling[i], i);
    if (p.sampling[i].temperature > 0) {
      TROUPE_CHECK(p.streams != nullptr && p.counters != nullptr, "streams/counters are null but row ",
                   i, " samples (temperature ", p.sampling[i].temperature, " > 0)");
    }
  }
  switch (active_backend()) {
    case Backend::Ref: return ref::sample(p);
    case Backend::Cpu: return cpu::sample(p);
    case Backend::Cuda: return cuda::sample(p);
  }
}

}  // namespace troupe::kernels

// Reference sampling: sorts the whole vocabulary into the order O, then applies the
// shared rule (kernels/sampling_rules.h).
#include <algorithm>
#include <numeric>
#include <vector>

#include "kernels/sampling.h"
#include "kernels/sampling_rules.h"

namespace troupe::kernels::ref {

void sample(const SampleParams& p) {
  std::vector<float> e(p.vocab);
  std::vector<int32_t> order(p.vocab);
  for (int64_t r = 0; r < p.m; ++r) {
    const SamplingParams& sp = p.sampling[r];
    const float* logits = p.logits + r * p.vocab;
    if (sp.temperature <= 0) {
      p.out[r] = argmax(logits, p.vocab);
      continue;
    }
    sampling_detail::softmax_weights(logits, p.vocab, sp.temperature, e.data());
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
      return sampling_detail::ranks_before(e.data(), a, b);
    });
    const float u = philox_uniform(sp.seed, p.streams[r], p.counters[r]);
    p.out[r] = sampling_detail::draw(e.data(), p.vocab, sp, u, [&](int64_t j) { return order[j]; });
  }
}

}  // namespace troupe::kernels::ref

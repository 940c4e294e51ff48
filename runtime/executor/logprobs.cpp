#include "runtime/executor/logprobs.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/check.h"
#include "kernels/indexer.h"

namespace troupe::runtime {

double log_sum_exp(std::span<const float> logits) {
  TROUPE_CHECK(!logits.empty(), "log_sum_exp: empty logits");
  const double max = *std::max_element(logits.begin(), logits.end());
  if (!std::isfinite(max)) return max;  // all -inf, or a +inf / NaN logit: nothing to scale
  double sum = 0.0;
  for (float z : logits) sum += std::exp(double(z) - max);
  return max + std::log(sum);
}

SampleLogprobs sample_logprobs(std::span<const float> logits, int32_t token, int32_t k) {
  const auto vocab = static_cast<int64_t>(logits.size());
  TROUPE_CHECK(token >= 0 && token < vocab, "sample_logprobs: token ", token, " out of range [0, ",
               vocab, ")");
  TROUPE_CHECK(k >= 0, "sample_logprobs: k must be >= 0, got ", k);
  const double lse = log_sum_exp(logits);
  auto logprob = [&](int32_t id) { return float(double(logits[size_t(id)]) - lse); };

  SampleLogprobs out;
  out.sampled = {token, logprob(token)};
  // The ranking of the logits is the ranking of their logprobs; kernels::topk breaks ties
  // by lower index, as the sampler's greedy argmax does.
  std::vector<int32_t> ids(size_t(std::min<int64_t>(k, vocab)));
  ids.resize(size_t(kernels::topk(logits.data(), vocab, int64_t(ids.size()), ids.data())));
  out.top.reserve(ids.size());
  for (int32_t id : ids) out.top.push_back({id, logprob(id)});
  return out;
}

}  // namespace troupe::runtime

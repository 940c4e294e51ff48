// The sampling rule of kernels/sampling.h, shared by ref::sample and cpu::sample
// (internal). The backends differ only in how they produce the token order O: the
// reference sorts the whole vocabulary, the fast path sorts lazily, just as far as
// the rule reads. Every sum below has a fixed order, so both give the same token.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "kernels/hd.h"
#include "kernels/sampling.h"

namespace troupe::kernels::sampling_detail {

// e[i] = exp(logit_i / T − max_j logit_j / T), the unnormalised softmax (max entry 1).
// NaN weights (NaN or +inf logits) become 0, so the order below stays a strict order.
inline void softmax_weights(const float* logits, int64_t vocab, float temperature, float* e) {
  float mx = -std::numeric_limits<float>::infinity();
  for (int64_t i = 0; i < vocab; ++i) {
    e[i] = logits[i] / temperature;
    if (e[i] > mx) mx = e[i];
  }
  for (int64_t i = 0; i < vocab; ++i) {
    const float w = std::exp(e[i] - mx);
    e[i] = std::isnan(w) ? 0.0f : w;
  }
}

// Order O: larger weight first, equal weights -> lower token id.
TROUPE_HD inline bool ranks_before(const float* e, int32_t a, int32_t b) {
  return e[a] > e[b] || (e[a] == e[b] && a < b);
}

// Σ e_i in ascending id over the tokens at or before `last` in O (last < 0: all tokens).
// Summing by id, not by rank, lets the fast path get the mass of a long prefix without
// sorting it.
TROUPE_HD inline double mass_through(const float* e, int64_t vocab, int32_t last) {
  double sum = 0;
  for (int64_t i = 0; i < vocab; ++i) {
    if (last < 0 || i == last || ranks_before(e, static_cast<int32_t>(i), last)) sum += e[i];
  }
  return sum;
}

// Applies top-k, top-p and min-p to O and draws with u in [0, 1). `order(j)` returns
// the j-th token of O (j < vocab); it may sort on demand.
template <class Order>
TROUPE_HD int32_t draw(const float* e, int64_t vocab, const SamplingParams& sp, float u, Order&& order) {
  const bool all_tokens = sp.top_k <= 0 || sp.top_k >= vocab;
  int64_t n = all_tokens ? vocab : sp.top_k;   // candidates: O[0, n)
  if (sp.top_p < 1.0f) {
    const double target = static_cast<double>(sp.top_p) *
                          mass_through(e, vocab, all_tokens ? -1 : order(n - 1));
    double cum = 0;
    int64_t j = 0;
    // Also stop at the first min-p drop: everything after it is dropped anyway.
    while (j < n && e[order(j)] >= sp.min_p) {
      cum += e[order(j++)];
      if (cum >= target) break;
    }
    n = std::max<int64_t>(j, 1);
  }
  bool cut = !all_tokens || sp.top_p < 1.0f;
  if (sp.min_p > 0) {
    int64_t j = 1;  // O[0] is always kept
    while (j < n && e[order(j)] >= sp.min_p) ++j;
    cut = cut || j < n;
    n = j;
  }
  const double target = static_cast<double>(u) * mass_through(e, vocab, cut ? order(n - 1) : -1);
  double cum = 0;
  for (int64_t j = 0; j < n; ++j) {
    cum += e[order(j)];
    if (cum > target) return order(j);
  }
  return order(0);  // no positive weight at all (every logit NaN, or +inf)
}

}  // namespace troupe::kernels::sampling_detail

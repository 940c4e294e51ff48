#include "bench/eplb/routing_sim.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "kernels/check.h"
#include "kernels/parallel.h"
#include "runtime/workload/random_tokens.h"

namespace troupe::bench {
namespace {

double unit(uint64_t& state) {  // uniform in [0, 1)
  return static_cast<double>(runtime::splitmix64(state) >> 11) * 0x1.0p-53;
}

uint64_t stream(uint64_t seed, int64_t layer, int64_t step) {
  uint64_t s = seed ^ (0x9e3779b97f4a7c15ull * static_cast<uint64_t>(layer + 1));
  s ^= 0xd1b54a32d192ed03ull * static_cast<uint64_t>(step + 1);
  runtime::splitmix64(s);
  return s;
}

}  // namespace

RoutingSim::RoutingSim(const RoutingShape& shape) : shape_(shape) {
  TROUPE_CHECK(shape.layers >= 1 && shape.experts >= 1 && shape.experts <= 32767,
               "RoutingSim: experts must be in [1, 32767], layers >= 1");
  TROUPE_CHECK(shape.top_k >= 1 && shape.top_k <= shape.experts, "RoutingSim: top_k ", shape.top_k,
               " is not in [1, experts]");
  TROUPE_CHECK(shape.zipf >= 0 && std::isfinite(shape.zipf), "RoutingSim: zipf must be >= 0");
  const auto n = static_cast<size_t>(shape.experts);
  for (int64_t l = 0; l < shape.layers; ++l) {
    std::vector<int32_t> order(n);  // order[i]: the expert of popularity rank i
    std::iota(order.begin(), order.end(), 0);
    uint64_t s = stream(shape.seed, l, -1);
    for (size_t i = n - 1; i > 0; --i)  // Fisher-Yates
      std::swap(order[i], order[runtime::splitmix64(s) % (i + 1)]);
    std::vector<double> scaled(n);  // popularity x n, mean 1
    double sum = 0;
    for (size_t i = 0; i < n; ++i) sum += scaled[order[i]] = std::pow(double(i + 1), -shape.zipf);
    for (double& x : scaled) x *= static_cast<double>(n) / sum;

    Alias t{std::vector<double>(n, 1.0), std::vector<int32_t>(n)};
    std::iota(t.alias.begin(), t.alias.end(), 0);
    std::vector<int32_t> small, large;
    for (size_t i = 0; i < n; ++i) (scaled[i] < 1 ? small : large).push_back(int32_t(i));
    while (!small.empty() && !large.empty()) {
      const int32_t a = small.back(), b = large.back();
      small.pop_back();
      t.prob[a] = scaled[a];
      t.alias[a] = b;
      scaled[b] -= 1 - scaled[a];
      if (scaled[b] < 1) large.pop_back(), small.push_back(b);
    }
    tables_.push_back(std::move(t));
  }
}

void RoutingSim::route_layer(int64_t layer, int64_t step, int64_t tokens, int16_t* out) const {
  const Alias& t = tables_[layer];
  const auto n = static_cast<uint64_t>(shape_.experts);
  uint64_t s = stream(shape_.seed, layer, step);
  for (int64_t tok = 0; tok < tokens; ++tok) {
    int16_t* picked = out + tok * shape_.top_k;
    for (int64_t k = 0; k < shape_.top_k;) {
      const uint64_t r = runtime::splitmix64(s);
      const auto i = static_cast<int32_t>(r % n);
      const int16_t e = static_cast<int16_t>(unit(s) < t.prob[i] ? i : t.alias[i]);
      if (std::find(picked, picked + k, e) == picked + k) picked[k++] = e;  // else redraw
    }
  }
}

std::vector<int16_t> RoutingSim::route_step(int64_t step, int64_t tokens) const {
  const int64_t per_layer = tokens * shape_.top_k;
  std::vector<int16_t> out(static_cast<size_t>(shape_.layers * per_layer));
  kernels::parallel_for(shape_.layers, 1, [&](int64_t begin, int64_t end) {
    for (int64_t l = begin; l < end; ++l) route_layer(l, step, tokens, out.data() + l * per_layer);
  });
  return out;
}

std::vector<float> RoutingSim::window_counts(int64_t first, int64_t steps, int64_t tokens) const {
  const int64_t n = shape_.experts, per_layer = tokens * shape_.top_k;
  std::vector<float> counts(static_cast<size_t>(shape_.layers * n), 0.0f);
  kernels::parallel_for(shape_.layers, 1, [&](int64_t begin, int64_t end) {
    std::vector<int16_t> routes(static_cast<size_t>(per_layer));
    for (int64_t l = begin; l < end; ++l) {
      std::vector<int64_t> layer(static_cast<size_t>(n), 0);
      for (int64_t step = first; step < first + steps; ++step) {
        route_layer(l, step, tokens, routes.data());
        for (const int16_t e : routes) ++layer[e];
      }
      for (int64_t e = 0; e < n; ++e) counts[l * n + e] = static_cast<float>(layer[e]);
    }
  });
  return counts;
}

}  // namespace troupe::bench

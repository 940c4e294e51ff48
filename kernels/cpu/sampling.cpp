// Fast CPU sampling: rows in parallel, and the order O sorted only as far as the rule
// reads it (top-k, the nucleus, the min-p cut or the draw itself usually stop within
// the first few hundred of 129280 tokens). Same rule and sums as ref, so same tokens.
#include <algorithm>
#include <numeric>
#include <vector>

#include "kernels/parallel.h"
#include "kernels/sampling.h"
#include "kernels/sampling_rules.h"
#include "kernels/scratch.h"

namespace troupe::kernels::cpu {
namespace {

// idx[0, sorted) holds O[0, sorted); the rest are the other tokens in no order.
class LazyOrder {
 public:
  LazyOrder(const float* e, int64_t vocab, scratch_vector<int32_t>& idx) : e_(e), idx_(idx) {
    idx_.resize(vocab);
    std::iota(idx_.begin(), idx_.end(), 0);
  }
  int32_t operator()(int64_t j) {
    if (j >= sorted_) extend(j + 1);
    return idx_[j];
  }

 private:
  // Grows the sorted prefix geometrically; past half the vocabulary a plain sort of
  // the rest is cheaper than another heap selection.
  void extend(int64_t need) {
    constexpr int64_t kFirstChunk = 64;
    const int64_t n = static_cast<int64_t>(idx_.size());
    int64_t to = std::min(n, std::max({need, 4 * sorted_, kFirstChunk}));
    if (to > n / 2) to = n;
    auto cmp = [this](int32_t a, int32_t b) { return sampling_detail::ranks_before(e_, a, b); };
    if (to == n) {
      std::sort(idx_.begin() + sorted_, idx_.end(), cmp);
    } else {
      std::partial_sort(idx_.begin() + sorted_, idx_.begin() + to, idx_.end(), cmp);
    }
    sorted_ = to;
  }

  const float* e_;
  scratch_vector<int32_t>& idx_;
  int64_t sorted_ = 0;
};

}  // namespace

void sample(const SampleParams& p) {
  parallel_for(p.m, 1, [&](int64_t r0, int64_t r1) {
    scratch_vector<float> e;
    scratch_vector<int32_t> idx;
    for (int64_t r = r0; r < r1; ++r) {
      const SamplingParams& sp = p.sampling[r];
      const float* logits = p.logits + r * p.vocab;
      if (sp.temperature <= 0) {
        p.out[r] = argmax(logits, p.vocab);
        continue;
      }
      e.resize(p.vocab);
      sampling_detail::softmax_weights(logits, p.vocab, sp.temperature, e.data());
      const float u = philox_uniform(sp.seed, p.streams[r], p.counters[r]);
      p.out[r] = sampling_detail::draw(e.data(), p.vocab, sp, u, LazyOrder(e.data(), p.vocab, idx));
    }
  });
}

}  // namespace troupe::kernels::cpu

// Fast top-k for rank() of MODEL.md §5.4 (value descending, exact ties -> lower
// index first, only scores > -inf). A radix select on an order-preserving u32 key:
//
//   key:    larger float -> larger key; -0 folds onto +0 (equal values, equal keys);
//           -inf and NaN get key 0, below every included key
//   level:  histogram the next 11-bit digit of the keys that match the prefix found
//           so far; walking down from the top digit finds the digit holding the k-th
//           key; everything above it is in. Repeat while that digit's bucket is
//           large and bits remain (all-tied inputs resolve the whole key).
//   scan:   one pass in index order takes every key above the prefix and gathers
//           the prefix's bucket; nth_element over the bucket gives the exact k-th
//           key T; keys above T go in, keys equal to T go in by ascending index.
//   order:  the k picks are sorted by (key desc, index asc).
//
// Two passes over the scores for typical inputs, four when everything ties. No
// SIMD variant: the passes are bound by memory and histogram updates, and the same
// code serves every CPU.
#include <algorithm>
#include <array>
#include <bit>
#include <vector>

#include "kernels/indexer.h"
#include "kernels/scratch.h"

namespace troupe::kernels::cpu {
namespace {

constexpr int kDigitBits = 11;
constexpr uint32_t kDigits = 1u << kDigitBits;
// A bucket this small is gathered and finished with nth_element rather than
// refined by another pass over all n scores.
constexpr int64_t kGatherLimit = 1 << 16;

// Branch-free: signs and masked entries are unpredictable in real score arrays.
inline uint32_t order_key(float v) {
  uint32_t bits = std::bit_cast<uint32_t>(v);
  bits &= ~(uint32_t(bits == 0x80000000u) << 31);  // -0 -> +0
  const uint32_t key = bits ^ (uint32_t(int32_t(bits) >> 31) | 0x80000000u);
  // Included keys run from -FLT_MAX (0x00800000) to +inf (0xFF800000); -inf and
  // negative NaNs land below that range, positive NaNs above it.
  const bool included = key - 0x00800000u <= 0xFF800000u - 0x00800000u;
  return key & -uint32_t(included);
}

struct Pick {
  uint32_t key;
  int32_t index;
};

// The current selection frontier: keys whose top (32 - shift) bits exceed
// `prefix` are in (`above` of them); keys matching it are still undecided.
struct Frontier {
  uint32_t prefix = 0;
  int shift = 32;
  int64_t above = 0;
  int64_t in_bucket = 0;  // keys matching the prefix
};

inline bool matches(uint32_t key, const Frontier& f) {
  return f.shift == 32 || (key >> f.shift) == f.prefix;
}

// Histograms the next digit of the keys matching the frontier and returns how
// many included keys match. Moves the frontier down one digit when more than
// k - above of them match (always true below the first level). Interleaved
// histograms break the store-to-load chains of runs of equal keys (ties).
int64_t refine(const float* score, int64_t n, int64_t k, Frontier& f) {
  constexpr int kCopies = 4;
  const int bits = std::min(kDigitBits, f.shift);
  const int shift = f.shift - bits;
  static thread_local std::array<std::array<uint32_t, kDigits + 1>, kCopies> hist;  // +1: no match
  for (auto& h : hist) h.fill(0);
  const auto digit = [&](uint32_t key) {
    return matches(key, f) ? (key >> shift) & ((1u << bits) - 1) : kDigits;
  };
  int64_t j = 0;
  for (; j + kCopies <= n; j += kCopies)
    for (int c = 0; c < kCopies; ++c) ++hist[c][digit(order_key(score[j + c]))];
  for (; j < n; ++j) ++hist[0][digit(order_key(score[j]))];
  const auto count = [&](uint32_t d) {
    int64_t total = 0;
    for (const auto& h : hist) total += h[d];
    return total;
  };
  // At the first level digit 0 holds exactly the excluded keys (key 0): included
  // keys start at 0x00800000, whose top digit is 4.
  const uint32_t lowest = f.shift == 32 ? 1 : 0;
  int64_t matching = 0;
  for (uint32_t d = lowest; d < (1u << bits); ++d) matching += count(d);
  if (f.above + matching <= k) return matching;
  uint32_t d = (1u << bits) - 1;
  for (;; --d) {  // terminates: more than k - above keys match
    const int64_t c = count(d);
    if (f.above + c >= k) {
      f.in_bucket = c;
      break;
    }
    f.above += c;
  }
  f.prefix = f.shift == 32 ? d : (f.prefix << bits) | d;
  f.shift = shift;
  return matching;
}

// Sorts picks into rank order and writes their indices.
int64_t emit(scratch_vector<Pick>& picks, int32_t* out) {
  std::sort(picks.begin(), picks.end(), [](const Pick& a, const Pick& b) {
    return a.key > b.key || (a.key == b.key && a.index < b.index);
  });
  for (size_t i = 0; i < picks.size(); ++i) out[i] = picks[i].index;
  return static_cast<int64_t>(picks.size());
}

int64_t take_all_included(const float* score, int64_t n, int32_t* out) {
  scratch_vector<Pick> picks;
  for (int64_t j = 0; j < n; ++j)
    if (const uint32_t key = order_key(score[j])) picks.push_back({key, static_cast<int32_t>(j)});
  return emit(picks, out);
}

}  // namespace

int64_t topk(const float* score, int64_t n, int64_t k, int32_t* out) {
  Frontier f;
  if (refine(score, n, k, f) <= k) return take_all_included(score, n, out);
  while (f.shift > 0 && f.in_bucket > kGatherLimit) refine(score, n, k, f);

  // Scan in index order: keys above the prefix are in; the bucket is gathered (or,
  // when the whole key is resolved, its first `need` entries are simply taken).
  const int64_t need = k - f.above;
  scratch_vector<Pick> picks, bucket;
  picks.reserve(k);
  bucket.reserve(f.shift > 0 ? f.in_bucket : 0);
  for (int64_t j = 0; j < n; ++j) {
    const uint32_t key = order_key(score[j]);
    const uint32_t head = key >> f.shift;
    if (head > f.prefix)
      picks.push_back({key, static_cast<int32_t>(j)});
    else if (head == f.prefix && (f.shift > 0 || int64_t(bucket.size()) < need))
      bucket.push_back({key, static_cast<int32_t>(j)});
  }
  if (f.shift == 0) {
    picks.insert(picks.end(), bucket.begin(), bucket.end());
    return emit(picks, out);
  }
  scratch_vector<uint32_t> keys(bucket.size());
  for (size_t i = 0; i < bucket.size(); ++i) keys[i] = bucket[i].key;
  std::nth_element(keys.begin(), keys.begin() + (need - 1), keys.end(), std::greater<>());
  const uint32_t threshold = keys[need - 1];
  int64_t equal_quota = need;
  for (const Pick& p : bucket) equal_quota -= p.key > threshold;
  for (const Pick& p : bucket) {  // index order: the first equal keys win the ties
    if (p.key > threshold)
      picks.push_back(p);
    else if (p.key == threshold && equal_quota > 0)
      picks.push_back(p), --equal_quota;
  }
  return emit(picks, out);
}

}  // namespace troupe::kernels::cpu

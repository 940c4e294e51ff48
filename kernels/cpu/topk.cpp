// Fast top-k for rank() of MODEL.md §5.4 (value descending, exact ties -> lower
// index first, only scores > -inf). Two passes over the scores, then work on at
// most a bucket's worth of entries:
//
//   1. histogram the top 12 bits of an order-preserving u32 key of each score;
//      walking down from the top bucket finds the bucket B holding the k-th entry
//   2. one scan in index order collects every entry above B (fewer than k) and the
//      entries of B as (key, index) pairs, still in index order
//   3. nth_element over B's keys gives the exact k-th key T; B's entries above T
//      all go in, entries equal to T go in by ascending index until k are taken
//   4. the k picks are sorted by (key desc, index asc)
//
// Equal scores share one key (-0 is folded onto +0), so exact ties reach step 3
// as equal keys and are resolved by index, never by position in a sort.
// There is no SIMD variant: the passes are memory- and branch-bound, and the
// portable code is what every CPU runs.
#include <algorithm>
#include <array>
#include <bit>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/indexer.h"

namespace troupe::kernels::cpu {
namespace {

constexpr int kBucketBits = 12;

// Larger float -> larger key; -0 and +0 map to the same key. +inf gets the largest
// key of any included score.
inline uint32_t order_key(float v) {
  uint32_t bits = std::bit_cast<uint32_t>(v);
  if (bits == 0x80000000u) bits = 0;
  return (bits & 0x80000000u) ? ~bits : (bits | 0x80000000u);
}

inline bool included(float v) {
  return v > -std::numeric_limits<float>::infinity();
}

struct Pick {
  uint32_t key;
  int32_t index;
};

// Sorts picks into rank order and writes their indices.
int64_t emit(std::vector<Pick>& picks, int32_t* out) {
  std::sort(picks.begin(), picks.end(), [](const Pick& a, const Pick& b) {
    return a.key > b.key || (a.key == b.key && a.index < b.index);
  });
  for (size_t i = 0; i < picks.size(); ++i) out[i] = picks[i].index;
  return static_cast<int64_t>(picks.size());
}

}  // namespace

int64_t topk(const float* score, int64_t n, int64_t k, int32_t* out) {
  std::array<int64_t, 1u << kBucketBits> hist{};
  int64_t total = 0;
  for (int64_t j = 0; j < n; ++j)
    if (included(score[j])) ++hist[order_key(score[j]) >> (32 - kBucketBits)], ++total;

  std::vector<Pick> picks;
  if (total <= k) {  // everything included is picked
    picks.reserve(total);
    for (int64_t j = 0; j < n; ++j)
      if (included(score[j])) picks.push_back({order_key(score[j]), static_cast<int32_t>(j)});
    return emit(picks, out);
  }
  uint32_t bucket = hist.size() - 1;
  int64_t above = 0;  // entries in buckets above `bucket`
  while (above + hist[bucket] < k) above += hist[bucket--];

  std::vector<Pick> in_bucket;
  in_bucket.reserve(hist[bucket]);
  picks.reserve(k);
  for (int64_t j = 0; j < n; ++j) {
    if (!included(score[j])) continue;
    const uint32_t key = order_key(score[j]);
    const uint32_t b = key >> (32 - kBucketBits);
    if (b > bucket)
      picks.push_back({key, static_cast<int32_t>(j)});
    else if (b == bucket)
      in_bucket.push_back({key, static_cast<int32_t>(j)});
  }

  const int64_t need = k - above;  // 1 <= need <= in_bucket.size()
  std::vector<uint32_t> keys(in_bucket.size());
  for (size_t i = 0; i < in_bucket.size(); ++i) keys[i] = in_bucket[i].key;
  std::nth_element(keys.begin(), keys.begin() + (need - 1), keys.end(), std::greater<>());
  const uint32_t threshold = keys[need - 1];
  int64_t greater = 0;
  for (const Pick& p : in_bucket) greater += p.key > threshold;
  int64_t equal_quota = need - greater;
  for (const Pick& p : in_bucket) {  // index order: the first equal keys win the ties
    if (p.key > threshold)
      picks.push_back(p);
    else if (p.key == threshold && equal_quota > 0)
      picks.push_back(p), --equal_quota;
  }
  return emit(picks, out);
}

}  // namespace troupe::kernels::cpu

#include "model/bpe.h"

#include <queue>
#include <tuple>

namespace troupe::model {
namespace {

uint64_t pair_key(int32_t left, int32_t right) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
}

// A merge that was possible when pushed: the pair (left, right) at position pos.
struct Candidate {
  int32_t rank;
  int32_t pos;
  int32_t left, right;
  bool operator>(const Candidate& o) const { return std::tie(rank, pos) > std::tie(o.rank, o.pos); }
};

}  // namespace

void BpeMerges::add(int32_t left, int32_t right, int32_t merged) {
  rules_.try_emplace(pair_key(left, right), Rule{next_rank_, merged});
  ++next_rank_;
}

const BpeMerges::Rule* BpeMerges::find(int32_t left, int32_t right) const {
  auto it = rules_.find(pair_key(left, right));
  return it == rules_.end() ? nullptr : &it->second;
}

std::vector<int32_t> BpeMerges::apply(std::span<const int32_t> symbols) const {
  // Symbols live in a linked list over their original positions; a merge keeps the
  // left position and unlinks the right one. The heap holds every pair that was
  // mergeable when pushed; an entry whose pair has changed since is stale and skipped.
  const auto n = static_cast<int32_t>(symbols.size());
  std::vector<int32_t> id(symbols.begin(), symbols.end());
  std::vector<int32_t> next(n), prev(n);
  for (int32_t i = 0; i < n; ++i) next[i] = i + 1 < n ? i + 1 : -1, prev[i] = i - 1;
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> heap;
  auto push = [&](int32_t pos) {
    if (pos < 0 || next[pos] < 0) return;
    if (const Rule* r = find(id[pos], id[next[pos]]))
      heap.push({r->rank, pos, id[pos], id[next[pos]]});
  };
  for (int32_t i = 0; i + 1 < n; ++i) push(i);
  while (!heap.empty()) {
    const Candidate c = heap.top();
    heap.pop();
    const int32_t right = next[c.pos];
    if (id[c.pos] != c.left || right < 0 || id[right] != c.right) continue;
    id[c.pos] = find(c.left, c.right)->merged;
    id[right] = -1;  // unlinked; stale entries at this position fail the id check
    next[c.pos] = next[right];
    if (next[right] >= 0) prev[next[right]] = c.pos;
    push(prev[c.pos]);
    push(c.pos);
  }
  std::vector<int32_t> out;
  for (int32_t i = n > 0 ? 0 : -1; i >= 0; i = next[i]) out.push_back(id[i]);
  return out;
}

}  // namespace troupe::model

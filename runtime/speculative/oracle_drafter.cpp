#include "runtime/speculative/oracle_drafter.h"

namespace troupe::runtime {

bool OracleDrafter::keep(RequestId id, int64_t pos) const {
  // splitmix64 of (seed, id, pos): a fixed coin per position, independent of batching.
  uint64_t x = seed_ ^ (static_cast<uint64_t>(id) * 0x9E3779B97F4A7C15ull) ^
               (static_cast<uint64_t>(pos) * 0xC2B2AE3D27D4EB4Full);
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  x ^= x >> 31;
  return double(x >> 11) * 0x1.0p-53 < p_;
}

void OracleDrafter::propose(const DraftQuery& q, std::vector<int32_t>& out) const {
  const auto it = seqs_.find(q.id);
  if (it == seqs_.end()) return;  // unknown request: no drafts (a plain decode)
  const std::vector<int32_t>& seq = it->second;
  for (int64_t i = 1; i <= q.k; ++i) {
    const int64_t pos = q.anchor + 1 + i;
    if (pos >= static_cast<int64_t>(seq.size())) break;
    const int32_t t = seq[pos];
    out.push_back(keep(q.id, pos) ? t : static_cast<int32_t>((t + 1) % vocab_));
  }
}

}  // namespace troupe::runtime

// TEST/BENCH MODE ONLY - not a real draft. Drafts the target's own greedy continuation,
// known in advance (a plain greedy run of the same requests), keeping each draft token
// with probability p and replacing it by a wrong one otherwise, so the accept path and
// the rollback of rejected positions run with a chosen acceptance rate even though the
// tiny random-weight draft accepts nothing (issue 13, "oracle mode").
//
//   token at position q:  continuation(id)[q]      with probability p (a fixed hash of id, q)
//                         (that + 1) mod vocab     otherwise
#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include "runtime/speculative/drafter.h"

namespace troupe::runtime {

class OracleDrafter final : public Drafter {
 public:
  OracleDrafter(double p, int64_t vocab, uint64_t seed = 0) : p_(p), vocab_(vocab), seed_(seed) {}

  // The whole greedy sequence of request id (prompt + output), position by position.
  void set_sequence(RequestId id, std::vector<int32_t> tokens) { seqs_[id] = std::move(tokens); }

  using Drafter::propose;
  void propose(const DraftQuery& q, std::vector<int32_t>& out) const override;
  bool needs_features() const override { return false; }

 private:
  bool keep(RequestId id, int64_t pos) const;  // the biased coin of (id, pos)

  double p_;
  int64_t vocab_;
  uint64_t seed_;
  std::map<RequestId, std::vector<int32_t>> seqs_;
};

}  // namespace troupe::runtime

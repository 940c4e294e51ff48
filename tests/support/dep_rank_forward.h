// One rank's share of a DEP-R prefill on the golden model (the tests of runtime/dep): rank
// r of R takes sequences r, r + R, ..., runs them with its own ExpertParallel over
// `comm` (own_copies: over its own copy of its slots' weights, as the engines do), and
// returns each of its sequences' logits (every position), by sequence index. A rank
// without a sequence joins the exchanges idle. Shared by the in-process test and the UCX
// peer processes (tests/ucx_peer/), so both run the very same code per rank. forward: the
// golden model's own Forward unless given (e.g. one with other ForwardOptions).
#pragma once

#include <map>
#include <memory>
#include <vector>

#include "runtime/dep/expert_parallel.h"
#include "support/golden.h"

namespace troupe::testing {

inline std::map<size_t, std::vector<float>> dep_rank_forward(
    const GoldenModel& g, runtime::Communicator& comm,
    std::shared_ptr<const runtime::eplb::ExpertPlacement> placement,
    const std::vector<std::vector<int32_t>>& prompts, bool own_copies,
    const model::Forward* forward = nullptr) {
  const model::Forward& f = forward != nullptr ? *forward : *g.forward;
  const int r = comm.rank(), ranks = comm.size();
  runtime::ExpertParallel experts(comm, std::move(placement),
                                  own_copies ? runtime::target_moe_layers(g.weights)
                                             : runtime::MoeLayers{});
  std::vector<size_t> mine;
  for (size_t i = r; i < prompts.size(); i += ranks) mine.push_back(i);
  std::vector<model::SequenceState> states;
  for (size_t k = 0; k < mine.size(); ++k) states.push_back(model::SequenceState::empty(g.config));
  std::vector<model::SequenceInput> in;
  for (size_t k = 0; k < mine.size(); ++k) in.push_back({&states[k], prompts[mine[k]], true});
  experts.begin_step();
  std::map<size_t, std::vector<float>> logits;
  if (in.empty()) {
    f.run_idle(experts);
    return logits;
  }
  const auto out = f.run(in, nullptr, &experts);
  for (size_t k = 0; k < mine.size(); ++k) logits[mine[k]] = out[k];
  return logits;
}

}  // namespace troupe::testing

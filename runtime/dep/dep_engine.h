// One engine instance of R ranks in one process, no actors (DEP-R, DESIGN.md): attention
// data-parallel (each rank its own scheduler, requests and paged KV), MoE expert-parallel
// over the R ranks (ExpertParallel on an InProcessGroup), the ranks in lockstep: every
// step each rank runs its oldest plan, and a rank with none runs a dummy step that joins
// every MoE exchange with zero rows. Same interface as Engine, which it equals bit for
// bit (the tests run both). The actors drive the same pieces per rank.
//
// Speculative decoding (config.speculative, a Drafter as for Engine): each rank drafts
// its own requests; a draft network with MoE layers (DSpark) runs them expert-parallel
// too, on a placement of their own over the same ranks (balanced apart from the target's
// under live EPLB), and in a step where any rank drafts every rank joins the draft's
// exchanges, with zero rows if it drafts nothing (the DP sync's any_draft).
// With an adaptive draft length the ranks choose one k per step from the group's steps
// (runtime/speculative/draft_step_summary.h), as the scheduler actors do over the DP sync.
//
//   DepEngine e(forward, &tokenizer, engine_config, dep_config);   // dep_config.ranks = 3
//   e.add_request(id, prompt, params);          // to the least loaded rank
//   while (e.has_unfinished()) for (auto& out : e.step()) stream(out);
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <unordered_map>
#include <vector>

#include "model/batch_forward.h"
#include "runtime/dep/expert_parallel.h"
#include "runtime/dep/in_process_group.h"
#include "runtime/dep/rank_threads.h"
#include "runtime/engine.h"
#include "runtime/eplb/eplb_planner.h"
#include "runtime/faults/fault_plan.h"

namespace troupe::runtime {

struct DepConfig {
  int ranks = 1;                      // --data-parallel-size
  int64_t num_redundant_experts = 0;  // --num-redundant-experts (padded up to a multiple of R)
  // A new request goes to the rank with the fewest running + waiting requests; among
  // ranks within this many of the least loaded, the one whose prefix cache holds the
  // longest prefix of its prompt wins.
  int64_t prefix_load_margin = 1;
  // Injected faults (runtime/faults) for the steps of rank `fault_rank` only: a
  // step-throw there must fail the step on every rank without hanging the group.
  std::shared_ptr<const FaultPlan> faults;
  int fault_rank = 0;
  eplb::EplbConfig eplb;  // live rebalancing (--enable-eplb, --eplb-config)
};

class DepEngine {
 public:
  // forward: a MoE model (shape().expert_parallel: V4.1, or a LLaMA-family MoE); its
  // routed layers set the placement. Throws troupe::Error for a model without one. The
  // ranks time-share the machine's kernel threads (each default / R) unless
  // config.executor.kernel_threads says how many each runs.
  // drafter: required when config.speculative is on (a DsparkDrafter needs `forward` made
  // with the draft weights, to fill the feature rings); shared by the ranks' threads;
  // must outlive the engine.
  DepEngine(const model::BatchForward& forward, const model::TextTokenizer* tokenizer,
            EngineConfig config, DepConfig dep, const Drafter* drafter = nullptr);
  ~DepEngine();

  void add_request(RequestId id, std::span<const int32_t> prompt, RequestParams params,
                   std::vector<Sibling> siblings = {});
  // The same on a rank of the caller's choice, bypassing load balance (the mirror vs lag
  // benchmark puts the same requests on every rank).
  void add_request_on(int rank, RequestId id, std::span<const int32_t> prompt,
                      RequestParams params, std::vector<Sibling> siblings = {});
  void abort(RequestId id);
  std::vector<RequestOutput> step();
  bool has_unfinished() const;

  int ranks() const { return static_cast<int>(ranks_.size()); }
  int rank_of(RequestId id) const;  // -1: not known (finished, or never added)
  EngineFigures figures(int rank) const;
  // The instance's: every rank's counts and state summed, per_rank the ranks' (sum_figures).
  EngineFigures figures() const;
  // Rank `rank`'s online cost table (SchedulerConfig::adaptive_speculation), else nullptr;
  // every rank's learns the same group steps, so all are alike.
  const DraftLengthChooser* draft_length(int rank) const;
  const KvCacheManager& kv_cache(int rank) const;
  // Steps rank `rank` ran as a dummy (no plan of its own: it joined the MoE exchanges with
  // zero rows because another rank had work).
  int64_t dummy_steps(int rank) const;
  const eplb::ExpertPlacement& placement() const { return *target_.placement; }
  // The rebalances applied so far (each switched every rank at one step boundary).
  const std::vector<eplb::Rebalance>& rebalances() const { return target_.rebalances; }
  // The same for the draft's MoE (speculative decoding with a drafter that has one);
  // draft_placement() is null without.
  const eplb::ExpertPlacement* draft_placement() const { return draft_.placement.get(); }
  const std::vector<eplb::Rebalance>& draft_rebalances() const { return draft_.rebalances; }

 private:
  struct Rank;
  // One expert-parallel MoE of the instance (the target's, or the draft's) and its live
  // rebalancing.
  struct Moe {
    std::shared_ptr<const eplb::ExpertPlacement> placement;  // null: none
    std::unique_ptr<eplb::EplbPlanner> planner;              // null: a static placement
    std::vector<eplb::Rebalance> rebalances;
  };
  void rebalance_if_due(Moe& moe, bool draft);
  void agree_draft_length();
  int pick_rank(std::span<const int32_t> prompt) const;

  EngineConfig config_;
  Moe target_, draft_;
  std::unique_ptr<InProcessGroup> group_;
  std::vector<std::unique_ptr<Rank>> ranks_;
  std::unordered_map<RequestId, int> rank_of_;
  DepConfig dep_;
  std::unique_ptr<RankThreads> threads_;  // last: joined before the ranks go
};

}  // namespace troupe::runtime

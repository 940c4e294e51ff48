// The rank: runs step plans on the model, on its own thread (detached). A step that
// throws fails only its own requests (StepResult::error); the rank carries on. Injected
// faults (runtime/faults) make a step throw, stall, or the rank exit. An expert-parallel
// rank runs its slots' experts for every rank of its group, through the group's
// exchange (runtime/dep/rank_step.h: a step it fails, it fails for the whole group),
// from its own copy of their weights. With live EPLB it reports each step's expert
// counts and copies a new placement's slots on a thread of its own while it serves
// steps; it switches when a plan says so (messages.h, "Live EPLB").
#include <spdlog/spdlog.h>

#include <chrono>
#include <memory>
#include <thread>

#include "actors/engine_parts.h"
#include "runtime/dep/rank_step.h"
#include "runtime/kv_transfer/kv_handoff_wire.h"

namespace troupe::actors {
namespace {

struct RankState {
  std::unique_ptr<runtime::PagedKvStorage> storage;
  std::shared_ptr<runtime::Communicator> comm;       // expert parallel only
  std::unique_ptr<runtime::ExpertParallel> experts;  // on comm
  std::unique_ptr<runtime::ExpertParallel> draft_experts;  // the draft's MoE, on comm too
  std::unique_ptr<runtime::Executor> executor;
  std::shared_ptr<runtime::TierStorage> tiers;  // nullptr: no host and disk tiers
  std::shared_ptr<const runtime::FaultPlan> faults;
  int64_t steps = 0;
  bool eplb = false;
  int rank = 0, ranks = 1;
  // Copy a staged placement's slots (the last one asked for): the target's, the draft's.
  std::thread copier[2];

  RankState() = default;
  RankState(const RankState&) = delete;
  ~RankState() {
    for (std::thread& t : copier)
      if (t.joinable()) t.join();
  }
  runtime::ExpertParallel* experts_of(bool draft) const {
    return draft ? draft_experts.get() : experts.get();
  }
};

using rank_pointer = rank_actor::stateful_pointer<RankState>;

// Runs one plan; an exception (from the model or an injected fault) becomes the result's
// error, so the scheduler fails the plan's requests and the rank takes the next plan. An
// injected stall counts as run time: it stands for a slow step.
StepResult run_step(RankState& st, const runtime::StepPlan& plan, const runtime::StepFault& fault) {
  StepResult r;
  r.rank_step = st.steps;
  const auto t0 = std::chrono::steady_clock::now();
  if (fault.stall_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(fault.stall_ms));
  try {
    if (st.experts) {
      r.sampled = runtime::run_rank_step(*st.executor, *st.experts, plan, fault.fail,
                                         st.draft_experts.get());
    } else {
      if (fault.fail) {
        st.executor->apply_tier_ops(plan);  // the bookkeeping counts on them (executor.h)
        throw std::runtime_error("injected fault: step-throw");
      }
      r.sampled = st.executor->run(plan);
    }
  } catch (const std::exception& e) {  // incl. bad_alloc: a failed step, not a dead engine
    r.error = e.what();
    r.sampled.assign(plan.chunks.size(), {});
  }
  r.run_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (st.eplb) {
    r.expert_counts = st.experts->take_counts();
    r.placement_ready = st.experts->staged_epoch();
  }
  if (st.eplb && st.draft_experts) {
    r.draft_expert_counts = st.draft_experts->take_counts();
    r.draft_placement_ready = st.draft_experts->staged_epoch();
  }
  return r;
}

// Live EPLB: copies this rank's slots of the new placement (of the target's MoE layers,
// or the draft's: update.draft) off the step thread, then hands the copy back to the rank
// (staged_atom) to stage between two steps. The copy reads the model's weights, which
// nothing writes.
void copy_slots(rank_pointer self, model::MoeLayers layers, PlacementUpdate update) {
  auto& st = self->state;
  std::thread& copier = st.copier[update.draft ? 1 : 0];
  if (copier.joinable()) copier.join();  // the previous copy (long done, normally)
  const caf::actor_addr me = self->address();
  copier = std::thread([me, layers = std::move(layers), update = std::move(update),
                        rank = st.rank, ranks = st.ranks]() mutable {
    StagedPlacement staged;
    const char* what = update.draft ? "draft " : "";
    try {
      staged.weights =
          std::make_shared<const runtime::SlotWeights>(layers, *update.placement, rank, ranks);
    } catch (const std::exception& e) {  // e.g. bad_alloc: this placement never goes live
      spdlog::error("rank {}: eplb: copying {}placement {} failed: {}", rank, what, update.epoch,
                    e.what());
      return;
    }
    spdlog::info("rank {}: eplb: {}placement {} copied ({:.1f} MiB of expert weights)", rank,
                 what, update.epoch, double(staged.weights->bytes()) / (1 << 20));
    staged.update = std::move(update);
    if (auto h = caf::actor_cast<rank_actor>(me)) caf::anon_send(h, staged_atom::value, std::move(staged));
  });
}

rank_actor::behavior_type rank_fun(rank_pointer self, const model::BatchForward* forward,
                                   runtime::KvCacheConfig kv, runtime::ExecutorOptions options,
                                   std::shared_ptr<const runtime::FaultPlan> faults,
                                   RankSetup setup) {
  auto& st = self->state;
  // On the rank's own thread (detached): a stalled start holds only this rank's mailbox.
  if (const int64_t ms = faults ? faults->next_rank_start() : 0; ms > 0) {
    spdlog::warn("rank: injected fault rank-start-stall: {} ms before setting up", ms);
    std::this_thread::sleep_for(std::chrono::milliseconds(ms));
  }
  // Speculative decoding: the drafter's feature rings live in the slots (docs/dspark.md).
  const bool features = setup.drafter != nullptr && setup.drafter->needs_features();
  st.storage = std::make_unique<runtime::PagedKvStorage>(forward->shape(), kv.block_size,
                                                         kv.num_blocks, kv.storage_slots(),
                                                         features);
  st.rank = setup.rank;
  st.eplb = setup.eplb;
  st.tiers = std::move(setup.tiers);
  st.faults = std::move(faults);
  // The executor runs on the group's exchange, so it is made once that is here.
  const runtime::Drafter* drafter = setup.drafter;
  std::shared_ptr<const runtime::eplb::ExpertPlacement> draft_placement =
      drafter ? std::move(setup.draft_placement) : nullptr;
  auto join = [self, forward, options, drafter, draft_placement](
                  std::shared_ptr<runtime::Communicator> comm,
                  std::shared_ptr<const runtime::eplb::ExpertPlacement> placement) {
    auto& s = self->state;
    s.executor.reset();  // it points at the experts
    s.experts.reset();
    s.draft_experts.reset();
    if (comm) {
      s.comm = std::move(comm);
      s.ranks = s.comm->size();
      s.experts = std::make_unique<runtime::ExpertParallel>(
          *s.comm, std::move(placement), forward->routed_layers());
      if (draft_placement)
        s.draft_experts = std::make_unique<runtime::ExpertParallel>(*s.comm, draft_placement,
                                                                    drafter->moe_layers());
    }
    s.executor = std::make_unique<runtime::Executor>(*forward, *s.storage, options,
                                                     s.experts.get(), drafter,
                                                     s.draft_experts.get());
    s.executor->set_tier_storage(s.tiers.get());
  };
  std::shared_ptr<const runtime::eplb::ExpertPlacement> placement = std::move(setup.placement);
  if (!setup.comm_later) join(std::move(setup.comm), placement);
  return {
      [=](run_atom, const runtime::StepPlan& plan) -> caf::result<StepResult> {
        auto& s = self->state;
        if (!s.executor)  // the scheduler steps only once the group formed
          return caf::make_error(caf::sec::runtime_error, "rank: a step before its group formed");
        s.steps += 1;
        const runtime::StepFault fault = s.faults ? s.faults->next_step() : runtime::StepFault{};
        if (fault.exit) {
          spdlog::error("rank: injected fault rank-exit at step {}", s.steps);
          self->quit(caf::make_error(caf::sec::runtime_error, "injected fault: rank-exit"));
          return caf::make_error(caf::sec::runtime_error, "injected fault: rank-exit");
        }
        return run_step(s, plan, fault);
      },
      [](ping_atom) { return true; },  // answered once the storage (and executor) exist
      [=](group_atom, std::shared_ptr<runtime::Communicator>& comm) { join(std::move(comm), placement); },
      [=](stage_atom, PlacementUpdate& update) {
        if (const runtime::ExpertParallel* ep = self->state.experts_of(update.draft))
          copy_slots(self, ep->layers(), std::move(update));
      },
      // A parked request's KV, packed on this thread: after every step sent before it.
      [=](export_atom, KvExport& ex) -> caf::result<KvHandoffValue> {
        auto& s = self->state;
        runtime::KvHandoff& h = ex.header;
        try {
          runtime::pack_kv_handoff(*s.storage, h.shape, ex.table, ex.slot, h);
        } catch (const troupe::Error& e) {
          return caf::make_error(caf::sec::runtime_error, std::string(e.what()));
        }
        return KvHandoffValue{std::move(h)};
      },
      [=](staged_atom, StagedPlacement& staged) {
        runtime::ExpertParallel* ep = self->state.experts_of(staged.update.draft);
        if (!ep || staged.update.epoch <= ep->staged_epoch()) return;  // overtaken
        ep->stage(staged.update.epoch, staged.update.placement, std::move(staged.weights));
      },
  };
}

}  // namespace

rank_actor spawn_rank(caf::actor_system& sys, const model::BatchForward& forward,
                      const runtime::KvCacheConfig& kv, const runtime::ExecutorOptions& options,
                      std::shared_ptr<const runtime::FaultPlan> faults, RankSetup setup) {
  return sys.spawn<caf::detached>(rank_fun, &forward, kv, options, std::move(faults),
                                  std::move(setup));
}

}  // namespace troupe::actors

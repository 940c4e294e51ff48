// The live-EPLB planner of one instance (--enable-eplb; also the recorder of
// expert-counts-file, with or without planning): it sums the R ranks' expert
// counts of each step (messages.h ExpertCounts; a step is complete once all R have come)
// and feeds the sums to runtime::eplb::EplbPlanner in step order. When that plans a new
// placement it numbers it (epoch 1, 2, ...) and sends it to every scheduler, which hands
// it to its rank to copy. One placement is in flight at a time: plans made before every
// rank has run a step on the last one are dropped (the next interval plans again). The
// planner never waits on a rank: decoding goes on while the copies are made.
#include <spdlog/spdlog.h>

#include <map>

#include "actors/engine_parts.h"

namespace troupe::actors {
namespace {

struct PendingStep {
  std::vector<int64_t> counts;  // Σ over the ranks that reported so far
  int reported = 0;
  int on_new = 0;  // of those, ranks whose step ran on the placement in flight
};

struct PlannerState {
  std::unique_ptr<runtime::eplb::EplbPlanner> planner;  // null: record only
  std::shared_ptr<runtime::eplb::CountsRecorder> recorder;
  std::shared_ptr<const runtime::eplb::ExpertPlacement> in_use;
  int64_t epoch = 0;  // of in_use
  PlacementUpdate in_flight;  // epoch 0: none
  int ranks = 1;
  Schedulers schedulers;
  std::map<int64_t, PendingStep> pending;  // by step id
};

using planner_pointer = eplb_planner_actor::stateful_pointer<PlannerState>;

// One completed step's summed counts: to the recording, then to the planner.
void record_step(planner_pointer self, const std::vector<int64_t>& counts) {
  auto& s = self->state;
  if (s.recorder) {
    try {
      s.recorder->write(counts, s.in_use->num_layers, s.in_use->num_logical);
    } catch (const std::exception& e) {  // the disk is full, say: stop recording, keep serving
      spdlog::error("eplb: expert-counts-file {}: {}; not recording any more",
                    s.recorder->path(), e.what());
      s.recorder = nullptr;
    }
  }
  if (!s.planner) return;
  std::optional<runtime::eplb::Rebalance> r = s.planner->record(counts, *s.in_use);
  if (!r) return;
  if (s.in_flight.epoch != 0 || s.schedulers.empty()) {
    spdlog::debug("eplb: a plan at {} dropped: placement {} is still being copied",
                 runtime::eplb::describe(*r), s.in_flight.epoch);
    return;
  }
  PlacementUpdate u;
  u.epoch = s.epoch + 1;
  u.placement = std::make_shared<const runtime::eplb::ExpertPlacement>(std::move(r->placement));
  u.planned_at = r->step;
  u.balance_before = runtime::eplb::mean_balance(r->balance_before);
  u.balance_after = runtime::eplb::mean_balance(r->balance_after);
  spdlog::info("eplb: placement {} planned at {}", u.epoch, runtime::eplb::describe(*r));
  for (const scheduler_core_actor& sc : s.schedulers) self->send(sc, stage_atom::value, u);
  s.in_flight = std::move(u);
}

void on_counts(planner_pointer self, ExpertCounts& c) {
  auto& s = self->state;
  PendingStep& p = s.pending[c.step];
  if (!c.counts.empty()) {
    if (p.counts.empty()) p.counts.assign(c.counts.size(), 0);
    for (size_t i = 0; i < c.counts.size() && i < p.counts.size(); ++i) p.counts[i] += c.counts[i];
  }
  p.reported += 1;
  if (s.in_flight.epoch != 0 && c.epoch == s.in_flight.epoch) p.on_new += 1;
  // Steps complete in order on every rank, so the oldest pending step completes first.
  while (!s.pending.empty() && s.pending.begin()->second.reported == s.ranks) {
    PendingStep done = std::move(s.pending.begin()->second);
    const int64_t step = s.pending.begin()->first;
    s.pending.erase(s.pending.begin());
    if (done.on_new == s.ranks) {  // every rank ran this step on the new placement
      spdlog::info("eplb: all {} ranks switched to placement {} at step {}", s.ranks,
                   s.in_flight.epoch, step);
      s.in_use = s.in_flight.placement;
      s.epoch = s.in_flight.epoch;
      s.in_flight = {};
    }
    if (done.counts.empty())
      done.counts.assign(s.in_use->num_layers * s.in_use->num_logical, 0);
    record_step(self, done.counts);
  }
}

eplb_planner_actor::behavior_type planner_fun(
    planner_pointer self, runtime::eplb::EplbConfig config,
    std::shared_ptr<const runtime::eplb::ExpertPlacement> placement, int ranks,
    std::shared_ptr<runtime::eplb::CountsRecorder> recorder) {
  auto& s = self->state;
  if (config.enabled)
    s.planner = std::make_unique<runtime::eplb::EplbPlanner>(
        config, placement->num_layers, placement->num_logical, placement->num_physical, ranks);
  s.recorder = std::move(recorder);
  s.in_use = std::move(placement);
  s.ranks = ranks;
  return {
      [=](eplb_atom, ExpertCounts& c) { on_counts(self, c); },
      [=](peers_atom, Schedulers& schedulers) { self->state.schedulers = std::move(schedulers); },
  };
}

}  // namespace

eplb_planner_actor spawn_eplb_planner(caf::actor_system& sys, runtime::eplb::EplbConfig config,
                                      std::shared_ptr<const runtime::eplb::ExpertPlacement> placement,
                                      int ranks,
                                      std::shared_ptr<runtime::eplb::CountsRecorder> recorder) {
  return sys.spawn(planner_fun, config, std::move(placement), ranks, std::move(recorder));
}

}  // namespace troupe::actors

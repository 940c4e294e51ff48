// The live-EPLB planner of one instance (--enable-eplb; also the recorder of
// expert-counts-file, with or without planning): it sums the R ranks' expert
// counts of each step (messages.h ExpertCounts; a step is complete once all R have come)
// and feeds the sums to runtime::eplb::EplbPlanner in step order. When that plans a new
// placement it numbers it (epoch 1, 2, ...) and sends it to every scheduler, which hands
// it to its rank to copy. One placement is in flight at a time: plans made before every
// rank has run a step on the last one are dropped (the next interval plans again). The
// planner never waits on a rank: decoding goes on while the copies are made. The DSpark
// draft's MoE, when expert-parallel, is balanced the same way and apart (MODEL.md §9): its
// own counts (ExpertCounts::draft), window, placements and epochs.
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

// One model's balancing: the target's, or the DSpark draft's (MODEL.md §9: balanced
// separately), each with its own window, placements and epochs.
struct Track {
  bool draft = false;
  std::unique_ptr<runtime::eplb::EplbPlanner> planner;  // null: record only
  std::shared_ptr<const runtime::eplb::ExpertPlacement> in_use;  // null: no such model
  int64_t epoch = 0;  // of in_use
  PlacementUpdate in_flight;  // epoch 0: none
  std::map<int64_t, PendingStep> pending;  // by step id
};

struct PlannerState {
  std::shared_ptr<runtime::eplb::CountsRecorder> recorder;  // the target's counts
  int ranks = 1;
  Schedulers schedulers;
  Track target, draft;
};

using planner_pointer = eplb_planner_actor::stateful_pointer<PlannerState>;

const char* name(const Track& t) { return t.draft ? "draft " : ""; }

// One completed step's summed counts: to the recording, then to the planner.
void record_step(planner_pointer self, Track& t, const std::vector<int64_t>& counts) {
  auto& s = self->state;
  if (s.recorder && !t.draft) {
    try {
      s.recorder->write(counts, t.in_use->num_layers, t.in_use->num_logical);
    } catch (const std::exception& e) {  // the disk is full, say: stop recording, keep serving
      spdlog::error("eplb: expert-counts-file {}: {}; not recording any more",
                    s.recorder->path(), e.what());
      s.recorder = nullptr;
    }
  }
  if (!t.planner) return;
  std::optional<runtime::eplb::Rebalance> r = t.planner->record(counts, *t.in_use);
  if (!r) return;
  if (t.in_flight.epoch != 0 || s.schedulers.empty()) {
    spdlog::debug("eplb: a {}plan at {} dropped: placement {} is still being copied", name(t),
                  runtime::eplb::describe(*r), t.in_flight.epoch);
    return;
  }
  PlacementUpdate u;
  u.epoch = t.epoch + 1;
  u.placement = std::make_shared<const runtime::eplb::ExpertPlacement>(std::move(r->placement));
  u.planned_at = r->step;
  u.balance_before = runtime::eplb::mean_balance(r->balance_before);
  u.balance_after = runtime::eplb::mean_balance(r->balance_after);
  u.draft = t.draft;
  spdlog::info("eplb: {}placement {} planned at {}", name(t), u.epoch, runtime::eplb::describe(*r));
  for (const scheduler_core_actor& sc : s.schedulers) self->send(sc, stage_atom::value, u);
  t.in_flight = std::move(u);
}

void on_counts(planner_pointer self, ExpertCounts& c) {
  auto& s = self->state;
  Track& t = c.draft ? s.draft : s.target;
  if (!t.in_use) return;  // no such model here
  PendingStep& p = t.pending[c.step];
  if (!c.counts.empty()) {
    if (p.counts.empty()) p.counts.assign(c.counts.size(), 0);
    for (size_t i = 0; i < c.counts.size() && i < p.counts.size(); ++i) p.counts[i] += c.counts[i];
  }
  p.reported += 1;
  if (t.in_flight.epoch != 0 && c.epoch == t.in_flight.epoch) p.on_new += 1;
  // Steps complete in order on every rank, so the oldest pending step completes first.
  while (!t.pending.empty() && t.pending.begin()->second.reported == s.ranks) {
    PendingStep done = std::move(t.pending.begin()->second);
    const int64_t step = t.pending.begin()->first;
    t.pending.erase(t.pending.begin());
    if (done.on_new == s.ranks) {  // every rank ran this step on the new placement
      spdlog::info("eplb: all {} ranks switched to {}placement {} at step {}", s.ranks, name(t),
                   t.in_flight.epoch, step);
      t.in_use = t.in_flight.placement;
      t.epoch = t.in_flight.epoch;
      t.in_flight = {};
    }
    if (done.counts.empty())
      done.counts.assign(t.in_use->num_layers * t.in_use->num_logical, 0);
    record_step(self, t, done.counts);
  }
}

void start_track(Track& t, const runtime::eplb::EplbConfig& config,
                 std::shared_ptr<const runtime::eplb::ExpertPlacement> placement, int ranks) {
  if (!placement) return;
  if (config.enabled)
    t.planner = std::make_unique<runtime::eplb::EplbPlanner>(
        config, placement->num_layers, placement->num_logical, placement->num_physical, ranks);
  t.in_use = std::move(placement);
}

eplb_planner_actor::behavior_type planner_fun(
    planner_pointer self, runtime::eplb::EplbConfig config,
    std::shared_ptr<const runtime::eplb::ExpertPlacement> placement,
    std::shared_ptr<const runtime::eplb::ExpertPlacement> draft_placement, int ranks,
    std::shared_ptr<runtime::eplb::CountsRecorder> recorder) {
  auto& s = self->state;
  start_track(s.target, config, std::move(placement), ranks);
  s.draft.draft = true;
  start_track(s.draft, config, std::move(draft_placement), ranks);
  s.recorder = std::move(recorder);
  s.ranks = ranks;
  return {
      [=](eplb_atom, ExpertCounts& c) { on_counts(self, c); },
      [=](peers_atom, Schedulers& schedulers) { self->state.schedulers = std::move(schedulers); },
  };
}

}  // namespace

eplb_planner_actor spawn_eplb_planner(
    caf::actor_system& sys, runtime::eplb::EplbConfig config,
    std::shared_ptr<const runtime::eplb::ExpertPlacement> placement,
    std::shared_ptr<const runtime::eplb::ExpertPlacement> draft_placement, int ranks,
    std::shared_ptr<runtime::eplb::CountsRecorder> recorder) {
  return sys.spawn(planner_fun, config, std::move(placement), std::move(draft_placement), ranks,
                   std::move(recorder));
}

}  // namespace troupe::actors

// The node's Engram owner: holds the Engram tables (runtime/engram/engram_host_tables.h,
// one shared host mapping the ranks read in place) and, for every plan a scheduler sends
// it, computes the table rows that step will read and touches them, while the ranks are
// still running the step before. It never answers the schedulers and never sits on a
// rank's path: a late prefetch costs nothing but its own time.
#include <spdlog/spdlog.h>

#include "actors/engine_actors.h"
#include "kernels/check.h"

namespace troupe::actors {
namespace {

struct OwnerState {
  const model::ModelConfig* config = nullptr;
  const model::ModelWeights* weights = nullptr;
  std::shared_ptr<const runtime::EngramHostTables> tables;
  model::EngramHashTables hashes;
  EngramOwnerFigures figures;
};

using owner_pointer = engram_owner_actor::stateful_pointer<OwnerState>;

void prefetch(OwnerState& s, const runtime::StepPlan& plan) {
  s.figures.plans += 1;
  const auto rows = runtime::engram_rows_of_plan(*s.config, *s.weights, s.hashes, plan);
  s.figures.rows += s.tables->prefetch(rows);
  // A placeholder is only ever a chunk's last token, and lookbacks hold none.
  for (const runtime::ScheduledChunk& c : plan.chunks)
    for (int32_t t : c.token_ids) s.figures.skipped_positions += t < 0;
}

engram_owner_actor::behavior_type owner_fun(owner_pointer self, const model::ModelConfig* config,
                                            const model::ModelWeights* weights,
                                            std::shared_ptr<const runtime::EngramHostTables> tables) {
  auto& s = self->state;
  s.config = config;
  s.weights = weights;
  s.tables = std::move(tables);
  s.hashes = model::engram_hash_tables(*config);
  s.figures.table_bytes = s.tables->table_bytes();
  return {
      [=](prefetch_atom, const runtime::StepPlan& plan) {
        try {
          prefetch(self->state, plan);
        } catch (const std::exception& e) {  // a prefetch is a hint: never fatal
          spdlog::warn("engram owner: prefetch of step {} failed: {}", plan.step, e.what());
        }
      },
      [=](stats_atom) { return self->state.figures; },
  };
}

}  // namespace

engram_owner_actor spawn_engram_owner(caf::actor_system& sys, const model::ModelConfig& config,
                                      const model::ModelWeights& weights,
                                      std::shared_ptr<const runtime::EngramHostTables> tables) {
  TROUPE_CHECK(tables != nullptr, "engram owner: no tables (the model has no Engram layers)");
  return sys.spawn(owner_fun, &config, &weights, std::move(tables));
}

}  // namespace troupe::actors

// The cluster router over engines spawned in one actor system, for the router's tests
// (P/D moves and their fallbacks, drain, cache-aware routing): each engine with its role
// and options, named as its instance; figures_of asks any engine for its figures.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "actors/engine_actors.h"
#include "support/golden.h"

namespace troupe::actors {

inline runtime::EngineFigures figures_of(caf::scoped_actor& self, const scheduler_actor& e) {
  runtime::EngineFigures f;
  self->request(e, std::chrono::seconds(10), stats_atom::value)
      .receive([&](runtime::EngineFigures& s) { f = std::move(s); },
               [&](caf::error& err) { ADD_FAILURE() << caf::to_string(err); });
  return f;
}

struct InProcessCluster {
  struct Member {
    std::string name;  // also its instance name
    EngineRole role = EngineRole::Mixed;
    EngineOptions options = {};
  };

  InProcessCluster(caf::actor_system& sys, const runtime::EngineConfig& config,
                   const std::vector<Member>& members) {
    std::vector<LocalEngine> local;
    for (const Member& m : members) {
      engines.push_back(spawn_engine(sys, *testing::golden_model().forward, nullptr, config, m.options));
      local.push_back({m.name, engines.back(), "", m.role, m.name});
    }
    router = spawn_cluster_router(sys, {}, std::move(local), std::make_shared<InstanceHealth>());
  }
  ~InProcessCluster() {
    caf::anon_send_exit(router, caf::exit_reason::user_shutdown);
    for (const scheduler_actor& e : engines) caf::anon_send_exit(e, caf::exit_reason::user_shutdown);
  }

  std::vector<scheduler_actor> engines;  // in the order given
  router_actor router;
};

}  // namespace troupe::actors

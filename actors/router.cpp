// The router: spreads requests over the engines of a node (by request id; an n > 1 group
// by its leader's id), aborts to every engine.
#include "actors/engine_actors.h"
#include "kernels/check.h"

namespace troupe::actors {
namespace {

struct RouterState {
  std::vector<scheduler_actor> engines;
};

router_actor::behavior_type router_fun(router_actor::stateful_pointer<RouterState> self,
                                       std::vector<scheduler_actor> engines) {
  TROUPE_CHECK(!engines.empty(), "router needs at least one engine");
  self->state.engines = std::move(engines);
  auto pick = [=](runtime::RequestId id) -> scheduler_actor& {
    auto& e = self->state.engines;
    return e[static_cast<size_t>(id) % e.size()];
  };
  return {
      [=](generate_atom, GenerateRequest& req, caf::actor reply_to) {
        self->send(pick(req.id), generate_atom::value, std::move(req), std::move(reply_to));
      },
      // A group lives on its leader's engine, which the id of a sibling does not name:
      // every engine hears the abort (unknown ids are ignored; aborts are rare).
      [=](abort_atom, runtime::RequestId id) {
        for (const scheduler_actor& e : self->state.engines) self->send(e, abort_atom::value, id);
      },
      [=](fail_atom, runtime::RequestId id, const std::string& why) {
        for (const scheduler_actor& e : self->state.engines)
          self->send(e, fail_atom::value, id, why);
      },
      [=](stats_atom) { return self->delegate(self->state.engines.front(), stats_atom::value); },
  };
}

}  // namespace

router_actor spawn_router(caf::actor_system& sys, std::vector<scheduler_actor> engines) {
  return sys.spawn(router_fun, std::move(engines));
}

}  // namespace troupe::actors

// What the engine-actor tests share: the engine's figures by a bounded request, and
// waiting (bounded) for a restarted instance to report ready.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "actors/engine_actors.h"

namespace troupe::actors {

inline runtime::EngineFigures engine_figures(caf::actor_system& sys, const scheduler_actor& engine) {
  caf::scoped_actor self{sys};
  runtime::EngineFigures f;
  self->request(engine, std::chrono::seconds(10), stats_atom::value)
      .receive([&](const runtime::EngineFigures& s) { f = s; },
               [&](caf::error& e) { ADD_FAILURE() << caf::to_string(e); });
  return f;
}

// The supervisor marks a restarted instance ready once its new ranks answer; 10 s at most.
inline bool becomes_ready(const InstanceHealth& health) {
  for (int i = 0; i < 1000; ++i) {
    if (!health.problem()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

}  // namespace troupe::actors

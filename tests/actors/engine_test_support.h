// What the engine-actor tests share: the engine's figures by a bounded request, waiting
// (bounded) for a restarted instance to report ready, and collecting several requests'
// events.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <map>
#include <thread>
#include <vector>

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

// Receives events until n requests finished (60 s at most between two); each request's
// tokens go to `tokens`, and every output to `each` if given; returns each one's last
// event.
inline std::map<runtime::RequestId, runtime::RequestOutput> collect(
    caf::scoped_actor& self, size_t n, std::map<runtime::RequestId, std::vector<int32_t>>& tokens,
    const std::function<void(const runtime::RequestOutput&)>& each = {}) {
  std::map<runtime::RequestId, runtime::RequestOutput> last;
  while (last.size() < n) {
    bool got = false;
    self->receive(
        [&](token_atom, const TokenEvent& e) {
          got = true;
          auto& t = tokens[e.output.id];
          t.insert(t.end(), e.output.new_tokens.begin(), e.output.new_tokens.end());
          if (each) each(e.output);
          if (e.output.finished()) last[e.output.id] = e.output;
        },
        caf::after(std::chrono::seconds(60)) >> [&] {});
    if (!got) {
      ADD_FAILURE() << "timed out waiting for token events";
      break;
    }
  }
  return last;
}

}  // namespace troupe::actors

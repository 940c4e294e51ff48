// Helpers of the KV hand-off actor tests (engine_handoff_test.cpp,
// handoff_faults_test.cpp): the engines' config, and requests run through a router.
#pragma once

#include <gtest/gtest.h>

#include <vector>

#include "actors/engine_actors.h"
#include "runtime/golden_engine_config.h"

namespace troupe::actors {

inline runtime::EngineConfig config(int64_t block_size = 16) {
  runtime::EngineConfig c = runtime::golden_engine_config(32 << 20, true, 64, 8);
  c.block_size = block_size;
  return c;
}

inline std::vector<int32_t> tokens_of(const std::vector<runtime::RequestOutput>& events) {
  std::vector<int32_t> tokens;
  for (const auto& e : events) tokens.insert(tokens.end(), e.new_tokens.begin(), e.new_tokens.end());
  return tokens;
}

// Request id's events until it finishes.
inline std::vector<runtime::RequestOutput> events_of(caf::scoped_actor& self, runtime::RequestId id) {
  std::vector<runtime::RequestOutput> events;
  for (bool done = false; !done;)
    self->receive(
        [&](token_atom, const TokenEvent& e) {
          EXPECT_EQ(e.output.id, id);
          events.push_back(e.output);
          done = e.output.finished();
        },
        caf::after(std::chrono::seconds(60)) >> [&] {
          ADD_FAILURE() << "timed out waiting for request " << id;
          done = true;
        });
  return events;
}

// Request `id` through the router, greedy for n tokens: its events until it finishes.
inline std::vector<runtime::RequestOutput> run_through(caf::scoped_actor& self,
                                                       const router_actor& router,
                                                       runtime::RequestId id,
                                                       const std::vector<int32_t>& prompt, int64_t n) {
  self->send(router, generate_atom::value, GenerateRequest{id, prompt, runtime::greedy(n), {}},
             caf::actor{self});
  return events_of(self, id);
}

}  // namespace troupe::actors

// The engine actors message by message: streamed tokens equal the plain Engine's,
// an abort ends the stream and frees the request's blocks, bad input is answered with an
// error event and the next request is still served. No sleeps: receives with timeouts.
#include "actors/engine_actors.h"

#include <gtest/gtest.h>

#include <map>
#include <random>

#include "actors/engine_test_support.h"
#include "runtime/golden_engine_config.h"
#include "support/golden.h"

namespace troupe::actors {
namespace {

using testing::golden_model;

using testing::random_tokens;

runtime::EngineConfig small_config() {
  return runtime::golden_engine_config(32 << 20, runtime::EngineConfig{}.async_scheduling, 64, 8);
}

using runtime::greedy;

class EngineActors : public ::testing::Test {
 protected:
  EngineActors() : sys_(cfg_) {}
  ~EngineActors() override {
    caf::anon_send_exit(engine_, caf::exit_reason::user_shutdown);
  }
  runtime::EngineFigures stats(caf::scoped_actor& self) {
    runtime::EngineFigures snap;
    self->request(engine_, std::chrono::seconds(10), stats_atom::value)
        .receive([&](const runtime::EngineFigures& s) { snap = s; },
                 [&](caf::error& e) { ADD_FAILURE() << caf::to_string(e); });
    return snap;
  }

  caf::actor_system_config cfg_;
  caf::actor_system sys_;
  scheduler_actor engine_ = spawn_engine(sys_, *golden_model().forward, nullptr, small_config());
};

TEST_F(EngineActors, StreamsTheEnginesTokens) {
  const auto& g = golden_model();
  std::map<runtime::RequestId, std::vector<int32_t>> prompts;
  for (int i = 0; i < 4; ++i) prompts[i] = random_tokens(5 + 23 * i, 50 + i);
  // The reference: the same requests on the plain Engine.
  runtime::Engine direct(*g.forward, nullptr, small_config());
  for (auto& [id, p] : prompts) direct.add_request(id, p, greedy(5));
  std::map<runtime::RequestId, std::vector<int32_t>> want;
  while (direct.has_unfinished())
    for (const auto& o : direct.step())
      want[o.id].insert(want[o.id].end(), o.new_tokens.begin(), o.new_tokens.end());

  auto router = spawn_router(sys_, {engine_});
  caf::scoped_actor self{sys_};
  for (auto& [id, p] : prompts)
    self->send(router, generate_atom::value, GenerateRequest{id, p, greedy(5), {}}, caf::actor{self});
  std::map<runtime::RequestId, std::vector<int32_t>> got;
  const auto last = collect(self, prompts.size(), got);
  EXPECT_EQ(got, want);
  for (const auto& [id, out] : last) EXPECT_EQ(out.finish_reason(), "length") << id;
  const runtime::EngineFigures snap = stats(self);
  EXPECT_EQ(snap.used_blocks, 0);
  EXPECT_GT(snap.rank_busy_seconds, 0.0);  // the rank reported the time it ran steps
  caf::anon_send_exit(router, caf::exit_reason::user_shutdown);
}

TEST_F(EngineActors, AbortEndsTheStreamAndFreesBlocks) {
  caf::scoped_actor self{sys_};
  self->send(engine_, generate_atom::value, GenerateRequest{7, random_tokens(40, 9), greedy(500), {}},
             caf::actor{self});
  // Wait for the first streamed token, then abort.
  bool first = false;
  self->receive([&](token_atom, const TokenEvent& e) { first = !e.output.new_tokens.empty(); },
                caf::after(std::chrono::seconds(60)) >> [] {});
  ASSERT_TRUE(first);
  self->send(engine_, abort_atom::value, runtime::RequestId{7});
  std::map<runtime::RequestId, std::vector<int32_t>> got;
  const auto last = collect(self, 1, got);
  EXPECT_EQ(last.at(7).finish_reason(), "abort");
  EXPECT_LT(got[7].size(), 500u);
  EXPECT_EQ(stats(self).used_blocks, 0);
}

TEST_F(EngineActors, BadRequestGetsAnErrorAndServingGoesOn) {
  caf::scoped_actor self{sys_};
  self->send(engine_, generate_atom::value, GenerateRequest{1, {}, greedy(3), {}}, caf::actor{self});
  std::map<runtime::RequestId, std::vector<int32_t>> got;
  auto last = collect(self, 1, got);
  EXPECT_EQ(last.at(1).status, runtime::RequestStatus::FinishedError);
  EXPECT_FALSE(last.at(1).error.empty());
  self->send(engine_, generate_atom::value, GenerateRequest{2, random_tokens(9, 3), greedy(3), {}},
             caf::actor{self});
  last = collect(self, 1, got);
  EXPECT_EQ(got[2].size(), 3u);
}

}  // namespace
}  // namespace troupe::actors

// KV hand-off between engine actors (issue 12, docs/pd.md), in one actor system: a
// request prefilled on engine A (kv_hand_off_after = 1) parks; the client tells A to move
// it to engine B (handoff_atom); A's rank packs the KV, B takes it and streams the rest.
// The client's tokens equal the plain Engine's, A's blocks are all free afterwards and B
// computed no prompt token. A hand-off B refuses (another KV layout) and one of a request
// A does not hold end with an error event or nothing, A's blocks freed, serving going on.
#include <gtest/gtest.h>

#include <map>
#include <vector>

#include "actors/engine_actors.h"
#include "runtime/golden_engine_config.h"
#include "support/golden.h"

namespace troupe::actors {
namespace {

using runtime::greedy;
using testing::golden_model;
using testing::random_tokens;

runtime::EngineConfig config(int64_t block_size = 16) {
  runtime::EngineConfig c = runtime::golden_engine_config(32 << 20, true, 64, 8);
  c.block_size = block_size;
  return c;
}

class EngineHandoff : public ::testing::Test {
 protected:
  EngineHandoff() : sys_(cfg_) {}
  ~EngineHandoff() override {
    for (auto& e : {a_, b_, other_}) caf::anon_send_exit(e, caf::exit_reason::user_shutdown);
  }

  // Events of request `id` until it finishes; on HandedOff, tells A to move it to `to`.
  std::vector<runtime::RequestOutput> follow(caf::scoped_actor& self, runtime::RequestId id,
                                             const scheduler_actor& to) {
    std::vector<runtime::RequestOutput> events;
    for (bool done = false; !done;) {
      bool got = false;
      self->receive(
          [&](token_atom, const TokenEvent& e) {
            got = true;
            events.push_back(e.output);
            if (e.output.status == runtime::RequestStatus::HandedOff) {
              caf::anon_send(caf::actor_cast<caf::actor>(a_), handoff_atom::value, id,
                             caf::actor_cast<caf::actor>(to));
            } else if (e.output.finished()) {
              done = true;
            }
          },
          caf::after(std::chrono::seconds(60)) >> [&] {});
      if (!got) {
        ADD_FAILURE() << "timed out waiting for request " << id;
        break;
      }
    }
    return events;
  }
  runtime::EngineFigures stats(caf::scoped_actor& self, const scheduler_actor& e) {
    runtime::EngineFigures snap;
    self->request(e, std::chrono::seconds(10), stats_atom::value)
        .receive([&](const runtime::EngineFigures& s) { snap = s; },
                 [&](caf::error& err) { ADD_FAILURE() << caf::to_string(err); });
    return snap;
  }

  caf::actor_system_config cfg_;
  caf::actor_system sys_;
  scheduler_actor a_ = spawn_engine(sys_, *golden_model().forward, nullptr, config());
  scheduler_actor b_ = spawn_engine(sys_, *golden_model().forward, nullptr, config());
  scheduler_actor other_ = spawn_engine(sys_, *golden_model().forward, nullptr, config(32));
};

TEST_F(EngineHandoff, APrefilledRequestStreamsOnFromTheOtherEngine) {
  caf::scoped_actor self{sys_};
  int64_t decodes = 0;
  for (int i = 0; i < 3; ++i) {
    const std::vector<int32_t> prompt = random_tokens(20 + 37 * i, 70 + i);
    const int64_t n = 8 + i;
    runtime::RequestParams p = greedy(n);
    p.kv_hand_off_after = 1;
    self->send(a_, generate_atom::value, GenerateRequest{i, prompt, p, {}}, caf::actor{self});
    const std::vector<runtime::RequestOutput> events = follow(self, i, b_);
    std::vector<int32_t> tokens;
    int handed = 0;
    for (const auto& e : events) {
      tokens.insert(tokens.end(), e.new_tokens.begin(), e.new_tokens.end());
      handed += e.status == runtime::RequestStatus::HandedOff;
    }
    EXPECT_EQ(handed, 1);
    EXPECT_EQ(events.back().status, runtime::RequestStatus::FinishedLength);
    EXPECT_EQ(tokens, runtime::engine_greedy(*golden_model().forward, prompt, n)) << "request " << i;
    decodes += n - 1;
  }
  EXPECT_EQ(stats(self, a_).used_blocks, 0);  // released once B took them
  const runtime::EngineFigures b = stats(self, b_);
  EXPECT_EQ(b.scheduled_tokens, decodes);  // B ran one token per decode: no prefill, no replay
  EXPECT_EQ(b.used_blocks, 0);
}

TEST_F(EngineHandoff, ARefusedHandOffEndsTheRequestWithTheReasonAndFreesItsBlocks) {
  caf::scoped_actor self{sys_};
  runtime::RequestParams p = greedy(6);
  p.kv_hand_off_after = 1;
  self->send(a_, generate_atom::value, GenerateRequest{1, random_tokens(40, 3), p, {}},
             caf::actor{self});
  const std::vector<runtime::RequestOutput> events = follow(self, 1, other_);  // 32-token blocks
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back().status, runtime::RequestStatus::FinishedError);
  EXPECT_NE(events.back().error.find("KV layout"), std::string::npos) << events.back().error;
  EXPECT_EQ(stats(self, a_).used_blocks, 0);
  EXPECT_EQ(stats(self, other_).used_blocks, 0);

  // A hand-off of a request A does not hold changes nothing; A serves on.
  caf::anon_send(caf::actor_cast<caf::actor>(a_), handoff_atom::value, runtime::RequestId{99},
                 caf::actor_cast<caf::actor>(b_));
  const std::vector<int32_t> prompt = random_tokens(9, 4);
  self->send(a_, generate_atom::value, GenerateRequest{2, prompt, greedy(4), {}}, caf::actor{self});
  std::vector<int32_t> tokens;
  for (const auto& e : follow(self, 2, b_)) tokens.insert(tokens.end(), e.new_tokens.begin(), e.new_tokens.end());
  EXPECT_EQ(tokens, runtime::engine_greedy(*golden_model().forward, prompt, 4));
}

}  // namespace
}  // namespace troupe::actors

// KV hand-off between engine actors (issue 12, docs/pd.md), in one actor system: a
// request prefilled on engine A (kv_hand_off_after = 1) parks; the client tells A to move
// it to engine B (handoff_atom); A's rank packs the KV, B takes it and streams the rest.
// The client's tokens equal the plain Engine's, A's blocks are all free afterwards and B
// computed no prompt token. A hand-off of another KV layout is recomputed by its receiver;
// a failed move answers the asker with the request's tokens, which another engine
// recomputes ("When a move fails"); under the cluster router a prefill engine and two
// decode engines, the first dropping or stalling its first hand-off, still give every
// request the undisturbed run's tokens.
#include <gtest/gtest.h>

#include <map>
#include <thread>
#include <vector>

#include "actors/engine_actors.h"
#include "actors/engine_test_support.h"
#include "actors/handoff_test_support.h"
#include "actors/in_process_cluster.h"
#include "runtime/kv_transfer/kv_handoff_wire.h"
#include "runtime/golden_engine_config.h"
#include "support/golden.h"

namespace troupe::actors {
namespace {

using runtime::greedy;
using testing::golden_model;
using testing::random_tokens;

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
    return figures_of(self, e);
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
  const runtime::EngineFigures a = stats(self, a_);
  EXPECT_EQ(a.used_blocks, 0);  // released once B took them
#ifdef TROUPE_HAVE_UCX
  // Each region went by one RMA put into B's staging memory (the transfer agent).
  EXPECT_EQ(a.kv_transfer_rma, 3);
  EXPECT_EQ(a.kv_transfer_descriptors, 3);
  EXPECT_EQ(a.kv_transfer_messages, 0);
#else
  EXPECT_EQ(a.kv_transfer_messages, 3);
#endif
  const runtime::EngineFigures b = stats(self, b_);
  EXPECT_EQ(b.scheduled_tokens, decodes);  // B ran one token per decode: no prefill, no replay
  EXPECT_EQ(b.used_blocks, 0);
}

TEST_F(EngineHandoff, AHandOffOfAnotherKvLayoutIsRecomputedByItsReceiver) {
  caf::scoped_actor self{sys_};
  runtime::RequestParams p = greedy(6);
  p.kv_hand_off_after = 1;
  const std::vector<int32_t> prompt = random_tokens(40, 3);
  self->send(a_, generate_atom::value, GenerateRequest{1, prompt, p, {}}, caf::actor{self});
  const std::vector<runtime::RequestOutput> events = follow(self, 1, other_);  // 32-token blocks
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back().status, runtime::RequestStatus::FinishedLength) << events.back().error;
  EXPECT_EQ(tokens_of(events), runtime::engine_greedy(*golden_model().forward, prompt, 6));
  EXPECT_EQ(stats(self, a_).used_blocks, 0);
  const runtime::EngineFigures o = stats(self, other_);
  EXPECT_EQ(o.used_blocks, 0);
  EXPECT_EQ(o.kv_transfer_fallbacks, 1);
  EXPECT_EQ(o.scheduled_tokens, 41 + 4);  // prompt + first token recomputed, then 4 decodes

  // A hand-off of a request A does not hold changes nothing; A serves on.
  caf::anon_send(caf::actor_cast<caf::actor>(a_), handoff_atom::value, runtime::RequestId{99},
                 caf::actor_cast<caf::actor>(b_));
  const std::vector<int32_t> short_prompt = random_tokens(9, 4);
  self->send(a_, generate_atom::value, GenerateRequest{2, short_prompt, greedy(4), {}},
             caf::actor{self});
  EXPECT_EQ(tokens_of(follow(self, 2, b_)),
            runtime::engine_greedy(*golden_model().forward, short_prompt, 4));
}

// Asked (not anonymously) to move a request where it cannot go, A answers why and the
// request's tokens without KV, frees its blocks, counts the failure; B recomputes them.
TEST_F(EngineHandoff, AFailedMoveAnswersWithTheTokensToRecompute) {
  caf::scoped_actor self{sys_};
  runtime::RequestParams p = greedy(7);
  p.kv_hand_off_after = 1;
  const std::vector<int32_t> prompt = random_tokens(30, 5);
  self->send(a_, generate_atom::value, GenerateRequest{3, prompt, p, {}}, caf::actor{self});
  std::vector<runtime::RequestOutput> events;
  self->receive([&](token_atom, const TokenEvent& e) { events.push_back(e.output); },
                caf::after(std::chrono::seconds(60)) >> [] { ADD_FAILURE() << "no first token"; });
  ASSERT_EQ(events.size(), 1u);
  ASSERT_EQ(events[0].status, runtime::RequestStatus::HandedOff);
  std::string why;
  KvHandoffBytes tokens;
  self->request(caf::actor_cast<caf::actor>(a_), std::chrono::seconds(30), handoff_atom::value,
                runtime::RequestId{3},
                caf::actor{})
      .receive(
          [&](std::string& w, KvHandoffBytes& t) {
            why = std::move(w);
            tokens = std::move(t);
          },
          [&](caf::error& err) { ADD_FAILURE() << caf::to_string(err); });
  EXPECT_NE(why.find("no engine"), std::string::npos) << why;
  const auto* b = reinterpret_cast<const std::byte*>(tokens.bytes.data());
  const runtime::KvHandoff h =
      runtime::decode_kv_handoff(std::vector<std::byte>(b, b + tokens.bytes.size()));
  EXPECT_FALSE(runtime::carries_kv(h));
  EXPECT_EQ(h.num_prompt_tokens, 30);
  EXPECT_EQ(h.tokens.size(), 31u);
  const runtime::EngineFigures a = stats(self, a_);
  EXPECT_EQ(a.used_blocks, 0);
  EXPECT_EQ(a.kv_transfer_failures[size_t(runtime::KvTransferFailure::NoReceiver)], 1);

  std::string refused = "no answer";
  p.kv_hand_off_after = 0;
  self->request(caf::actor_cast<caf::actor>(b_), std::chrono::seconds(30), import_atom::value,
                GenerateRequest{3, {}, p, {}},
                tokens, caf::actor{self})
      .receive([&](std::string& r) { refused = std::move(r); },
               [&](caf::error& err) { ADD_FAILURE() << caf::to_string(err); });
  EXPECT_EQ(refused, "");
  for (bool done = false; !done;)
    self->receive(
        [&](token_atom, const TokenEvent& e) {
          events.push_back(e.output);
          done = e.output.finished();
        },
        caf::after(std::chrono::seconds(60)) >> [&] {
          ADD_FAILURE() << "timed out";
          done = true;
        });
  EXPECT_EQ(events.back().status, runtime::RequestStatus::FinishedLength);
  EXPECT_EQ(tokens_of(events), runtime::engine_greedy(*golden_model().forward, prompt, 7));
  EXPECT_EQ(stats(self, b_).kv_transfer_fallbacks, 1);
}

// The cluster router over a prefill engine and two decode engines in this process. The
// first decode engine mishandles the first hand-off it receives (the fault); the router
// then has the second recompute it, and every request ends with the undisturbed run's
// tokens in one stream, every engine's blocks free.
class RouterFallback : public ::testing::TestWithParam<const char*> {};

TEST_P(RouterFallback, AFailedMoveIsRecomputedOnTheOtherDecodeEngine) {
  caf::actor_system_config cfg;
  caf::actor_system sys(cfg);
  EngineOptions faulty;
  faulty.faults = std::make_shared<runtime::FaultPlan>(runtime::FaultPlan::parse(GetParam()));
  const model::Forward& fwd = *golden_model().forward;
  InProcessCluster cluster(sys, config(),
                           {{"p", EngineRole::Prefill}, {"d1", EngineRole::Decode, faulty},
                            {"d2", EngineRole::Decode}});
  const scheduler_actor p = cluster.engines[0], d1 = cluster.engines[1], d2 = cluster.engines[2];
  const router_actor router = cluster.router;
  caf::scoped_actor self{sys};
  auto stats = [&](const scheduler_actor& e) { return figures_of(self, e); };
  // One request at a time, so the first goes to d1 (the lower slot, none in flight).
  for (runtime::RequestId id : {5, 6}) {
    const std::vector<int32_t> prompt = random_tokens(25 + 10 * id, 80 + uint32_t(id));
    const std::vector<runtime::RequestOutput> events = run_through(self, router, id, prompt, 7);
    ASSERT_FALSE(events.empty());
    EXPECT_EQ(events.back().status, runtime::RequestStatus::FinishedLength) << events.back().error;
    EXPECT_EQ(tokens_of(events), runtime::engine_greedy(fwd, prompt, 7)) << "request " << id;
    stats(d1);  // d1 is past its stall (if any) before the next request moves
  }
  // Nothing more comes for them: whatever d1 still did under the first id was dropped.
  bool extra = false;
  self->receive([&](token_atom, const TokenEvent&) { extra = true; },
                caf::after(std::chrono::milliseconds(1500)) >> [] {});
  EXPECT_FALSE(extra);
  const runtime::EngineFigures pf = stats(p);
  EXPECT_EQ(pf.used_blocks, 0);
  EXPECT_EQ(pf.kv_transfer_failures[size_t(runtime::KvTransferFailure::Timeout)], 1);
  EXPECT_GT(pf.kv_transfer_bytes, 0);  // the second request's move
  EXPECT_EQ(stats(d2).kv_transfer_fallbacks, 1);
  for (const scheduler_actor& d : {d1, d2}) {
    runtime::EngineFigures f = stats(d);
    for (int i = 0; i < 100 && (f.used_blocks != 0 || f.running != 0); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      f = stats(d);
    }
    EXPECT_EQ(f.used_blocks, 0);
    EXPECT_EQ(f.running + f.waiting, 0);
  }
}

// The prefill engine's transfer agent puts the first request's region into d1's staging
// memory and never commits it (kv-commit-drop: a sender lost after its push started).
// The prefill side's lease runs out and the router has d2 recompute the request; d1's
// lease on the staging region runs out too and frees it. Both requests end with the
// undisturbed run's tokens.
TEST(RouterFallbackCommit, AnUncommittedPutIsRecomputedAndItsStagingFreed) {
#ifndef TROUPE_HAVE_UCX
  GTEST_SKIP() << "no UCX in this build: hand-offs go in messages, nothing is put";
#endif
  caf::actor_system_config cfg;
  caf::actor_system sys(cfg);
  EngineOptions faulty;
  faulty.faults = std::make_shared<runtime::FaultPlan>(runtime::FaultPlan::parse("kv-commit-drop@1"));
  const model::Forward& fwd = *golden_model().forward;
  InProcessCluster cluster(sys, config(),
                           {{"p", EngineRole::Prefill, faulty}, {"d1", EngineRole::Decode},
                            {"d2", EngineRole::Decode}});
  const scheduler_actor p = cluster.engines[0], d1 = cluster.engines[1], d2 = cluster.engines[2];
  caf::scoped_actor self{sys};
  for (runtime::RequestId id : {5, 6}) {
    const std::vector<int32_t> prompt = random_tokens(30 + 9 * id, 60 + uint32_t(id));
    const std::vector<runtime::RequestOutput> events = run_through(self, cluster.router, id, prompt, 7);
    ASSERT_FALSE(events.empty());
    EXPECT_EQ(events.back().status, runtime::RequestStatus::FinishedLength) << events.back().error;
    EXPECT_EQ(tokens_of(events), runtime::engine_greedy(fwd, prompt, 7)) << "request " << id;
  }
  const runtime::EngineFigures pf = figures_of(self, p);
  EXPECT_EQ(pf.used_blocks, 0);
  EXPECT_EQ(pf.kv_transfer_failures[size_t(runtime::KvTransferFailure::Timeout)], 1);
  EXPECT_EQ(pf.kv_transfer_descriptors, 2);  // both regions were put
  EXPECT_EQ(pf.kv_transfer_rma, 1);          // the second was committed
  EXPECT_EQ(figures_of(self, d2).kv_transfer_fallbacks, 1);
  runtime::EngineFigures f1 = figures_of(self, d1);
  for (int i = 0; i < 120 && f1.kv_transfer_leases_expired == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    f1 = figures_of(self, d1);
  }
  EXPECT_EQ(f1.kv_transfer_leases_expired, 1);
  EXPECT_EQ(f1.used_blocks, 0);
}

// The prefill engine is lost before its first token (its first step stalls, and it is
// killed meanwhile). Nothing has streamed, so the router sends the request again, here
// to the decode engine, which runs it whole: one stream with the undisturbed run's tokens.
TEST(RouterResend, ARequestWhosePrefillEngineIsLostBeforeItsFirstTokenRunsElsewhere) {
  caf::actor_system_config cfg;
  caf::actor_system sys(cfg);
  EngineOptions stalled;
  stalled.faults = std::make_shared<runtime::FaultPlan>(runtime::FaultPlan::parse("step-stall@1:1500"));
  InProcessCluster cluster(sys, config(), {{"p", EngineRole::Prefill, stalled}, {"d", EngineRole::Decode}});
  caf::scoped_actor self{sys};
  const std::vector<int32_t> prompt = random_tokens(41, 515);
  self->send(cluster.router, generate_atom::value, GenerateRequest{3, prompt, greedy(6), {}},
             caf::actor{self});
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // p is in its stalled step
  caf::anon_send_exit(cluster.engines[0], caf::exit_reason::kill);
  const std::vector<runtime::RequestOutput> events = events_of(self, 3);
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back().status, runtime::RequestStatus::FinishedLength) << events.back().error;
  EXPECT_EQ(tokens_of(events), runtime::engine_greedy(*golden_model().forward, prompt, 6));
  const runtime::EngineFigures d = figures_of(self, cluster.engines[1]);
  EXPECT_EQ(d.scheduled_tokens, 41 + 5);  // the whole request ran there
  EXPECT_EQ(d.used_blocks, 0);
}

// Prefill and decode instances of two ranks each in one process (data parallel, and
// DEP-2 with expert parallel): each move leaves from the rank that parked the request
// and arrives at the rank choose_rank picks; all requests, sent at once, end with the
// undisturbed run's tokens, by RMA, with nothing recomputed.
class RouterTwoRanks : public ::testing::TestWithParam<bool> {};

TEST_P(RouterTwoRanks, HandOffsLeaveAndReachEitherRank) {
  caf::actor_system_config cfg;
  caf::actor_system sys(cfg);
  EngineOptions two;
  two.data_parallel_size = 2;
  two.expert_parallel = GetParam();
  InProcessCluster cluster(sys, config(), {{"p", EngineRole::Prefill, two}, {"d", EngineRole::Decode, two}});
  caf::scoped_actor self{sys};
  const model::Forward& fwd = *golden_model().forward;
  std::map<runtime::RequestId, std::vector<int32_t>> prompts, tokens;
  for (runtime::RequestId id = 0; id < 4; ++id) {
    prompts[id] = random_tokens(20 + 13 * id, 300 + uint32_t(id));
    self->send(cluster.router, generate_atom::value, GenerateRequest{id, prompts[id], greedy(6), {}},
               caf::actor{self});
  }
  const auto ends = collect(self, prompts.size(), tokens);
  for (const auto& [id, prompt] : prompts) {
    ASSERT_TRUE(ends.contains(id)) << "request " << id;
    EXPECT_EQ(ends.at(id).status, runtime::RequestStatus::FinishedLength) << "request " << id;
    EXPECT_EQ(tokens[id], runtime::engine_greedy(fwd, prompt, 6)) << "request " << id;
  }
  const runtime::EngineFigures pf = figures_of(self, cluster.engines[0]);
  const runtime::EngineFigures df = figures_of(self, cluster.engines[1]);
  EXPECT_EQ(pf.used_blocks, 0);
  EXPECT_EQ(df.kv_transfer_fallbacks, 0);
#ifdef TROUPE_HAVE_UCX
  EXPECT_EQ(pf.kv_transfer_rma, 4);
#endif
  // The decode ranks computed decode tokens only: 5 a request, 20 in all (which rank
  // took which depends on when each arrived, so it is not asserted).
  ASSERT_EQ(df.per_rank.size(), 2u);
  EXPECT_EQ(df.scheduled_tokens, 20);
}

INSTANTIATE_TEST_SUITE_P(DataAndExpertParallel, RouterTwoRanks, ::testing::Values(false, true));

// A client that aborts while its request is moving (the receiver stalls on the hand-off
// past its lease) gets one final event, aborted, and no recompute runs; every engine ends
// holding nothing.
TEST(RouterFallbackAbort, AnAbortDuringAFailingMoveEndsTheRequestOnce) {
  caf::actor_system_config cfg;
  caf::actor_system sys(cfg);
  EngineOptions faulty;
  faulty.faults = std::make_shared<runtime::FaultPlan>(runtime::FaultPlan::parse("kv-import-stall@1:2500"));
  InProcessCluster cluster(sys, config(),
                           {{"p", EngineRole::Prefill}, {"d1", EngineRole::Decode, faulty},
                            {"d2", EngineRole::Decode}});
  caf::scoped_actor self{sys};
  self->send(cluster.router, generate_atom::value,
             GenerateRequest{9, random_tokens(33, 909), greedy(20), {}}, caf::actor{self});
  std::vector<runtime::RequestOutput> events;
  auto next = [&](std::chrono::milliseconds wait) {
    bool got = false;
    self->receive(
        [&](token_atom, const TokenEvent& e) {
          got = true;
          events.push_back(e.output);
        },
        caf::after(wait) >> [] {});
    return got;
  };
  ASSERT_TRUE(next(std::chrono::milliseconds(60000)));  // the first token, from p
  self->send(cluster.router, abort_atom::value, runtime::RequestId{9});
  while (!events.back().finished() && next(std::chrono::milliseconds(60000))) {}
  EXPECT_EQ(events.back().status, runtime::RequestStatus::FinishedAborted);
  EXPECT_FALSE(next(std::chrono::milliseconds(3000)));  // nothing after the end
  for (const scheduler_actor& e : cluster.engines) {
    runtime::EngineFigures f = figures_of(self, e);
    for (int i = 0; i < 100 && (f.used_blocks != 0 || f.running + f.waiting != 0); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      f = figures_of(self, e);
    }
    EXPECT_EQ(f.used_blocks, 0);
    EXPECT_EQ(f.running + f.waiting, 0);
    EXPECT_EQ(f.kv_transfer_fallbacks, 0);
  }
}

// Drain under the cluster router: a request decoding on d1 moves to d2 with its KV when d1
// drains, and its tokens are the undisturbed run's; d2 computes one token per decode (no
// prefill, no replay); d1 frees everything and gets nothing new. Draining an unknown
// instance, or the last decode instance up, is refused naming why.
TEST(RouterDrain, ARequestDecodingOnADrainedInstanceMovesWithItsKv) {
  caf::actor_system_config cfg;
  caf::actor_system sys(cfg);
  const model::Forward& fwd = *golden_model().forward;
  InProcessCluster cluster(sys, config(),
                           {{"p", EngineRole::Prefill}, {"d1", EngineRole::Decode},
                            {"d2", EngineRole::Decode}});
  const scheduler_actor d1 = cluster.engines[1], d2 = cluster.engines[2];
  const router_actor router = cluster.router;
  caf::scoped_actor self{sys};
  auto stats = [&](const scheduler_actor& e) { return figures_of(self, e); };
  auto drain = [&](const std::string& instance) {
    std::pair<std::string, int64_t> answer{"no answer", -1};
    self->request(caf::actor_cast<caf::actor>(router), std::chrono::seconds(10),
                  drain_atom::value, instance)
        .receive([&](std::string& why, int64_t n) { answer = {std::move(why), n}; },
                 [&](caf::error& err) { ADD_FAILURE() << caf::to_string(err); });
    return answer;
  };
  EXPECT_NE(drain("nope").first.find("no instance named 'nope'"), std::string::npos);

  const int64_t n = 300;
  const std::vector<int32_t> prompt = random_tokens(21, 404);
  self->send(router, generate_atom::value, GenerateRequest{7, prompt, greedy(n), {}},
             caf::actor{self});
  std::vector<runtime::RequestOutput> events;
  auto next = [&] {
    bool got = false;
    self->receive(
        [&](token_atom, const TokenEvent& e) {
          got = true;
          events.push_back(e.output);
        },
        caf::after(std::chrono::seconds(60)) >> [] {});
    return got;
  };
  // A few of d1's tokens (events after the first, which came from p), then the drain.
  while (events.size() < 4 && next()) {}
  ASSERT_EQ(events.size(), 4u);
  ASSERT_FALSE(events.back().finished()) << "the request finished before the drain";
  const auto [why, moving] = drain("d1");
  EXPECT_EQ(why, "");
  EXPECT_EQ(moving, 1);
  while (!events.back().finished() && next()) {}
  EXPECT_EQ(events.back().status, runtime::RequestStatus::FinishedLength) << events.back().error;
  EXPECT_EQ(tokens_of(events), runtime::engine_greedy(fwd, prompt, n));
  const runtime::EngineFigures f1 = stats(d1), f2 = stats(d2);
  EXPECT_EQ(f1.used_blocks, 0);
  EXPECT_EQ(f1.running + f1.waiting, 0);
  EXPECT_GT(f1.kv_transfer_bytes, 0);  // d1 sent it
  EXPECT_GT(f2.scheduled_tokens, 0);
  EXPECT_EQ(f1.scheduled_tokens + f2.scheduled_tokens, n - 1);  // one token per decode, no more
  EXPECT_EQ(f2.kv_transfer_fallbacks, 0);

  // d1 takes nothing new; d2 is the last decode instance up, so it may not drain.
  self->send(router, generate_atom::value, GenerateRequest{8, prompt, greedy(5), {}},
             caf::actor{self});
  events.clear();
  while ((events.empty() || !events.back().finished()) && next()) {}
  EXPECT_EQ(tokens_of(events), runtime::engine_greedy(fwd, prompt, 5));
  EXPECT_EQ(stats(d1).scheduled_tokens, f1.scheduled_tokens);
  EXPECT_NE(drain("d2").first.find("no other decode instance"), std::string::npos);
}

// kv-import-drop: a receiver that never confirms; kv-import-stall: one that answers after
// the lease (it still takes the request late, and the router's abort frees it).
INSTANTIATE_TEST_SUITE_P(Faults, RouterFallback,
                         ::testing::Values("kv-import-drop@1", "kv-import-stall@1:2500"));

}  // namespace
}  // namespace troupe::actors

// Failures through the engine actors, message by message (faults injected with
// runtime::FaultPlan): a step that throws fails its requests with the error and the cause
// (not "abort"); a rank that exits fails its requests, the supervisor restarts scheduler
// and rank, /health's source says why meanwhile, and the next request gets the plain
// Engine's tokens; past the restart limit the instance stays down and says so; a
// request past request-timeout ends with a timeout error even while its step stalls; a
// config that cannot work is refused when the engine is spawned.
#include <gtest/gtest.h>

#include <map>
#include <thread>

#include "actors/engine_actors.h"
#include "actors/engine_test_support.h"
#include "kernels/check.h"
#include "runtime/golden_engine_config.h"
#include "support/golden.h"

namespace troupe::actors {
namespace {

using runtime::ErrorCause;
using runtime::greedy;
using runtime::RequestId;
using testing::golden_model;
using testing::random_tokens;

runtime::EngineConfig small_config() {
  return runtime::golden_engine_config(32 << 20, runtime::EngineConfig{}.async_scheduling, 64, 8);
}

std::vector<int32_t> plain_tokens(const std::vector<int32_t>& prompt, int64_t n) {
  runtime::Engine direct(*golden_model().forward, nullptr, small_config());
  direct.add_request(0, prompt, greedy(n));
  std::vector<int32_t> out;
  while (direct.has_unfinished())
    for (const auto& o : direct.step())
      out.insert(out.end(), o.new_tokens.begin(), o.new_tokens.end());
  return out;
}

struct Finished {
  std::vector<int32_t> tokens;
  runtime::RequestOutput last;
};

class EngineFailures : public ::testing::Test {
 protected:
  EngineFailures() : sys_(cfg_) {}
  ~EngineFailures() override { caf::anon_send_exit(engine_, caf::exit_reason::user_shutdown); }

  void start(const std::string& faults, double request_timeout = 0, int max_restarts = 5) {
    EngineOptions o;
    o.faults = std::make_shared<runtime::FaultPlan>(runtime::FaultPlan::parse(faults));
    o.health = health_;
    o.request_timeout = request_timeout;
    o.max_restarts = max_restarts;
    engine_ = spawn_engine(sys_, *golden_model().forward, nullptr, small_config(), o);
  }
  // Sends one request and receives its events until it finished.
  Finished run(RequestId id, const std::vector<int32_t>& prompt, int64_t max_tokens) {
    caf::scoped_actor self{sys_};
    self->send(engine_, generate_atom::value, GenerateRequest{id, prompt, greedy(max_tokens), {}},
               caf::actor{self});
    Finished f;
    for (bool done = false; !done;) {
      bool got = false;
      self->receive(
          [&](token_atom, const TokenEvent& e) {
            got = true;
            f.tokens.insert(f.tokens.end(), e.output.new_tokens.begin(), e.output.new_tokens.end());
            if (e.output.finished()) f.last = e.output, done = true;
          },
          caf::after(std::chrono::seconds(60)) >> [] {});
      if (!got) {
        ADD_FAILURE() << "request " << id << ": no final event within 60 s";
        break;
      }
    }
    return f;
  }
  runtime::EngineFigures stats() { return engine_figures(sys_, engine_); }
  bool becomes_ready() { return actors::becomes_ready(*health_); }

  caf::actor_system_config cfg_;
  caf::actor_system sys_;
  std::shared_ptr<InstanceHealth> health_ = std::make_shared<InstanceHealth>();
  scheduler_actor engine_;
};

TEST_F(EngineFailures, AFailedStepEndsItsRequestsWithTheErrorAndServingGoesOn) {
  start("step-throw@2");
  const auto prompt = random_tokens(20, 5);
  const Finished bad = run(1, prompt, 8);
  EXPECT_EQ(bad.last.status, runtime::RequestStatus::FinishedError);
  EXPECT_EQ(bad.last.finish_reason(), "error");
  EXPECT_EQ(bad.last.error_cause, ErrorCause::StepFailed);
  EXPECT_NE(bad.last.error.find("injected fault: step-throw"), std::string::npos) << bad.last.error;
  EXPECT_NE(bad.last.error.find("step "), std::string::npos) << bad.last.error;
  const Finished good = run(2, prompt, 8);
  EXPECT_EQ(good.tokens, plain_tokens(prompt, 8));
  EXPECT_EQ(good.last.finish_reason(), "length");
  const runtime::EngineFigures s = stats();
  EXPECT_EQ(s.failed_steps, 1);
  EXPECT_EQ(s.restarts, 0);
  EXPECT_EQ(s.used_blocks, 0);
}

TEST_F(EngineFailures, ADeadRankFailsItsRequestsAndTheInstanceRestarts) {
  start("rank-exit@3");
  const auto prompt = random_tokens(30, 6);
  const Finished lost = run(1, prompt, 20);
  EXPECT_EQ(lost.last.status, runtime::RequestStatus::FinishedError);
  EXPECT_EQ(lost.last.error_cause, ErrorCause::EngineDied);
  EXPECT_NE(lost.last.error.find("rank died"), std::string::npos) << lost.last.error;
  EXPECT_LT(lost.tokens.size(), 20u);
  EXPECT_TRUE(becomes_ready()) << *health_->problem();
  const Finished good = run(2, prompt, 20);
  EXPECT_EQ(good.tokens, plain_tokens(prompt, 20));
  const runtime::EngineFigures s = stats();
  EXPECT_EQ(s.restarts, 1);
  EXPECT_GE(s.steps, 3);  // the counts go on across the restart
  EXPECT_EQ(s.used_blocks, 0);
}

TEST_F(EngineFailures, PastTheRestartLimitTheInstanceIsDownAndSaysSo) {
  start("rank-exit@1,rank-exit@2", /*request_timeout=*/0, /*max_restarts=*/1);
  const auto prompt = random_tokens(10, 7);
  EXPECT_EQ(run(1, prompt, 4).last.error_cause, ErrorCause::EngineDied);  // restarts
  EXPECT_EQ(run(2, prompt, 4).last.error_cause, ErrorCause::EngineDied);  // gives up
  const Finished refused = run(3, prompt, 4);
  EXPECT_EQ(refused.last.error_cause, ErrorCause::EngineDied);
  EXPECT_NE(refused.last.error.find("the engine is down"), std::string::npos) << refused.last.error;
  ASSERT_TRUE(health_->problem().has_value());
  EXPECT_EQ(health_->problem()->rfind("down: ", 0), 0u) << *health_->problem();
  EXPECT_EQ(stats().restarts, 1);
}

TEST_F(EngineFailures, ARequestPastItsTimeoutEndsWithATimeoutWhileItsStepStalls) {
  start("step-stall@1:4000", /*request_timeout=*/1.5);
  const auto prompt = random_tokens(12, 8);
  const Finished late = run(1, prompt, 8);
  EXPECT_EQ(late.last.status, runtime::RequestStatus::FinishedError);
  EXPECT_EQ(late.last.error_cause, ErrorCause::Timeout);
  EXPECT_NE(late.last.error.find("timed out after 1.5 s"), std::string::npos) << late.last.error;
  EXPECT_TRUE(late.tokens.empty());  // its first step was still stalled
  // The stall counts as the rank's run time: once reported, the rank is free again.
  for (int i = 0; i < 1000 && stats().rank_busy_seconds < 4.0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  const Finished good = run(2, prompt, 8);  // no stall now, well inside the timeout
  EXPECT_EQ(good.tokens, plain_tokens(prompt, 8));
  EXPECT_EQ(stats().used_blocks, 0);
}

TEST(EngineStartup, AKvBudgetThatCannotHoldTheRequestsIsRefusedWithTheNumbers) {
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  runtime::EngineConfig c = small_config();
  c.kv_budget_bytes = 64 << 10;
  try {
    spawn_engine(sys, *golden_model().forward, nullptr, c);
    ADD_FAILURE() << "spawned";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("KV budget of 65536 bytes"), std::string::npos) << m;
    EXPECT_NE(m.find("at least"), std::string::npos) << m;
  }
}

}  // namespace
}  // namespace troupe::actors

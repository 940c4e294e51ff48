// KV hand-off faults the transfer agent and the receiving scheduler handle themselves
// (docs/pd.md "The transfer agent", "When a move fails"): a receiver whose put hung gets
// its next hand-offs in messages, then RMA again after the back-off; a hand-off that
// reaches its scheduler after its sender's lease is dropped there, never run.
#include <gtest/gtest.h>

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

using testing::golden_model;
using testing::random_tokens;

// 1P1D under the cluster router. The prefill engine's first put never lands (kv-put-hang:
// a receiver it cannot write to under UCX's error mode none); its move times out and the
// decode engine recomputes the request. The next move to that receiver goes in a message
// without trying RMA; once the back-off has passed, the one after goes by RMA again. All
// three end with the undisturbed run's tokens; the counts behind
// troupe:kv_transfers_total{by} say which way each went.
TEST(RouterPutHang, AReceiverWhosePutHungGetsMessagesThenRmaAgain) {
#ifndef TROUPE_HAVE_UCX
  GTEST_SKIP() << "no UCX in this build: hand-offs go in messages, nothing is put";
#endif
  caf::actor_system_config cfg;
  caf::actor_system sys(cfg);
  EngineOptions hangs;
  hangs.faults = std::make_shared<runtime::FaultPlan>(runtime::FaultPlan::parse("kv-put-hang@1"));
  hangs.kv_put_backoff = std::chrono::milliseconds(3000);
  const model::Forward& fwd = *golden_model().forward;
  InProcessCluster cluster(sys, config(), {{"p", EngineRole::Prefill, hangs}, {"d", EngineRole::Decode}});
  const scheduler_actor p = cluster.engines[0], d = cluster.engines[1];
  caf::scoped_actor self{sys};
  auto run = [&](runtime::RequestId id) {
    const std::vector<int32_t> prompt = random_tokens(20 + 7 * id, 90 + uint32_t(id));
    const std::vector<runtime::RequestOutput> events = run_through(self, cluster.router, id, prompt, 6);
    ASSERT_FALSE(events.empty());
    EXPECT_EQ(events.back().status, runtime::RequestStatus::FinishedLength) << events.back().error;
    EXPECT_EQ(tokens_of(events), runtime::engine_greedy(fwd, prompt, 6)) << "request " << id;
  };
  run(5);  // hangs, times out, recomputed on d
  run(6);  // within the back-off: in a message
  runtime::EngineFigures pf = figures_of(self, p);
  EXPECT_EQ(pf.kv_transfer_failures[size_t(runtime::KvTransferFailure::Timeout)], 1);
  EXPECT_EQ(pf.kv_transfer_descriptors, 1);  // only the hung put
  EXPECT_EQ(pf.kv_transfer_rma, 0);
  EXPECT_EQ(pf.kv_transfer_messages, 1);
  EXPECT_EQ(figures_of(self, d).kv_transfer_fallbacks, 1);
  std::this_thread::sleep_for(std::chrono::milliseconds(3100));  // past the back-off
  run(7);  // RMA again
  pf = figures_of(self, p);
  EXPECT_EQ(pf.kv_transfer_descriptors, 2);
  EXPECT_EQ(pf.kv_transfer_rma, 1);
  EXPECT_EQ(pf.kv_transfer_messages, 1);
  EXPECT_EQ(pf.used_blocks, 0);
  EXPECT_EQ(figures_of(self, d).used_blocks, 0);
}

// A hand-off of prompt + its first token, without KV: the receiver recomputes the prompt.
runtime::KvHandoff tokens_only(const std::vector<int32_t>& prompt, int32_t first) {
  runtime::KvHandoff h;
  h.tokens = prompt;
  h.tokens.push_back(first);
  h.num_prompt_tokens = static_cast<int64_t>(prompt.size());
  return h;
}

KvHandoffBytes bytes_of(const runtime::KvHandoff& h, int64_t lease_ms) {
  const std::vector<std::byte> wire = runtime::encode_kv_handoff(h);
  const auto* b = reinterpret_cast<const uint8_t*>(wire.data());
  return KvHandoffBytes{std::vector<uint8_t>(b, b + wire.size()), lease_ms};
}

// The receiving scheduler takes a hand-off after its sender's lease (here it stalls
// 1.3 s on the first, whose lease is 1 s; and a value whose give-up time has passed): it
// answers why and drops it, never admitting it. A hand-off on time runs with the
// undisturbed run's tokens; the engine holds nothing afterwards.
TEST(LateImport, AHandOffTakenAfterItsLeaseIsDroppedByItsReceiver) {
  caf::actor_system_config cfg;
  caf::actor_system sys(cfg);
  EngineOptions stalls;
  stalls.faults = std::make_shared<runtime::FaultPlan>(runtime::FaultPlan::parse("kv-import-stall@1:1300"));
  const scheduler_actor b = spawn_engine(sys, *golden_model().forward, nullptr, config(), stalls);
  caf::scoped_actor self{sys};
  const model::Forward& fwd = *golden_model().forward;
  auto import = [&](runtime::RequestId id, auto payload) {
    std::string answer = "no answer";
    self->request(caf::actor_cast<caf::actor>(b), std::chrono::seconds(30), import_atom::value,
                  GenerateRequest{id, {}, runtime::greedy(6), {}}, std::move(payload), caf::actor{self})
        .receive([&](std::string& r) { answer = std::move(r); },
                 [&](caf::error& err) { ADD_FAILURE() << caf::to_string(err); });
    return answer;
  };
  const std::vector<int32_t> prompt = random_tokens(33, 12);
  const std::vector<int32_t> expected = runtime::engine_greedy(fwd, prompt, 6);
  const runtime::KvHandoff h = tokens_only(prompt, expected[0]);

  EXPECT_NE(import(7, bytes_of(h, 1000)).find("after its lease"), std::string::npos);
  const auto past = std::chrono::steady_clock::now() - std::chrono::milliseconds(1);
  EXPECT_NE(import(8, KvHandoffValue{h, past}).find("after its lease"), std::string::npos);
  EXPECT_EQ(import(9, bytes_of(h, 1000)), "");  // on time: runs
  const std::vector<runtime::RequestOutput> events = events_of(self, 9);
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back().status, runtime::RequestStatus::FinishedLength) << events.back().error;
  EXPECT_EQ(tokens_of(events), std::vector<int32_t>(expected.begin() + 1, expected.end()));
  const runtime::EngineFigures f = figures_of(self, b);
  EXPECT_EQ(f.admitted, 1);  // only request 9
  EXPECT_EQ(f.used_blocks, 0);
  EXPECT_EQ(f.running + f.waiting, 0);
  caf::anon_send_exit(b, caf::exit_reason::user_shutdown);
}

}  // namespace
}  // namespace troupe::actors

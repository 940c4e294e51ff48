// The payloads that may cross a process (actors/wire.h): each, with every field set to a
// value other than its default, comes back equal from CAF's binary serializer, alone and
// inside a caf::message decoded by a second actor system that registered the same types
// (what the middleman does). A field missing from an inspect() function fails here.
#include "actors/wire.h"

#include <gtest/gtest.h>

#include <caf/binary_deserializer.hpp>
#include <caf/binary_serializer.hpp>
#include <string>
#include <vector>

namespace troupe::actors {
namespace {

using runtime::RequestOutput;
using runtime::RequestParams;

RequestParams params(int salt) {
  RequestParams p;
  p.sampling = {0.7f + salt, 40 + salt, 0.9f, 0.05f, 1234567890123ull + salt};
  p.max_tokens = 77 + salt;
  p.stop_token_ids = {3, 5, 8};
  p.stop = {"\n\n", "END"};
  p.ignore_eos = true;
  p.include_stop_str_in_output = true;
  p.skip_special_tokens = false;
  p.priority = -3;
  p.num_logprobs = 2;
  p.kv_save = "conv-" + std::to_string(salt);
  p.kv_restore = "prev";
  p.kv_delete = "old";
  p.kv_hand_off_after = 1 + salt;
  return p;
}

RequestOutput output(runtime::StopReason why) {
  RequestOutput o;
  o.id = 42;
  o.new_tokens = {7, 8, 9};
  o.new_logprobs = {{{7, -0.5f}, {{7, -0.5f}, {1, -1.5f}}}, {{8, -0.25f}, {}},
                    {{9, -2.0f}, {{2, -1.0f}}}};
  o.new_text = "héllo";
  o.status = runtime::RequestStatus::FinishedError;
  o.stop_reason = std::move(why);
  o.error = "step 3 failed: boom";
  o.error_cause = runtime::ErrorCause::StepFailed;
  o.num_cached_tokens = 64;
  return o;
}

runtime::EngineFigures figures(bool with_ranks) {
  runtime::EngineFigures f;
  f.running = 1, f.waiting = 2, f.used_blocks = 3, f.free_blocks = 4, f.kv_usage = 0.5;
  f.tier_bytes[0] = 5, f.tier_bytes[1] = 6, f.tier_bytes[2] = 7;
  f.steps = 8, f.preemptions = 9, f.admitted = 10, f.scheduled_tokens = 11;
  f.prefix_query_tokens = 12, f.prefix_hit_tokens = 13, f.prefix_snapshot_hits = 14;
  f.prefix_replay_hits = 15, f.prefix_replay_tokens = 16;
  f.prefix_tier_hit_tokens[0] = 17, f.prefix_tier_hit_tokens[1] = 18;
  f.prefix_tier_hit_tokens[2] = 19;
  f.failed_steps = 20, f.restarts = 21, f.spec_num_drafts = 22, f.spec_num_draft_tokens = 23;
  f.spec_num_accepted_tokens = 24, f.spec_accepted_per_pos = {25, 26};
  f.eplb_rebalances = 27, f.eplb_balance_before = 0.75, f.eplb_balance_after = 0.875;
  f.eplb_draft_rebalances = 5, f.eplb_draft_balance_before = 0.5, f.eplb_draft_balance_after = 0.625;
  f.spec_steps_by_k = {28, 29, 30};
  f.schedule_cpu_s = 1.25, f.update_cpu_s = 2.5, f.rank_busy_seconds = 3.75;
  f.recent_steps = {{1, 2, 0.125}, {2, 0, 0.25}};
  if (with_ranks) f.per_rank = {figures(false), figures(false)};
  return f;
}

// Serializes x and loads it into a default-constructed T.
template <class T>
T round_trip(T x) {
  std::vector<char> buf;
  caf::binary_serializer sink{nullptr, buf};
  EXPECT_FALSE(sink(x));
  EXPECT_GT(buf.size(), 0u);
  T y;
  caf::binary_deserializer source{nullptr, buf};
  EXPECT_FALSE(source(y));
  return y;
}

TEST(Wire, EveryPayloadComesBackEqual) {
  GenerateRequest g{7, {1, 2, 3, 4, 5}, params(0), {{8, params(1)}, {9, params(2)}}};
  const GenerateRequest g2 = round_trip(g);
  EXPECT_EQ(g2.id, g.id);
  EXPECT_EQ(g2.prompt, g.prompt);
  EXPECT_TRUE(g2.params == g.params);
  ASSERT_EQ(g2.siblings.size(), 2u);
  EXPECT_TRUE(g2.siblings[1] == g.siblings[1]);

  for (runtime::StopReason why : {runtime::StopReason{}, runtime::StopReason{int32_t(13)},
                                  runtime::StopReason{std::string("END")}}) {
    const TokenEvent t{output(why), {}};
    EXPECT_TRUE(round_trip(t).output == t.output);
  }
  EXPECT_TRUE(round_trip(figures(true)) == figures(true));

  DpSyncMessage m;
  m.from = 3, m.to = 5, m.step = 99, m.round = 2;
  m.payload = {4, 6, {1, 0, 7}, true, 2, true, true, 3,
               runtime::DraftStepSummary{2, 5, false, 0.0125, {0, 0, 0, 3, 1, 0, 2, 0, 1}, 9}};
  const DpSyncMessage m2 = round_trip(m);
  EXPECT_EQ(m2.from, 3);
  EXPECT_EQ(m2.to, 5);
  EXPECT_EQ(m2.step, 99);
  EXPECT_EQ(m2.round, 2);
  EXPECT_EQ(m2.payload, m.payload);

  EXPECT_TRUE(round_trip(runtime::RankLoad{5, 320}) == (runtime::RankLoad{5, 320}));
  const KvHandoffBytes kv{{0, 1, 2, 254, 255, 7}};
  EXPECT_EQ(round_trip(kv).bytes, kv.bytes);
  const KvLease lease{9, {1, 2, 3}, 0xdeadbeef00ull, {4, 5}, "full"};
  const KvLease lease2 = round_trip(lease);
  EXPECT_EQ(lease2.lease, 9u);
  EXPECT_EQ(lease2.address, lease.address);
  EXPECT_EQ(lease2.remote_address, lease.remote_address);
  EXPECT_EQ(lease2.rkey, lease.rkey);
  EXPECT_EQ(lease2.why, "full");
  const ExpertCounts c{2, 17, 3, {1, 2, 3, 4}, true};
  const ExpertCounts c2 = round_trip(c);
  EXPECT_EQ(c2.rank, 2);
  EXPECT_EQ(c2.step, 17);
  EXPECT_EQ(c2.epoch, 3);
  EXPECT_EQ(c2.counts, c.counts);
  EXPECT_TRUE(c2.draft);

  runtime::eplb::ExpertPlacement p;
  p.num_layers = 1, p.num_logical = 2, p.num_physical = 3, p.max_replicas = 2;
  p.phy2log = {0, 1, 1}, p.log2phy = {0, -1, 1, 2}, p.logcnt = {1, 2};
  PlacementUpdate u{4, std::make_shared<const runtime::eplb::ExpertPlacement>(p), 300, 0.5, 0.9, true};
  const PlacementUpdate u2 = round_trip(u);
  EXPECT_EQ(u2.epoch, 4);
  ASSERT_NE(u2.placement, nullptr);
  EXPECT_NE(u2.placement, u.placement);  // a copy of its own
  EXPECT_TRUE(*u2.placement == p);
  EXPECT_EQ(u2.planned_at, 300);
  EXPECT_EQ(u2.balance_before, 0.5);
  EXPECT_EQ(u2.balance_after, 0.9);
  EXPECT_TRUE(u2.draft);
  EXPECT_EQ(round_trip(PlacementUpdate{}).placement, nullptr);

  const EngramOwnerFigures e{1, 2, 3, 4};
  const EngramOwnerFigures e2 = round_trip(e);
  EXPECT_EQ(e2.plans, 1);
  EXPECT_EQ(e2.rows, 2);
  EXPECT_EQ(e2.skipped_positions, 3);
  EXPECT_EQ(e2.table_bytes, 4);

}

// Serializes x in one system and loads it in another (actor handles need a system).
template <class T>
T round_trip_between(caf::actor_system& from, caf::actor_system& to, T x) {
  std::vector<char> buf;
  caf::binary_serializer sink{from, buf};
  EXPECT_FALSE(sink(x));
  T y;
  caf::binary_deserializer source{to, buf};
  EXPECT_FALSE(source(y));
  return y;
}

TEST(Wire, TheGroupsJoinAndAnswerComeBackEqual) {
  caf::actor_system_config a_cfg, b_cfg;
  add_wire_types(a_cfg);
  add_wire_types(b_cfg);
  caf::actor_system a{a_cfg}, b{b_cfg};
  // Null handles here; the DEP cluster test (tests/net/serve_cluster_dep_test.cpp) sends
  // live ones across the middleman.
  const GroupJoin j{"dep2", 1, 2, {9, 8, 7}, dp_peer_actor{}};
  const GroupJoin j2 = round_trip_between(a, b, j);
  EXPECT_EQ(j2.instance, "dep2");
  EXPECT_EQ(j2.rank, 1);
  EXPECT_EQ(j2.size, 2);
  EXPECT_EQ(j2.address, j.address);
  EXPECT_FALSE(j2.scheduler);
  const GroupFormed f{3, {{1, 2}, {3}}, DpPeers(2)};
  const GroupFormed f2 = round_trip_between(a, b, f);
  EXPECT_EQ(f2.generation, 3);
  EXPECT_EQ(f2.addresses, f.addresses);
  EXPECT_EQ(f2.schedulers.size(), 2u);
}

TEST(Wire, AMessageDecodesInAnotherSystemThatRegisteredTheTypes) {
  caf::actor_system_config send_cfg, recv_cfg;
  add_wire_types(send_cfg);
  add_wire_types(recv_cfg);
  caf::actor_system sender{send_cfg}, receiver{recv_cfg};
  const GenerateRequest g{7, std::vector<int32_t>(5000, 11), params(0), {}};
  const caf::message out = caf::make_message(generate_atom::value, g);
  std::vector<char> buf;
  caf::binary_serializer sink{sender, buf};
  ASSERT_FALSE(sink(const_cast<caf::message&>(out)));
  // A long prompt is one block of int32s, not one element at a time.
  EXPECT_LT(buf.size(), 5000 * 4 + 1024);
  caf::message in;
  caf::binary_deserializer source{receiver, buf};
  ASSERT_FALSE(source(in));
  ASSERT_TRUE((in.match_elements<generate_atom, GenerateRequest>()));
  EXPECT_EQ(in.get_as<GenerateRequest>(1).prompt, g.prompt);
  EXPECT_TRUE(in.get_as<GenerateRequest>(1).params == g.params);
}

}  // namespace
}  // namespace troupe::actors

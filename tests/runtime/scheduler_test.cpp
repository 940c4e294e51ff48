// Scheduler policy against a real KvCacheManager and a mocked model (STYLE.md 13):
// tables of expected chunks, preemptions and KV block counts per step.
//
// The mocked model "samples" token f(id, position) for every chunk that asks, so a
// request's tokens do not depend on batching, chunking or recompute - which the tests
// check after preemption and in the randomized workload.
#include "runtime/scheduler/scheduler.h"

#include <gtest/gtest.h>

#include <iostream>
#include <map>
#include <random>
#include <set>

#include "kernels/check.h"
#include "model/tokenizer.h"
#include "support/test_paths.h"

namespace troupe::runtime {
namespace {

using Ids = std::vector<int32_t>;
constexpr int32_t kEos = 1;

int32_t model_token(RequestId id, int64_t position) {
  return 20 + int32_t((id * 31 + position * 7) % 1000);  // never kEos
}

struct Chunk {
  RequestId id;
  int64_t start, n;
  bool operator==(const Chunk&) const = default;
};
std::ostream& operator<<(std::ostream& os, const Chunk& c) {
  return os << "{" << c.id << ", " << c.start << ", " << c.n << "}";
}

struct Row {  // expected state after schedule() of one step
  std::vector<Chunk> chunks;
  std::vector<RequestId> preempted = {};
  int64_t used_blocks = 0;
};

KvCacheConfig kv_config(int64_t num_blocks, int64_t block_size = 4) {
  KvCacheConfig c;
  c.block_size = block_size;
  c.num_blocks = num_blocks;
  c.swa_slots = 16;
  c.enable_prefix_cache = false;
  return c;
}

struct Harness {
  Harness(SchedulerConfig sc, KvCacheConfig kc, const model::Tokenizer* tok = nullptr)
      : kv(kc), s(sc, kv, kEos, tok) {}

  // Prompt tokens unique to the request (no accidental prefix hits).
  void add(RequestId id, int64_t prompt_len, int64_t max_tokens = 1000, int32_t priority = 0) {
    RequestParams p;
    p.max_tokens = max_tokens;
    p.priority = priority;
    Ids prompt;
    for (int64_t i = 0; i < prompt_len; ++i) prompt.push_back(model_token(id + 500, i));
    s.add_request(id, prompt, p);
  }

  StepPlan plan_step() {
    plan = s.schedule();
    kv.check_invariants();
    return plan;
  }
  std::vector<RequestOutput> finish_step() {
    std::vector<SampledChunk> sampled(plan.chunks.size());
    for (size_t i = 0; i < plan.chunks.size(); ++i) {
      if (plan.chunks[i].sample)
        sampled[i].tokens = {model_token(plan.chunks[i].id, plan.chunks[i].end())};
    }
    auto outs = s.update(plan, sampled);
    kv.check_invariants();
    for (const RequestOutput& o : outs) {
      auto& toks = outputs[o.id];
      toks.insert(toks.end(), o.new_tokens.begin(), o.new_tokens.end());
      if (o.finished()) finished[o.id] = o;
    }
    return outs;
  }

  // Runs one step per row and compares.
  void expect_steps(const std::vector<Row>& rows) {
    for (size_t i = 0; i < rows.size(); ++i) {
      SCOPED_TRACE("step " + std::to_string(i));
      plan_step();
      std::vector<Chunk> got;
      for (const ScheduledChunk& c : plan.chunks) got.push_back({c.id, c.start, c.num_tokens});
      EXPECT_EQ(got, rows[i].chunks);
      EXPECT_EQ(plan.preempted, rows[i].preempted);
      EXPECT_EQ(kv.num_used_blocks(), rows[i].used_blocks);
      finish_step();
    }
  }

  KvCacheManager kv;
  Scheduler s;
  StepPlan plan;
  std::map<RequestId, Ids> outputs;
  std::map<RequestId, RequestOutput> finished;
};

SchedulerConfig sched_config(int64_t budget) {
  SchedulerConfig c;
  c.max_num_batched_tokens = budget;
  return c;
}

TEST(Scheduler, BudgetSplitsAcrossRequests) {
  Harness h(sched_config(10), kv_config(64));
  h.add(1, 6, 3);
  h.add(2, 5, 3);
  h.add(3, 3, 3);
  h.expect_steps({
      {{{1, 0, 6}, {2, 0, 4}}, {}, 2 + 1},  // budget 10 = 6 + 4: request 3 waits
      {{{1, 6, 1}, {2, 4, 1}, {3, 0, 3}}, {}, 2 + 2 + 1},
      {{{1, 7, 1}, {2, 5, 1}, {3, 3, 1}}, {}, 2 + 2 + 1},  // 1 reaches max_tokens 3
      {{{2, 6, 1}, {3, 4, 1}}, {}, 2 + 2},                 // 2 and 3 finish
  });
  EXPECT_FALSE(h.s.has_unfinished());
  EXPECT_EQ(h.kv.num_used_blocks(), 0);
  for (RequestId id : {1, 2, 3}) EXPECT_EQ(h.finished.at(id).finish_reason(), "length");
}

TEST(Scheduler, ChunkedPrefillOfALongPromptBehindDecodes) {
  Harness h(sched_config(8), kv_config(64));
  h.add(1, 3);
  h.add(2, 20);
  h.expect_steps({
      {{{1, 0, 3}, {2, 0, 5}}, {}, 1 + 2},
      {{{1, 3, 1}, {2, 5, 7}}, {}, 1 + 3},  // the decode first, the prefill takes the rest
      {{{1, 4, 1}, {2, 12, 7}}, {}, 2 + 5},
      {{{1, 5, 1}, {2, 19, 1}}, {}, 2 + 5},  // a one-token tail runs with the decodes
      {{{1, 6, 1}, {2, 20, 1}}, {}, 2 + 6},
  });
  const ScheduledChunk& last = h.plan.chunks[1];
  EXPECT_TRUE(last.sample);
  EXPECT_EQ(last.block_table.size(), 6u);
  EXPECT_EQ(last.token_ids, Ids{model_token(2, 20)});  // the token sampled after the prompt
}

TEST(Scheduler, ContextReadCapKeepsASecondPrefillOut) {
  for (bool capped : {true, false}) {
    SCOPED_TRACE(capped ? "capped" : "uncapped");
    SchedulerConfig sc = sched_config(30);
    if (capped) sc.max_prefill_context_read = 24;
    Harness h(sc, kv_config(64));
    h.add(1, 40);
    h.add(2, 40);
    if (capped) {
      h.expect_steps({
          {{{1, 0, 30}}, {}, 8},
          {{{1, 30, 10}}, {}, 10},  // first prefill of the step: exempt, reads 40
          {{{1, 40, 1}, {2, 0, 29}}, {}, 11 + 8},
          {{{1, 41, 1}, {2, 29, 11}}, {}, 11 + 10},
      });
    } else {
      h.expect_steps({
          {{{1, 0, 30}}, {}, 8},
          {{{1, 30, 10}, {2, 0, 20}}, {}, 10 + 5},
          {{{1, 40, 1}, {2, 20, 20}}, {}, 11 + 10},
      });
    }
  }
}

TEST(Scheduler, ContextReadCapClipsALaterChunk) {
  SchedulerConfig sc = sched_config(64);
  sc.max_prefill_context_read = 24;
  Harness h(sc, kv_config(64));
  h.add(1, 16);
  h.add(2, 16);
  h.expect_steps({{{{1, 0, 16}, {2, 0, 8}}, {}, 4 + 2}});  // 16 + 8 = 24
  EXPECT_EQ(h.plan.prefill_context_read, 24);
  h.add(3, 16);
  h.expect_steps({{{{1, 16, 1}, {2, 8, 8}, {3, 0, 8}}, {}, 5 + 4 + 2}});  // 16 + 8
}

TEST(Scheduler, AdmissionCap) {
  SchedulerConfig sc = sched_config(100);
  sc.max_admissions_per_step = 2;
  Harness h(sc, kv_config(64));
  for (RequestId id = 1; id <= 5; ++id) h.add(id, 2);
  h.expect_steps({
      {{{1, 0, 2}, {2, 0, 2}}, {}, 2},
      {{{1, 2, 1}, {2, 2, 1}, {3, 0, 2}, {4, 0, 2}}, {}, 4},
      {{{1, 3, 1}, {2, 3, 1}, {3, 2, 1}, {4, 2, 1}, {5, 0, 2}}, {}, 5},
  });
  EXPECT_EQ(h.plan.num_admitted, 1);
}

TEST(Scheduler, MaxRunning) {
  SchedulerConfig sc = sched_config(100);
  sc.max_num_running = 2;
  Harness h(sc, kv_config(64));
  for (RequestId id = 1; id <= 3; ++id) h.add(id, 2, 2);
  h.expect_steps({
      {{{1, 0, 2}, {2, 0, 2}}, {}, 2},
      {{{1, 2, 1}, {2, 2, 1}}, {}, 2},  // both finish: max_tokens 2
      {{{3, 0, 2}}, {}, 1},
  });
}

TEST(Scheduler, PriorityOrder) {
  for (SchedulePolicy policy : {SchedulePolicy::Fcfs, SchedulePolicy::Priority}) {
    SchedulerConfig sc = sched_config(100);
    sc.max_num_running = 2;
    sc.policy = policy;
    Harness h(sc, kv_config(64));
    h.add(1, 2, 5, /*priority=*/5);
    h.add(2, 2, 5, 0);
    h.add(3, 2, 5, 5);
    h.add(4, 2, 5, -1);
    if (policy == SchedulePolicy::Fcfs) {
      EXPECT_EQ(h.s.waiting_ids(), (std::vector<RequestId>{1, 2, 3, 4}));
      h.expect_steps({{{{1, 0, 2}, {2, 0, 2}}, {}, 2}});
    } else {
      EXPECT_EQ(h.s.waiting_ids(), (std::vector<RequestId>{4, 2, 1, 3}));
      h.expect_steps({{{{4, 0, 2}, {2, 0, 2}}, {}, 2}});
    }
  }
}

TEST(Scheduler, PreemptNewestWhenBlocksRunOutThenRecompute) {
  Harness h(sched_config(100), kv_config(6));
  h.add(1, 8, 8);
  h.add(2, 8, 7);
  h.expect_steps({
      {{{1, 0, 8}, {2, 0, 8}}, {}, 4},
      {{{1, 8, 1}, {2, 8, 1}}, {}, 6},
      {{{1, 9, 1}, {2, 9, 1}}, {}, 6},
      {{{1, 10, 1}, {2, 10, 1}}, {}, 6},
      {{{1, 11, 1}, {2, 11, 1}}, {}, 6},
      {{{1, 12, 1}}, {2}, 4},  // 1 needs a 4th block: 2 (newest) gives back its 3
      {{{1, 13, 1}}, {}, 4},   // 2 needs 4 blocks for 13 tokens, 2 are free: it waits
      {{{1, 14, 1}}, {}, 4},   // 1 finishes (8 outputs)
      {{{2, 0, 13}}, {}, 4},   // recompute prompt + its 5 outputs
      {{{2, 13, 1}}, {}, 4},   // 7 outputs: done
  });
  EXPECT_FALSE(h.s.has_unfinished());
  EXPECT_EQ(h.kv.num_used_blocks(), 0);
  // Recompute changed nothing: every output is the mocked model's token for its position.
  for (RequestId id : {1, 2}) {
    const Ids& out = h.outputs.at(id);
    for (size_t i = 0; i < out.size(); ++i) EXPECT_EQ(out[i], model_token(id, 8 + int64_t(i)));
  }
  EXPECT_EQ(h.outputs.at(2).size(), 7u);
}

TEST(Scheduler, ALoneRequestThatCanNeverFitFinishesWithAnError) {
  Harness h(sched_config(100), kv_config(3));  // 12 tokens of KV in all
  h.add(1, 20);                                // needs 5 blocks: rejected at admission
  h.add(2, 10, 100);                           // fits, then outgrows the pool alone
  h.expect_steps({
      {{{2, 0, 10}}, {}, 3},
      {{{2, 10, 1}}, {}, 3},
      {{{2, 11, 1}}, {}, 3},  // 12 tokens: the pool is full
      {{}, {}, 0},            // token 13 needs a 4th block and nobody can give one back
  });
  EXPECT_EQ(h.finished.at(1).status, RequestStatus::FinishedError);
  EXPECT_NE(h.finished.at(1).error.find("needs 5 KV blocks"), std::string::npos);
  EXPECT_EQ(h.finished.at(2).status, RequestStatus::FinishedError);
  EXPECT_EQ(h.finished.at(2).finish_reason(), "error");
  EXPECT_FALSE(h.s.has_unfinished());
}

TEST(Scheduler, AbortMidPrefillAndMidDecodeFreesBlocksAtOnce) {
  Harness h(sched_config(8), kv_config(64));
  h.add(1, 20);
  h.add(2, 3);
  h.expect_steps({{{{1, 0, 8}}, {}, 2}});
  h.expect_steps({{{{1, 8, 8}}, {}, 4}});
  h.plan_step();  // 1 [16, 4), 2 [0, 3) in flight
  ASSERT_EQ(h.plan.chunks.size(), 2u);
  h.s.abort(1);  // mid-prefill, while its chunk runs
  EXPECT_EQ(h.kv.num_used_blocks(), 1);
  auto outs = h.finish_step();  // 1's chunk is ignored, its abort reported
  EXPECT_EQ(h.finished.at(1).status, RequestStatus::FinishedAborted);
  EXPECT_EQ(h.finished.at(1).finish_reason(), "abort");
  EXPECT_EQ(h.s.find(1), nullptr);
  h.plan_step();                                          // 2 decodes
  EXPECT_EQ(h.plan.finished, std::vector<RequestId>{1});  // the executor drops 1's state
  ASSERT_EQ(h.plan.chunks.size(), 1u);
  h.s.abort(2);  // mid-decode
  EXPECT_EQ(h.kv.num_used_blocks(), 0);
  h.finish_step();
  EXPECT_EQ(h.outputs.at(2).size(), 1u);  // the in-flight token was dropped
  EXPECT_FALSE(h.s.has_unfinished());
  h.s.abort(2);  // finished ids are ignored
  h.s.abort(99);
}

TEST(Scheduler, FailWhileAChunkRunsReportsTheErrorAtOnceAndIgnoresTheChunk) {
  Harness h(sched_config(8), kv_config(64));
  h.add(1, 6);
  h.add(2, 2);
  h.plan_step();  // 1 [0, 6), 2 [0, 2) in flight
  ASSERT_EQ(h.plan.chunks.size(), 2u);
  h.s.fail(1, "step 0 failed: boom", ErrorCause::StepFailed);
  EXPECT_EQ(h.kv.num_used_blocks(), 1);  // 1's two blocks are free at once
  const auto now = h.s.take_finished();  // reported now, before the step's result
  ASSERT_EQ(now.size(), 1u);
  EXPECT_EQ(now[0].id, 1);
  EXPECT_EQ(now[0].status, RequestStatus::FinishedError);
  EXPECT_EQ(now[0].error, "step 0 failed: boom");
  EXPECT_EQ(now[0].error_cause, ErrorCause::StepFailed);
  EXPECT_TRUE(h.s.take_finished().empty());  // once
  const auto outs = h.finish_step();           // 1's chunk ignored, 2 gets its token
  ASSERT_EQ(outs.size(), 1u);
  EXPECT_EQ(outs[0].id, 2);
  h.s.fail(1, "again", ErrorCause::Timeout);  // finished and unknown ids are ignored
  h.s.fail(99, "unknown", ErrorCause::Timeout);
  EXPECT_TRUE(h.s.take_finished().empty());
  h.s.abort(2);
  EXPECT_EQ(h.kv.num_used_blocks(), 0);
  EXPECT_EQ(h.s.take_finished().size(), 1u);  // 2's abort
  EXPECT_FALSE(h.s.has_unfinished());
}

TEST(Scheduler, PrefixHitStartsAfterTheCachedBlocksMinusTheReplayWindow) {
  for (int64_t window : {0, 4}) {
    KvCacheConfig kc = kv_config(64);
    kc.enable_prefix_cache = true;
    kc.window = window;
    Harness h(sched_config(100), kc);
    Ids prompt(13);
    for (int i = 0; i < 13; ++i) prompt[i] = 100 + i;
    RequestParams p;
    p.max_tokens = 1;
    h.s.add_request(1, prompt, p);
    h.expect_steps({{{{1, 0, 13}}, {}, 4}});
    prompt[12] = 7;  // same first 12 tokens (3 blocks)
    h.s.add_request(2, prompt, p);
    h.plan_step();
    ASSERT_EQ(h.plan.chunks.size(), 1u);
    EXPECT_EQ(h.plan.chunks[0].start, 12 - window);
    EXPECT_EQ(h.plan.chunks[0].num_cached_tokens, 12);
    EXPECT_EQ(h.plan.chunks[0].block_table.size(), 4u);
    h.finish_step();
    EXPECT_EQ(h.finished.at(2).num_cached_tokens, 12);
  }
}

TEST(Scheduler, StopStringAcrossTokensThroughUpdate) {
  static const model::Tokenizer tok =
      model::Tokenizer::load(std::string(TROUPE_TEST_DATA) + "/v41-tiny-seed7/tokenizer.json");
  const std::string text = "Once upon a time, the cat sat on the mat.";
  const Ids script = tok.encode(text, false);
  Harness h(sched_config(100), kv_config(64), &tok);
  RequestParams p;
  p.max_tokens = 100;
  p.stop = {"cat sat"};
  h.s.add_request(1, Ids{10, 11}, p);
  std::string streamed;
  RequestOutput last;
  for (size_t i = 0; h.s.has_unfinished(); ++i) {
    ASSERT_LT(i, script.size());
    StepPlan plan = h.s.schedule();
    const std::vector<SampledChunk> sampled = {SampledChunk{{script[i]}, {}}};
    for (const RequestOutput& o : h.s.update(plan, sampled)) {
      streamed += o.new_text;
      last = o;
    }
  }
  EXPECT_EQ(streamed, "Once upon a time, the ");
  EXPECT_EQ(last.finish_reason(), "stop");
  EXPECT_EQ(std::get<std::string>(last.stop_reason), "cat sat");
  EXPECT_EQ(h.kv.num_used_blocks(), 0);
}

TEST(Scheduler, EosStopsUnlessIgnoreEos) {
  Harness h(sched_config(100), kv_config(64));
  for (bool ignore : {false, true}) {
    RequestParams p;
    p.max_tokens = 4;
    p.ignore_eos = ignore;
    h.s.add_request(ignore ? 2 : 1, Ids{30, 31}, p);
  }
  // The mocked model answers EOS to everyone.
  for (int step = 0; h.s.has_unfinished(); ++step) {
    ASSERT_LT(step, 10);
    h.plan_step();
    const std::vector<SampledChunk> sampled(h.plan.chunks.size(), SampledChunk{{kEos}, {}});
    for (const RequestOutput& o : h.s.update(h.plan, sampled)) {
      auto& toks = h.outputs[o.id];
      toks.insert(toks.end(), o.new_tokens.begin(), o.new_tokens.end());
      if (o.finished()) h.finished[o.id] = o;
    }
  }
  EXPECT_EQ(h.outputs.at(1), (Ids{kEos}));
  EXPECT_EQ(h.finished.at(1).finish_reason(), "stop");
  EXPECT_EQ(h.outputs.at(2), (Ids{kEos, kEos, kEos, kEos}));
  EXPECT_EQ(h.finished.at(2).finish_reason(), "length");
  EXPECT_EQ(h.kv.num_used_blocks(), 0);
}

// The chunks of a request that asked for logprobs carry k; update() hands the executor's
// logprobs to the output with their tokens, and a request that asked for none gets none.
TEST(Scheduler, LogprobsTravelFromChunkToOutput) {
  Harness h(sched_config(100), kv_config(64));
  RequestParams with, without;
  with.num_logprobs = 3;
  with.max_tokens = without.max_tokens = 2;
  h.s.add_request(1, Ids{30, 31}, with);
  h.s.add_request(2, Ids{40, 41}, without);
  for (int step = 0; step < 2; ++step) {
    h.plan_step();
    ASSERT_EQ(h.plan.chunks.size(), 2u);
    EXPECT_EQ(h.plan.chunks[0].num_logprobs, 3);
    EXPECT_EQ(h.plan.chunks[1].num_logprobs, -1);
    const int32_t token = 100 + step;
    const SampleLogprobs lp{{token, -0.25f * float(step + 1)}, {{token, -0.25f}, {7, -2.0f}}};
    const std::vector<SampledChunk> sampled = {SampledChunk{{token}, {lp}},
                                               SampledChunk{{token}, {}}};
    const auto outs = h.s.update(h.plan, sampled);
    ASSERT_EQ(outs.size(), 2u);
    ASSERT_EQ(outs[0].new_logprobs.size(), 1u);
    EXPECT_EQ(outs[0].new_logprobs[0].sampled.token, token);
    EXPECT_EQ(outs[0].new_logprobs[0].sampled.logprob, lp.sampled.logprob);
    ASSERT_EQ(outs[0].new_logprobs[0].top.size(), 2u);
    EXPECT_EQ(outs[0].new_logprobs[0].top[1].token, 7);
    EXPECT_TRUE(outs[1].new_logprobs.empty());
  }
  EXPECT_FALSE(h.s.has_unfinished());
}

TEST(Scheduler, BadInputIsRejectedAtTheEdge) {
  SchedulerConfig sc = sched_config(100);
  sc.max_model_len = 10;
  Harness h(sc, kv_config(64));
  EXPECT_THROW(h.s.add_request(1, Ids{}, {}), Error);
  EXPECT_THROW(h.s.add_request(1, Ids(10, 5), {}), Error);  // no room for output
  RequestParams stops;
  stops.stop = {"x"};
  EXPECT_THROW(h.s.add_request(1, Ids{5}, stops), Error);  // no tokenizer
  RequestParams logprobs;
  logprobs.num_logprobs = -2;
  EXPECT_THROW(h.s.add_request(1, Ids{5}, logprobs), Error);  // -1 is "none"
  h.s.add_request(1, Ids{5}, {});
  EXPECT_THROW(h.s.add_request(1, Ids{5}, {}), Error);  // duplicate id
  SchedulerConfig bad;
  bad.max_num_batched_tokens = 0;
  KvCacheManager kv(kv_config(4));
  EXPECT_THROW(Scheduler(bad, kv, kEos), Error);
}

// Many requests with shared prefixes, random lengths, arrivals and aborts on a small pool
// with the prefix cache on: after every step the KV invariants hold and the plan keeps its
// limits; at the end no block is held and every token is the mocked model's.
TEST(Scheduler, RandomWorkloadLeaksNoBlock) {
  int64_t preemptions = 0, prefix_hits = 0, errors = 0;
  for (uint32_t seed : {1u, 2u, 3u}) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::mt19937 rng(seed);
    auto uni = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
    SchedulerConfig sc = sched_config(uni(8, 48));
    sc.max_num_running = uni(2, 8);
    sc.max_admissions_per_step = uni(1, 4);
    sc.max_prefill_context_read = uni(16, 96);
    sc.max_model_len = 200;
    KvCacheConfig kc = kv_config(uni(12, 40));
    kc.enable_prefix_cache = true;
    kc.window = 4 * uni(0, 2);
    kc.swa_slots = uni(2, 8);
    Harness h(sc, kc);
    const Ids shared = [&] {
      Ids s(64);
      for (auto& t : s) t = uni(20, 999);
      return s;
    }();
    std::map<RequestId, Ids> prompts;
    std::set<RequestId> aborted;
    RequestId next = 1;
    for (int step = 0; step < 2000 && (next <= 40 || h.s.has_unfinished()); ++step) {
      if (next <= 40 && uni(0, 2) == 0) {
        Ids prompt(shared.begin(), shared.begin() + uni(0, 64));
        for (int i = uni(1, 30); i > 0; --i) prompt.push_back(uni(20, 999));
        RequestParams p;
        p.max_tokens = uni(1, 20);
        prompts[next] = prompt;
        h.s.add_request(next++, prompt, p);
      }
      h.plan_step();
      int64_t prefill_ends = 0, first_prefill_end = -1;
      for (const ScheduledChunk& c : h.plan.chunks) {
        if (!c.prefill) continue;
        if (first_prefill_end < 0) first_prefill_end = c.end();
        prefill_ends += c.end();
      }
      ASSERT_LE(h.plan.num_tokens, sc.max_num_batched_tokens);
      ASSERT_LE(h.plan.num_admitted, sc.max_admissions_per_step);
      ASSERT_LE(int64_t(h.s.running_ids().size()), sc.max_num_running);
      preemptions += int64_t(h.plan.preempted.size());
      ASSERT_LE(prefill_ends - first_prefill_end,
                std::max<int64_t>(sc.max_prefill_context_read - first_prefill_end, 0));
      if (uni(0, 9) == 0 && next > 1) {
        const RequestId victim = uni(1, int(next - 1));
        if (h.s.find(victim) != nullptr) aborted.insert(victim);
        h.s.abort(victim);
      }
      h.finish_step();
    }
    EXPECT_FALSE(h.s.has_unfinished());
    EXPECT_EQ(h.kv.num_used_blocks(), 0);
    EXPECT_EQ(h.finished.size(), size_t(next - 1));
    for (const auto& [id, out] : h.finished) {
      const Ids& toks = h.outputs[id];
      const int64_t p = int64_t(prompts[id].size());
      for (size_t i = 0; i < toks.size(); ++i) ASSERT_EQ(toks[i], model_token(id, p + int64_t(i)));
      if (!aborted.count(id)) {
        EXPECT_NE(out.status, RequestStatus::FinishedAborted);
      }
      errors += out.status == RequestStatus::FinishedError;
    }
    prefix_hits += h.kv.stats().prefix_hits;
  }
  // The workload must reach the paths it is meant to check.
  EXPECT_GT(preemptions, 0);
  EXPECT_GT(prefix_hits, 0);
  std::cout << "random workload: " << preemptions << " preemptions, " << prefix_hits
            << " prefix hits, " << errors << " requests too big for the pool\n";
}

}  // namespace
}  // namespace troupe::runtime

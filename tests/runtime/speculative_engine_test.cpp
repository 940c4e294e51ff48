// Speculative decoding in the Engine (docs/dspark.md) on the golden tiny model: over a
// mixed batched workload (different prompt lengths and output lengths, prefix-cache hits,
// n > 1 siblings, an abort, preemption by a small KV budget) every request's greedy tokens
// equal the plain single-request forward's (support/plain_forward.h, an independent
// contiguous-state reference), and logprobs equal a non-speculative engine's - with the
// real DSpark draft (random weights: it accepts next to nothing) and with the TEST-ONLY
// oracle draft at acceptance 0.6 and 1.0 (so accepted runs and rollbacks of rejected
// tails are exercised), synchronous and asynchronous (StepPipeline depth 1 and 2).
#include <gtest/gtest.h>

#include <cstring>

#include "kernels/check.h"

#include <map>
#include <numeric>

#include "kernels/sampling.h"
#include "model/footprint.h"
#include "runtime/engine.h"
#include "runtime/golden_engine_config.h"
#include "runtime/speculative/dspark_drafter.h"
#include "runtime/speculative/oracle_drafter.h"
#include "support/golden.h"
#include "support/plain_forward.h"

namespace troupe::runtime {
namespace {

using testing::golden_draft;
using testing::golden_model;
using testing::random_tokens;

struct Job {
  RequestId id;
  std::vector<int32_t> prompt;
  int64_t max_tokens;
  std::vector<RequestId> siblings;  // n > 1: same prompt, same greedy tokens
  int32_t num_logprobs = -1;
};

// Prompts 4 and 5 start with prompt 1's first 64 tokens (prefix hits once 1's blocks are
// committed); request 6 has two siblings; request 2 is aborted after a few steps.
std::vector<Job> workload() {
  const std::vector<int32_t> shared = random_tokens(70, 301);
  auto with_shared = [&](int64_t n, uint32_t seed) {
    std::vector<int32_t> p(shared.begin(), shared.begin() + 64);
    const std::vector<int32_t> tail = random_tokens(n, seed);
    p.insert(p.end(), tail.begin(), tail.end());
    return p;
  };
  return {
      {0, random_tokens(3, 100), 20, {}, -1},
      {1, shared, 14, {}, 2},
      {2, random_tokens(17, 102), 30, {}, -1},
      {3, random_tokens(130, 103), 9, {}, -1},
      {4, with_shared(5, 104), 17, {}, 2},
      {5, with_shared(21, 105), 12, {}, -1},
      {6, random_tokens(45, 106), 11, {60, 61}, -1},
      {7, random_tokens(1, 107), 25, {}, -1},
  };
}
constexpr RequestId kAborted = 2;
constexpr int64_t kAbortAfterSteps = 6;

struct EngineRun {
  std::map<RequestId, std::vector<int32_t>> tokens;
  std::map<RequestId, std::vector<SampleLogprobs>> logprobs;
  EngineFigures figures;
};

// 48 tokens per step (chunked prefill), 6 running, a KV budget that preempts.
EngineConfig engine_config(bool async, int64_t k, const std::string& method) {
  const auto& g = golden_model();
  const auto st = model::request_state_bytes(g.config);
  const int64_t per_request = st.swa_bytes + st.dspark_bytes + st.compressor_bytes;
  EngineConfig c = golden_engine_config(6 * per_request + 14 * 16 * 212, async, 48, 6);
  c.executor.bounded_replay = false;  // full compute: the plain forward is the reference
  c.enable_prefix_snapshots = false;
  if (k > 0) {
    c.speculative.method = method;
    c.speculative.num_speculative_tokens = k;
  }
  return c;
}

// sampling: every request's parameters (seed: its own id added to sampling.seed).
EngineRun run(const model::Forward& forward, EngineConfig config, const Drafter* drafter,
              const kernels::SamplingParams& sampling = {}) {
  Engine e(forward, nullptr, config, drafter);
  for (const Job& j : workload()) {
    RequestParams p = greedy(j.max_tokens);
    p.num_logprobs = j.num_logprobs;
    p.sampling = sampling;
    p.sampling.seed = sampling.seed + static_cast<uint64_t>(j.id);
    std::vector<Sibling> sibs;
    for (RequestId s : j.siblings) sibs.push_back({s, p});
    e.add_request(j.id, j.prompt, p, sibs);
  }
  EngineRun out;
  for (int64_t step = 0; e.has_unfinished(); ++step) {
    if (step == kAbortAfterSteps) e.abort(kAborted);
    for (const RequestOutput& o : e.step()) {
      auto& t = out.tokens[o.id];
      t.insert(t.end(), o.new_tokens.begin(), o.new_tokens.end());
      auto& l = out.logprobs[o.id];
      l.insert(l.end(), o.new_logprobs.begin(), o.new_logprobs.end());
    }
    e.kv_cache().check_invariants();
    if (step > 5000) {
      ADD_FAILURE() << "engine did not finish";
      break;
    }
  }
  EXPECT_EQ(e.kv_cache().num_used_blocks(), 0);
  out.figures = e.figures();
  return out;
}

// The plain forward's greedy tokens of every job, by id (siblings included).
const std::map<RequestId, std::vector<int32_t>>& reference() {
  static const auto* ref = [] {
    auto* m = new std::map<RequestId, std::vector<int32_t>>;
    for (const Job& j : workload()) {
      (*m)[j.id] = testing::plain_greedy(j.prompt, j.max_tokens).tokens;
      for (RequestId s : j.siblings) (*m)[s] = (*m)[j.id];
    }
    return m;
  }();
  return *ref;
}

// The non-speculative engine's run (for logprobs), per scheduling mode.
const EngineRun& plain_engine_run(bool async) {
  static std::map<bool, EngineRun> runs;
  if (!runs.count(async)) runs[async] = run(*golden_draft().forward, engine_config(async, 0, ""), nullptr);
  return runs.at(async);
}

void expect_matches_reference(const EngineRun& got, bool async) {
  const auto& ref = reference();
  for (const auto& [id, want] : ref) {
    SCOPED_TRACE("request " + std::to_string(id));
    const std::vector<int32_t>& t = got.tokens.at(id);
    if (id == kAborted) {  // ended early: a prefix of the reference
      ASSERT_LE(t.size(), want.size());
      EXPECT_TRUE(std::equal(t.begin(), t.end(), want.begin()));
      continue;
    }
    EXPECT_EQ(t, want);
  }
  const EngineRun& plain = plain_engine_run(async);
  for (const Job& j : workload()) {
    if (j.num_logprobs < 0) continue;
    SCOPED_TRACE("logprobs of request " + std::to_string(j.id));
    const auto& a = got.logprobs.at(j.id);
    const auto& b = plain.logprobs.at(j.id);
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) {
      EXPECT_EQ(a[i].sampled.token, b[i].sampled.token);
      EXPECT_NEAR(a[i].sampled.logprob, b[i].sampled.logprob, 1e-4) << "token " << i;
      ASSERT_EQ(a[i].top.size(), b[i].top.size());
      for (size_t t = 0; t < a[i].top.size(); ++t) {
        EXPECT_EQ(a[i].top[t].token, b[i].top[t].token);
        EXPECT_NEAR(a[i].top[t].logprob, b[i].top[t].logprob, 1e-4);
      }
    }
  }
}

// The accepted-per-position counts add up and never grow with the position.
void expect_consistent_counts(const EngineFigures& f) {
  EXPECT_GT(f.spec_num_drafts, 0);
  EXPECT_LE(f.spec_num_draft_tokens, 3 * f.spec_num_drafts);
  const auto& per = f.spec_accepted_per_pos;
  EXPECT_EQ(std::accumulate(per.begin(), per.end(), int64_t(0)), f.spec_num_accepted_tokens);
  for (size_t i = 1; i < per.size(); ++i) EXPECT_LE(per[i], per[i - 1]);
}

class SpeculativeEngine : public ::testing::TestWithParam<bool> {};  // async scheduling

TEST_P(SpeculativeEngine, DsparkDraftMatchesPlainGreedy) {
  const auto& d = golden_draft();
  const DsparkDrafter drafter(*d.draft);
  const EngineRun got = run(*d.forward, engine_config(GetParam(), 3, "dspark"), &drafter);
  expect_matches_reference(got, GetParam());
  expect_consistent_counts(got.figures);
  EXPECT_GT(got.figures.preemptions, 0);  // the budget is small enough to preempt
  EXPECT_GT(got.figures.prefix_hit_tokens, 0);
}

// TEST-ONLY oracle draft: the reference continuation, each token kept with probability p.
OracleDrafter oracle(double p) {
  OracleDrafter o(p, golden_model().config.vocab_size, 17);
  for (const Job& j : workload()) {
    for (RequestId id : [&] {
           std::vector<RequestId> ids{j.id};
           ids.insert(ids.end(), j.siblings.begin(), j.siblings.end());
           return ids;
         }()) {
      std::vector<int32_t> seq = j.prompt;
      seq.insert(seq.end(), reference().at(id).begin(), reference().at(id).end());
      o.set_sequence(id, seq);
    }
  }
  return o;
}

TEST_P(SpeculativeEngine, OracleDraftAllAcceptedMatchesPlainGreedy) {
  const OracleDrafter drafter = oracle(1.0);
  const EngineRun got = run(*golden_draft().forward, engine_config(GetParam(), 3, "oracle"), &drafter);
  expect_matches_reference(got, GetParam());
  expect_consistent_counts(got.figures);
  EXPECT_EQ(got.figures.spec_num_accepted_tokens, got.figures.spec_num_draft_tokens);
  // Fewer steps than tokens: accepted runs emit several tokens per step.
  int64_t tokens = 0;
  for (const auto& [id, t] : got.tokens) tokens += static_cast<int64_t>(t.size());
  EXPECT_GT(got.figures.spec_num_accepted_tokens, tokens / 3);
}

TEST_P(SpeculativeEngine, OracleDraftPartlyAcceptedMatchesPlainGreedy) {
  const OracleDrafter drafter = oracle(0.6);
  const EngineRun got = run(*golden_draft().forward, engine_config(GetParam(), 3, "oracle"), &drafter);
  expect_matches_reference(got, GetParam());
  expect_consistent_counts(got.figures);
  EXPECT_GT(got.figures.spec_num_accepted_tokens, 0);
  EXPECT_LT(got.figures.spec_num_accepted_tokens, got.figures.spec_num_draft_tokens);
}

// Sampling (temperature > 0): verification draws each token with the request's seed and
// output index as plain decoding does, so the tokens equal a plain engine's run with the
// same seeds - with drafts that are often right (the oracle knows the plain sampled run).
TEST_P(SpeculativeEngine, SampledTokensEqualPlainSampling) {
  kernels::SamplingParams s;
  s.temperature = 0.9f;
  s.top_k = 40;
  s.top_p = 0.95f;
  s.seed = 5;
  const auto& d = golden_draft();
  const EngineRun plain = run(*d.forward, engine_config(GetParam(), 0, ""), nullptr, s);
  OracleDrafter drafter(0.7, golden_model().config.vocab_size, 3);
  for (const Job& j : workload()) {
    std::vector<RequestId> ids{j.id};
    ids.insert(ids.end(), j.siblings.begin(), j.siblings.end());
    for (RequestId id : ids) {
      std::vector<int32_t> seq = j.prompt;
      seq.insert(seq.end(), plain.tokens.at(id).begin(), plain.tokens.at(id).end());
      drafter.set_sequence(id, seq);
    }
  }
  const EngineRun got = run(*d.forward, engine_config(GetParam(), 3, "oracle"), &drafter, s);
  for (const auto& [id, want] : plain.tokens) {
    SCOPED_TRACE("request " + std::to_string(id));
    const std::vector<int32_t>& t = got.tokens.at(id);
    if (id == kAborted) {  // aborted in both runs, after different numbers of tokens
      const size_t n = std::min(t.size(), want.size());
      EXPECT_TRUE(std::equal(t.begin(), t.begin() + n, want.begin()));
      continue;
    }
    EXPECT_EQ(t, want);
  }
  expect_consistent_counts(got.figures);
  EXPECT_GT(got.figures.spec_num_accepted_tokens, 0);
  // The real draft on sampled requests: same tokens too.
  const DsparkDrafter dspark(*d.draft);
  const EngineRun real = run(*d.forward, engine_config(GetParam(), 3, "dspark"), &dspark, s);
  for (const auto& [id, want] : plain.tokens) {
    if (id != kAborted) {
      EXPECT_EQ(real.tokens.at(id), want) << "request " << id;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Scheduling, SpeculativeEngine, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? "Async" : "Sync"; });

// Requests arriving one per step, their 20-token prompts in two chunks (the window
// snapshot rule ends the first at the block boundary, 16; the second is planned while the
// first runs, so each request's decodes start a plan later than they would; with
// snapshots off nothing splits here). Under async scheduling a speculating decode waits
// for its accepted count, and before the scheduler kept every speculating request in one
// phase they settled into two, each verified every other step (32 steps, 28 with decodes,
// where sync scheduling takes 22 and 19 here). Now the async run takes at most one step
// with decodes more than the sync one, with the same tokens.
TEST(SpeculativeEngineAsync, StaggeredArrivalsVerifyTogether) {
  constexpr int kRequests = 8;
  struct Run {
    std::map<RequestId, std::vector<int32_t>> tokens;
    int64_t steps = 0, decode_steps = 0;
  };
  auto serve = [](bool async, const Drafter* drafter) {
    EngineConfig c = golden_engine_config(int64_t(64) << 20, async, 512, 16);
    if (drafter != nullptr) {
      c.speculative.method = "oracle";
      c.speculative.num_speculative_tokens = 3;
    }
    Engine e(*golden_model().forward, nullptr, c, drafter);
    Run r;
    for (int added = 0; added < kRequests || e.has_unfinished(); ++r.steps) {
      if (added < kRequests) {
        e.add_request(added, random_tokens(20, 500 + uint32_t(added)), greedy(40));
        ++added;
      }
      for (const RequestOutput& o : e.step())
        r.tokens[o.id].insert(r.tokens[o.id].end(), o.new_tokens.begin(), o.new_tokens.end());
    }
    const EngineFigures f = e.figures();
    for (size_t k = 1; k < f.spec_steps_by_k.size(); ++k) r.decode_steps += f.spec_steps_by_k[k];
    return r;
  };
  const Run plain = serve(false, nullptr);
  OracleDrafter drafter(0.9, golden_model().config.vocab_size, 5);
  for (const auto& [id, out] : plain.tokens) {
    std::vector<int32_t> seq = random_tokens(20, 500 + uint32_t(id));
    seq.insert(seq.end(), out.begin(), out.end());
    drafter.set_sequence(id, seq);
  }
  const Run sync = serve(false, &drafter), async = serve(true, &drafter);
  EXPECT_EQ(sync.tokens, plain.tokens);
  EXPECT_EQ(async.tokens, plain.tokens);
  ASSERT_GT(sync.decode_steps, 0);
  EXPECT_LE(async.decode_steps, sync.decode_steps + 1);
  EXPECT_LE(async.steps, sync.steps + 2);
}

TEST(SpeculativeEngineConfig, NeedsADrafterAndASmallEnoughK) {
  const auto& d = golden_draft();
  EXPECT_THROW(Engine(*d.forward, nullptr, engine_config(false, 3, "dspark"), nullptr), troupe::Error);
  const DsparkDrafter drafter(*d.draft);
  EXPECT_THROW(Engine(*d.forward, nullptr,
                      engine_config(false, golden_model().config.sliding_window, "dspark"),
                      &drafter),
               troupe::Error);
}

// A stop token or stop string reached inside an accepted run (the oracle accepts all, so a
// step emits 4 tokens) ends the request at that token, with the plain engine's tokens, text
// and finish reason; the tokens after it in the run are dropped.
TEST(SpeculativeEngineStops, StopInsideAnAcceptedRunEndsThere) {
  const auto& d = golden_draft();
  const model::Tokenizer& tok = testing::golden_tokenizer();
  const std::vector<int32_t> prompt = random_tokens(20, 55);
  const std::vector<int32_t> ref = testing::plain_greedy(prompt, 30).tokens;
  const std::string ref_text = tok.decode(ref, true);
  // Output token i is the last of its step when i % 4 == 0: pick one inside a run, whose
  // token and text do not occur before it.
  int64_t at = -1;
  std::string stop;
  for (int64_t i = 5; i < 25 && at < 0; ++i) {
    if (i % 4 == 0 || std::find(ref.begin(), ref.begin() + i, ref[i]) != ref.begin() + i) continue;
    const std::string piece = tok.decode(std::vector<int32_t>{ref[i]}, true);
    const std::string before = tok.decode(std::vector<int32_t>(ref.begin(), ref.begin() + i), true);
    if (piece.size() < 2 || before.find(piece) != std::string::npos) continue;
    at = i;
    stop = piece;
  }
  ASSERT_GE(at, 0) << "no suitable stop position in " << ref_text;
  OracleDrafter oracle(1.0, golden_model().config.vocab_size);
  std::vector<int32_t> seq = prompt;
  seq.insert(seq.end(), ref.begin(), ref.end());
  oracle.set_sequence(0, seq);
  for (const bool by_string : {false, true}) {
    SCOPED_TRACE(by_string ? "stop string '" + stop + "'" : "stop token");
    RequestParams p = greedy(30);
    if (by_string) {
      p.stop = {stop};
    } else {
      p.stop_token_ids = {ref[at]};
    }
    struct Out {
      std::vector<int32_t> tokens;
      std::string text, reason;
      int64_t accepted = 0;
    };
    auto go = [&](int64_t k) {
      Engine e(*d.forward, &tok, engine_config(false, k, "oracle"), k ? &oracle : nullptr);
      e.add_request(0, prompt, p);
      Out o;
      while (e.has_unfinished())
        for (const RequestOutput& r : e.step()) {
          o.tokens.insert(o.tokens.end(), r.new_tokens.begin(), r.new_tokens.end());
          o.text += r.new_text;
          if (r.finished()) o.reason = std::string(r.finish_reason());
        }
      o.accepted = e.figures().spec_num_accepted_tokens;
      return o;
    };
    const Out plain = go(0), spec = go(3);
    EXPECT_EQ(plain.reason, "stop");
    EXPECT_LE(static_cast<int64_t>(plain.tokens.size()), at + 1);
    EXPECT_EQ(spec.tokens, plain.tokens);
    EXPECT_EQ(spec.text, plain.text);
    EXPECT_EQ(spec.reason, plain.reason);
    EXPECT_GT(spec.accepted, 0);
  }
}

}  // namespace
}  // namespace troupe::runtime

// KV hand-off between engines (issue 12, docs/pd.md): a request prefilled on one engine
// and continued on another from the exported KV - blocks, SWA windows, compressor carry
// - gives the tokens and text of one engine running it alone, with no prefill and no
// replay on the receiving side; the sender's blocks are free once released. The same for
// a request drained mid-decode, under synchronous and asynchronous scheduling.
//
// A mixed workload compares tokens and text, greedy and sampled: its batches differ
// between the runs, which the forward's rows never depend on. One request at a time,
// every logit of every output token equals the undisturbed run's bit for bit. The
// receiver admits at most max_kv_loads_per_step arrivals a step, and refuses hand-offs it
// cannot continue with a clear error, staying usable.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include "kernels/check.h"
#include "model/llama_forward.h"
#include "runtime/engine.h"
#include "runtime/golden_engine_config.h"
#include "runtime/kv_transfer/kv_handoff_wire.h"
#include "support/golden.h"
#include "support/test_paths.h"

namespace troupe::runtime {
namespace {

using testing::golden_model;
using testing::golden_tokenizer;
using testing::random_tokens;

struct Job {
  RequestId id;
  std::vector<int32_t> prompt;
  RequestParams params;
};

struct Result {
  std::vector<int32_t> tokens;
  std::vector<SampleLogprobs> logprobs;
  std::string text;
  RequestStatus status = RequestStatus::Waiting;
  int64_t num_cached_tokens = 0;
};

EngineConfig config(bool async, int64_t kv_loads = 4) {
  // 64 tokens a step: long prompts take several chunks; 16-token blocks.
  EngineConfig c = golden_engine_config(int64_t(32) << 20, async, 64, 8);
  c.scheduler.max_kv_loads_per_step = kv_loads;
  return c;
}

// Prompts of every shape against 16-token blocks (shorter than one, on a boundary, one
// past it, several chunks), greedy and sampled, two sharing a 48-token prefix.
std::vector<Job> workload() {
  std::vector<Job> jobs;
  const std::vector<int64_t> lengths = {5, 16, 17, 40, 64, 100, 130, 33, 53};
  for (size_t i = 0; i < lengths.size(); ++i)
    jobs.push_back({RequestId(i), random_tokens(lengths[i], 100 + uint32_t(i)), greedy(10 + int64_t(i))});
  for (int k = 0; k < 2; ++k) {  // sampled: their seeds reproduce wherever they run
    RequestParams p = greedy(12);
    p.sampling.temperature = 0.8f;
    p.sampling.top_k = 50;
    p.sampling.seed = 77 + uint64_t(k);
    jobs.push_back({RequestId(10 + k), random_tokens(33 + 20 * k, 200 + uint32_t(k)), p});
  }
  std::vector<int32_t> shared = random_tokens(48, 300);
  for (int k = 0; k < 2; ++k) {
    std::vector<int32_t> prompt = shared;
    const std::vector<int32_t> tail = random_tokens(7 + k, 310 + uint32_t(k));
    prompt.insert(prompt.end(), tail.begin(), tail.end());
    jobs.push_back({RequestId(20 + k), prompt, greedy(9)});
  }
  return jobs;
}

// Every logit: logprobs over the whole vocabulary; sampled with a seed when asked.
RequestParams every_logit(int64_t max_tokens, bool sampled, uint64_t seed) {
  RequestParams p = greedy(max_tokens);
  p.num_logprobs = static_cast<int32_t>(golden_model().config.vocab_size);
  if (sampled) {
    p.sampling.temperature = 0.8f;
    p.sampling.top_k = 50;
    p.sampling.seed = seed;
  }
  return p;
}

void collect(const std::vector<RequestOutput>& outs, std::map<RequestId, Result>& got) {
  for (const RequestOutput& o : outs) {
    Result& r = got[o.id];
    r.tokens.insert(r.tokens.end(), o.new_tokens.begin(), o.new_tokens.end());
    r.logprobs.insert(r.logprobs.end(), o.new_logprobs.begin(), o.new_logprobs.end());
    r.text += o.new_text;
    r.status = o.status;
    r.num_cached_tokens = o.num_cached_tokens;
  }
}

void run_all(Engine& e, std::map<RequestId, Result>& got) {
  for (int n = 0; e.has_unfinished() && n < 5000; ++n) {
    collect(e.step(), got);
    e.kv_cache().check_invariants();
  }
  ASSERT_FALSE(e.has_unfinished());
}

std::map<RequestId, Result> run_alone(const std::vector<Job>& jobs, bool async) {
  Engine e(*golden_model().forward, &golden_tokenizer(), config(async));
  for (const Job& j : jobs) e.add_request(j.id, j.prompt, j.params);
  std::map<RequestId, Result> got;
  run_all(e, got);
  return got;
}

std::map<RequestId, RequestParams> params_of(const std::vector<Job>& jobs) {
  std::map<RequestId, RequestParams> p;
  for (const Job& j : jobs) p[j.id] = j.params;
  return p;
}

// Runs `from` to its end, moving each request it hands off to `to` as it comes, as a
// transfer agent does: export, import on the receiver, release on the sender. (Parked
// requests hold their KV until released, so later admissions wait for those moves.)
void run_and_move(Engine& from, Engine& to, const std::map<RequestId, RequestParams>& params,
                  std::map<RequestId, Result>& got) {
  for (int n = 0; from.has_unfinished() && n < 5000; ++n) {
    const std::vector<RequestOutput> outs = from.step();
    collect(outs, got);
    for (const RequestOutput& o : outs) {
      if (o.status != RequestStatus::HandedOff) continue;
      runtime::KvHandoff h = from.export_request(o.id);
      from.release_handed_off(o.id);
      to.import_request(o.id, std::move(h), params.at(o.id));
    }
    from.kv_cache().check_invariants();
  }
  ASSERT_FALSE(from.has_unfinished());
}

void add_handing_off(Engine& e, const std::vector<Job>& jobs) {
  for (const Job& j : jobs) {
    RequestParams p = j.params;
    p.kv_hand_off_after = 1;
    e.add_request(j.id, j.prompt, p);
  }
}

class KvHandoffEngines : public ::testing::TestWithParam<bool> {};

TEST_P(KvHandoffEngines, APrefilledRequestContinuesElsewhereBitForBit) {
  const bool async = GetParam();
  const std::vector<Job> jobs = workload();
  const auto alone = run_alone(jobs, async);

  Engine prefill(*golden_model().forward, &golden_tokenizer(), config(async));
  Engine decode(*golden_model().forward, &golden_tokenizer(), config(async));
  add_handing_off(prefill, jobs);
  std::map<RequestId, Result> first;
  run_and_move(prefill, decode, params_of(jobs), first);
  for (const Job& j : jobs) {
    ASSERT_EQ(first[j.id].status, RequestStatus::HandedOff) << j.id;
    ASSERT_EQ(first[j.id].tokens.size(), 1u) << j.id;
  }
  // Released: the prefill side holds no block and no slot of them any more.
  EXPECT_EQ(prefill.kv_cache().num_used_blocks(), 0);
  EXPECT_EQ(prefill.scheduler().num_parked(), 0);

  std::map<RequestId, Result> rest;
  run_all(decode, rest);
  int64_t decodes = 0;
  for (const Job& j : jobs) {
    std::vector<int32_t> tokens = first[j.id].tokens;
    tokens.insert(tokens.end(), rest[j.id].tokens.begin(), rest[j.id].tokens.end());
    EXPECT_EQ(tokens, alone.at(j.id).tokens) << "request " << j.id;
    EXPECT_EQ(first[j.id].text + rest[j.id].text, alone.at(j.id).text) << "request " << j.id;
    EXPECT_EQ(rest[j.id].status, alone.at(j.id).status) << j.id;
    EXPECT_EQ(rest[j.id].num_cached_tokens, first[j.id].num_cached_tokens) << j.id;  // usage
    decodes += j.params.max_tokens - 1;
  }
  // No prefill and no replay there: one token computed per decode, nothing else.
  const EngineFigures f = decode.figures();
  EXPECT_EQ(f.scheduled_tokens, decodes);
  EXPECT_EQ(f.preemptions, 0);
  EXPECT_EQ(decode.kv_cache().stats().replay_tokens, 0);
  EXPECT_EQ(decode.kv_cache().num_used_blocks(), 0);
}

TEST_P(KvHandoffEngines, ADrainedRequestContinuesElsewhereBitForBit) {
  const bool async = GetParam();
  const std::vector<Job> jobs = workload();
  const auto alone = run_alone(jobs, async);

  Engine a(*golden_model().forward, &golden_tokenizer(), config(async));
  for (const Job& j : jobs) a.add_request(j.id, j.prompt, j.params);
  std::map<RequestId, Result> before;
  for (int n = 0; n < 6; ++n) collect(a.step(), before);  // some decode, some still prefill
  int now = 0, later = 0, not_held = 0;
  for (const Job& j : jobs) {
    const Scheduler::HandOff how = a.hand_off(j.id);
    now += how == Scheduler::HandOff::Now;
    later += how == Scheduler::HandOff::AfterStep;
    not_held += how == Scheduler::HandOff::NotHeld;
  }
  // Both cases occur: the workload is longer than six steps' budget.
  EXPECT_GT(now + later, 0);
  EXPECT_GT(later + not_held, 0);
  Engine b(*golden_model().forward, &golden_tokenizer(), config(async));
  run_and_move(a, b, params_of(jobs), before);
  std::map<RequestId, Result> after;
  int moved = 0;
  for (const Job& j : jobs) {
    moved += before[j.id].status == RequestStatus::HandedOff;
    ASSERT_TRUE(is_finished(before[j.id].status)) << j.id;  // moved, or ran to its end on `a`
  }
  EXPECT_EQ(moved, now + later);

  EXPECT_EQ(a.kv_cache().num_used_blocks(), 0);
  run_all(b, after);
  for (const Job& j : jobs) {
    std::vector<int32_t> tokens = before[j.id].tokens;
    tokens.insert(tokens.end(), after[j.id].tokens.begin(), after[j.id].tokens.end());
    EXPECT_EQ(tokens, alone.at(j.id).tokens) << "request " << j.id;
    EXPECT_EQ(before[j.id].text + after[j.id].text, alone.at(j.id).text) << "request " << j.id;
  }
  EXPECT_EQ(b.kv_cache().stats().replay_tokens, 0);
}

// One request at a time, so both runs batch alike: every logit equals, greedy and sampled,
// moved after its prefill or drained after `drain_after` steps.
TEST_P(KvHandoffEngines, EveryLogitEqualsTheUndisturbedRunsOneRequestAtATime) {
  const bool async = GetParam();
  const std::vector<int64_t> lengths = {5, 17, 53, 100};
  int checked = 0;
  for (size_t i = 0; i < lengths.size(); ++i) {
    for (const bool sampled : {false, true}) {
      for (const int drain_after : {0, 4}) {
        const Job j{RequestId(i), random_tokens(lengths[i], 400 + uint32_t(i)),
                    every_logit(9, sampled, 1000 + i)};
        const Result alone = run_alone({j}, async).at(j.id);
        Engine a(*golden_model().forward, &golden_tokenizer(), config(async));
        Engine b(*golden_model().forward, &golden_tokenizer(), config(async));
        std::map<RequestId, Result> before, after;
        if (drain_after == 0) {
          add_handing_off(a, {j});
        } else {
          a.add_request(j.id, j.prompt, j.params);
          for (int n = 0; n < drain_after && a.has_unfinished(); ++n) collect(a.step(), before);
          if (a.hand_off(j.id) == Scheduler::HandOff::Now) {  // parked: export it at once
            b.import_request(j.id, a.export_request(j.id), j.params);
            a.release_handed_off(j.id);
            before[j.id].status = RequestStatus::HandedOff;
          }
        }
        run_and_move(a, b, params_of({j}), before);
        ASSERT_EQ(before[j.id].status, RequestStatus::HandedOff) << j.id << " " << drain_after;
        run_all(b, after);
        Result whole = before[j.id];
        whole.tokens.insert(whole.tokens.end(), after[j.id].tokens.begin(), after[j.id].tokens.end());
        whole.logprobs.insert(whole.logprobs.end(), after[j.id].logprobs.begin(), after[j.id].logprobs.end());
        EXPECT_EQ(whole.tokens, alone.tokens) << "prompt " << lengths[i] << " drain " << drain_after;
        EXPECT_TRUE(whole.logprobs == alone.logprobs) << "prompt " << lengths[i] << " drain " << drain_after;
        EXPECT_EQ(whole.text + after[j.id].text, alone.text);
        ++checked;
      }
    }
  }
  EXPECT_EQ(checked, 16);
}

INSTANTIATE_TEST_SUITE_P(Scheduling, KvHandoffEngines, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? "async" : "sync"; });

// A burst of arrivals is admitted max_kv_loads_per_step a step.
TEST(KvHandoffAdmission, AtMostMaxKvLoadsPerStepArrive) {
  const std::vector<Job> jobs = workload();
  Engine prefill(*golden_model().forward, nullptr, config(false));
  EngineConfig c = config(false, /*kv_loads=*/2);
  c.scheduler.max_num_running = 16;  // admissions stop at the loads cap, not here
  Engine decode(*golden_model().forward, nullptr, c);
  add_handing_off(prefill, jobs);
  std::map<RequestId, Result> first;
  run_and_move(prefill, decode, params_of(jobs), first);
  std::vector<int64_t> admitted;
  while (decode.has_unfinished() && admitted.size() < 10) {
    decode.step();
    admitted.push_back(decode.figures().admitted);
  }
  ASSERT_GE(admitted.size(), 6u);
  for (size_t i = 0; i < 6; ++i)
    EXPECT_EQ(admitted[i], std::min<int64_t>(2 * int64_t(i + 1), int64_t(jobs.size()))) << "step " << i;
}

// The second of two requests sharing a prefix finds it cached on the receiver: only the
// blocks past it are loaded, and the tokens stay the same as one engine running them one
// after the other. (That reference, not both at once: the second's prompt is a prefix
// hit on the prefill side, and under bounded replay such a hit continues the first
// request's window state, not a cold prefill's - docs/kv-cache.md "Exactness". Against
// both at once the greedy tokens differ on the AVX-512 path.)
TEST(KvHandoffAdmission, APrefixCachedOnTheReceiverIsNotLoadedAgain) {
  std::vector<Job> jobs;
  for (const Job& j : workload())
    if (j.id >= 20) jobs.push_back(j);
  std::map<RequestId, Result> alone;
  {
    Engine e(*golden_model().forward, nullptr, config(false));
    for (const Job& j : jobs) {
      e.add_request(j.id, j.prompt, j.params);
      run_all(e, alone);
    }
  }
  Engine prefill(*golden_model().forward, nullptr, config(false));
  Engine decode(*golden_model().forward, nullptr, config(false));
  std::map<RequestId, Result> first, rest;
  for (const Job& j : jobs) {
    add_handing_off(prefill, {j});
    run_and_move(prefill, decode, params_of(jobs), first);
    run_all(decode, rest);
  }
  EXPECT_EQ(decode.kv_cache().stats().hit_tokens, 48);  // the shared 3 blocks, once
  for (const Job& j : jobs) {
    std::vector<int32_t> tokens = first[j.id].tokens;
    tokens.insert(tokens.end(), rest[j.id].tokens.begin(), rest[j.id].tokens.end());
    EXPECT_EQ(tokens, alone.at(j.id).tokens) << "request " << j.id;
  }
}

// Hand-offs the receiver cannot continue are refused naming why; one whose KV it cannot
// load recomputes instead, naming why; the engine stays usable.
TEST(KvHandoffAdmission, BadHandOffsAreRefusedOrRecomputedAndTheEngineCarriesOn) {
  const Job j = workload()[3];
  Engine prefill(*golden_model().forward, nullptr, config(false));
  add_handing_off(prefill, {j});
  std::map<RequestId, Result> first;
  run_all(prefill, first);
  const runtime::KvHandoff good = prefill.export_request(j.id);

  Engine decode(*golden_model().forward, nullptr, config(false));
  auto refused = [&](runtime::KvHandoff h, RequestParams params, const std::string& why) {
    try {
      decode.import_request(j.id, std::move(h), params);
      ADD_FAILURE() << "accepted a hand-off that should fail with: " << why;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
    }
  };
  RequestId next = 1000;  // each recomputing import takes an id of its own
  auto recomputes = [&](runtime::KvHandoff h, const std::string& why) {
    const runtime::ImportResult r = decode.import_request(next++, std::move(h), j.params);
    EXPECT_FALSE(r.loads_kv) << why;
    EXPECT_NE(r.kv_refused.find(why), std::string::npos) << r.kv_refused;
  };
  runtime::KvHandoff h = good;
  h.shape.block_size = 32;
  recomputes(h, "KV layout");
  h = good;
  h.region.resize(h.region.size() - 3);
  recomputes(h, "malformed");
  h = good;
  h.region.push_back(0);
  recomputes(h, "trail");
  h = good;
  h.num_blocks += 1;
  recomputes(h, "blocks for");
  h = good;
  runtime::drop_kv(h);
  recomputes(h, "carries no KV");
  h = good;
  h.tokens.back() = int32_t(golden_model().config.vocab_size);
  refused(h, j.params, "out of the vocabulary");
  h = good;
  h.num_prompt_tokens = int64_t(h.tokens.size());
  refused(h, j.params, "needs the prompt and a sampled token");
  h = good;
  h.streamed_text_bytes = h.text.size() + 1;
  refused(h, j.params, "text state");
  RequestParams done = j.params;
  done.max_tokens = 1;
  refused(good, done, "output tokens already");

  Engine other_block(*golden_model().forward, nullptr, [] {
    EngineConfig c = config(false);
    c.block_size = 32;
    return c;
  }());
  EXPECT_FALSE(other_block.import_request(j.id, good, j.params).loads_kv);
  EXPECT_THROW(prefill.export_request(j.id + 1), Error);  // not parked

  EXPECT_TRUE(decode.import_request(j.id, good, j.params).loads_kv);
  EXPECT_THROW(decode.import_request(j.id, good, j.params), Error);  // the id is in use
  std::map<RequestId, Result> rest;
  run_all(decode, rest);
  for (RequestId id : {j.id, RequestId{1000}, RequestId{1004}}) {
    EXPECT_EQ(int64_t(rest[id].tokens.size()), j.params.max_tokens - 1) << id;
    EXPECT_EQ(rest[id].status, RequestStatus::FinishedLength) << id;
  }
}

// A LLaMA block of per-head runs and one of whole rows (a build before 2026-12-08) hold the
// same bytes in other places: the shapes differ, so a hand-off between them is refused
// by its layout (and recomputed), never read as the other's rows.
TEST(KvHandoffShape, TheRowsPiecesArePartOfTheLayout) {
  model::LlamaConfig c;
  c.vocab_size = 80, c.dim = 64, c.layers = 3, c.heads = 4, c.kv_heads = 2, c.head_dim = 16;
  c.context_length = 128;
  const model::ServingShape runs = model::llama_serving_shape(c);
  model::ServingShape whole = runs;
  whole.rows.ckv_pieces = 1;
  const runtime::KvHandoffShape a = runtime::KvHandoffShape::of(runs, 16, 3);
  const runtime::KvHandoffShape b = runtime::KvHandoffShape::of(whole, 16, 3);
  EXPECT_EQ(a.block_bytes, b.block_bytes);
  EXPECT_FALSE(a == b);
  EXPECT_EQ(b.rows_mode, 3);  // one piece: the executor's code alone, as before
  runtime::KvHandoff h;
  h.tokens = {1, 2};
  h.num_prompt_tokens = 1;
  h.shape = b;
  const std::string why = runtime::check_kv_handoff(h, a, runs);
  EXPECT_NE(why.find("KV layout"), std::string::npos) << why;
}

// The fallback of a failed move: the receiver gets the tokens only and recomputes them (a
// prefill of prompt + first token). Greedy tokens equal an undisturbed run's, the text
// streamed before the move is not streamed again, and every block comes back.
TEST(KvHandoffAdmission, ARecomputedHandOffContinuesWithTheSameTokens) {
  const std::vector<Job> jobs = workload();
  const auto alone = run_alone(jobs, false);
  Engine prefill(*golden_model().forward, &golden_tokenizer(), config(false));
  Engine decode(*golden_model().forward, &golden_tokenizer(), config(false));
  add_handing_off(prefill, jobs);
  std::map<RequestId, Result> first, rest;
  for (int n = 0; prefill.has_unfinished() && n < 5000; ++n) {
    const std::vector<RequestOutput> outs = prefill.step();
    collect(outs, first);
    for (const RequestOutput& o : outs) {
      if (o.status != RequestStatus::HandedOff) continue;
      runtime::KvHandoff h = prefill.export_request(o.id);
      prefill.release_handed_off(o.id);
      runtime::drop_kv(h);
      EXPECT_FALSE(decode.import_request(o.id, std::move(h), params_of(jobs).at(o.id)).loads_kv);
    }
  }
  run_all(decode, rest);
  EXPECT_EQ(decode.figures().used_blocks, 0);
  EXPECT_EQ(prefill.figures().used_blocks, 0);
  for (const Job& j : jobs) {
    std::vector<int32_t> tokens = first[j.id].tokens;
    tokens.insert(tokens.end(), rest[j.id].tokens.begin(), rest[j.id].tokens.end());
    EXPECT_EQ(tokens, alone.at(j.id).tokens) << "request " << j.id;
    EXPECT_EQ(first[j.id].text + rest[j.id].text, alone.at(j.id).text) << "request " << j.id;
  }
}

// The bytes between processes: a real hand-off round-trips; a cut one, a wrong magic or
// a count past the end is an error naming the field, never a read past the input. The
// fuzz corpus's seed is such a hand-off (v41-tiny, a 17-token prompt): it must still be
// one this build accepts (TROUPE_WRITE_CORPUS=1 rewrites it after a format change).
TEST(KvHandoffWire, ARealHandOffRoundTripsAndBadBytesAreRefused) {
  const Job j{1, random_tokens(17, 9), greedy(4)};
  Engine prefill(*golden_model().forward, &golden_tokenizer(), config(false));
  add_handing_off(prefill, {j});
  std::map<RequestId, Result> first;
  run_all(prefill, first);
  const runtime::KvHandoff h = prefill.export_request(j.id);
  EXPECT_EQ(h.num_blocks, 2);
  EXPECT_EQ(h.text, first[j.id].text);
  const std::vector<std::byte> wire = encode_kv_handoff(h);
  EXPECT_TRUE(decode_kv_handoff(wire) == h);

  auto refused = [](std::vector<std::byte> bytes, const std::string& why) {
    try {
      decode_kv_handoff(bytes);
      ADD_FAILURE() << "decoded bytes that should fail with: " << why;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
    }
  };
  refused({wire.begin(), wire.end() - 1}, "region");
  refused({wire.begin(), wire.begin() + 10}, "token count");
  std::vector<std::byte> bad = wire;
  bad[0] = std::byte('X');
  refused(bad, "magic");
  bad = wire;
  bad[8] = bad[9] = bad[10] = std::byte(0xff);  // the token count's low bytes
  refused(bad, "tokens");
  bad = wire;
  bad.push_back(std::byte(0));
  refused(bad, "trailing");

  const std::filesystem::path seed =
      std::filesystem::path(TROUPE_TEST_DATA) / ".." / ".." / "fuzz/corpus/kv_handoff/prefill-17.bin";
  if (std::getenv("TROUPE_WRITE_CORPUS") != nullptr) {
    std::ofstream(seed, std::ios::binary).write(reinterpret_cast<const char*>(wire.data()), std::streamsize(wire.size()));
  }
  std::ifstream in(seed, std::ios::binary);
  ASSERT_TRUE(in) << seed;
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto* b = reinterpret_cast<const std::byte*>(bytes.data());
  const runtime::KvHandoff from_seed = decode_kv_handoff(std::vector<std::byte>(b, b + bytes.size()));
  EXPECT_EQ(check_kv_handoff(from_seed, prefill.kv_shape(), golden_model().config), "");
}

}  // namespace
}  // namespace troupe::runtime

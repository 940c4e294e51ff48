// Expert parallelism for LLaMA-family MoE models (issue 15): DEP-R (runtime::DepEngine:
// R ranks, each its own requests and paged KV, the routed experts spread over the ranks
// through the same ExpertParallel exchange as V4.1's, lockstep with dummy steps) gives the
// one-rank Engine's greedy tokens and logprobs bit for bit, on a Mixtral-style q8_0 file
// (R = 2, and R = 3 whose 9 slots pad 8 experts), a Qwen2-MoE file (its shared expert
// stays on the home rank) with redundant slots and live EPLB switches, and a Mixtral HF
// folder (separate expert tensors). Each rank runs its slots from its own copy of their
// weights. A dense model is refused, naming why.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <random>
#include <string>

#include "kernels/check.h"
#include "model/llama_model.h"
#include "model/temp_dir.h"
#include "runtime/dep/dep_engine.h"
#include "runtime/engine.h"
#include "runtime/golden_engine_config.h"
#include "support/hf_llama_dir.h"
#include "support/llama_ref.h"

namespace troupe::runtime {
namespace {

using Ids = std::vector<int32_t>;

Ids random_prompt(int64_t n, uint32_t seed, int64_t vocab) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> d(3, int32_t(vocab) - 1);  // past BOS / EOS
  Ids t(static_cast<size_t>(n));
  for (int32_t& x : t) x = d(rng);
  return t;
}

struct Outcome {
  std::map<RequestId, Ids> tokens;
  std::map<RequestId, std::vector<float>> logprobs;  // the sampled tokens' and the top ones'
};

// Mixed: prompts of 20, 61, 7 and 40 tokens, then the 40 with 11 more (a prefix hit once
// its blocks are committed); chunked prefill (24 tokens a step), n = 2 on the third,
// two logprobs each. Returns when every request has ended.
template <class E>
Outcome run_workload(E& e, int64_t vocab) {
  const int64_t lengths[] = {20, 61, 7, 40, 40};
  for (RequestId id = 0; id < 5; ++id) {
    Ids prompt = random_prompt(lengths[id], uint32_t(id == 4 ? 3 : id), vocab);  // 4: 3's
    if (id == 4)
      for (int32_t t : random_prompt(11, 8, vocab)) prompt.push_back(t);
    RequestParams p = greedy(5 + id % 4);
    p.num_logprobs = 2;
    e.add_request(id, prompt, p, id == 2 ? std::vector<Sibling>{{100, p}} : std::vector<Sibling>{});
  }
  Outcome r;
  for (int steps = 0; e.has_unfinished() && steps < 2000; ++steps)
    for (const RequestOutput& o : e.step()) {
      EXPECT_NE(o.status, RequestStatus::FinishedError) << o.error;
      Ids& toks = r.tokens[o.id];
      toks.insert(toks.end(), o.new_tokens.begin(), o.new_tokens.end());
      std::vector<float>& lps = r.logprobs[o.id];
      for (const SampleLogprobs& lp : o.new_logprobs) {
        lps.push_back(lp.sampled.logprob);
        for (const Logprob& t : lp.top) lps.push_back(t.logprob);
      }
    }
  EXPECT_FALSE(e.has_unfinished());
  return r;
}

EngineConfig config(int64_t context) {
  EngineConfig c = golden_engine_config(int64_t(8) << 20, true, 24, 4);
  c.scheduler.max_model_len = context;
  return c;
}

testing::TinyLlamaSpec moe_spec(model::GgmlType type, model::LlamaArch arch, uint32_t seed) {
  testing::TinyLlamaSpec s;
  s.type = type, s.arch = arch, s.seed = seed;
  s.experts = 8, s.top_k = 2, s.context = 128;
  return s;
}

// DEP-R on `path` against the one-rank Engine on the same model.
void expect_dep_equals_one_rank(const std::string& path, const DepConfig& d,
                                size_t min_rebalances = 0) {
  const auto m = model::LlamaModel::load(path);
  ASSERT_TRUE(m->forward->shape().expert_parallel);
  ASSERT_EQ(m->forward->routed_layers().size(), size_t(m->config.layers));
  const EngineConfig c = config(m->config.context_length);
  Engine one(*m->forward, nullptr, c);
  const Outcome want = run_workload(one, m->config.vocab_size);
  DepEngine dep(*m->forward, nullptr, c, d);
  const Outcome got = run_workload(dep, m->config.vocab_size);
  const std::string what = "R = " + std::to_string(d.ranks) + ", " + path;
  EXPECT_EQ(got.tokens, want.tokens) << what;
  EXPECT_EQ(got.logprobs, want.logprobs) << what;  // exact: the same bits
  EXPECT_GE(dep.rebalances().size(), min_rebalances) << what;
  int64_t dummies = 0;
  for (int r = 0; r < d.ranks; ++r) {
    EXPECT_EQ(dep.kv_cache(r).num_used_blocks(), 0) << what << " rank " << r;
    dummies += dep.dummy_steps(r);
  }
  // Some rank had nothing of its own while another did: it joined the exchange idle.
  EXPECT_GT(dummies, 0) << what;
}

TEST(LlamaDep, MixtralQ8_0EqualsOneRankBitForBit) {
  test::TempDir dir;
  const std::string path = dir.file("mixtral.gguf");
  testing::write_tiny_llama(moe_spec(model::GgmlType::Q8_0, model::LlamaArch::Llama, 51), path);
  for (int ranks : {2, 3}) {  // 3: 8 experts in 9 slots, the pad a copy of expert 0
    DepConfig d;
    d.ranks = ranks;
    expect_dep_equals_one_rank(path, d);
  }
}

TEST(LlamaDep, Qwen2MoeWithRedundantSlotsAndLiveEplbEqualsOneRank) {
  test::TempDir dir;
  const std::string path = dir.file("qwen2moe.gguf");
  testing::write_tiny_llama(moe_spec(model::GgmlType::F32, model::LlamaArch::Qwen2Moe, 52), path);
  DepConfig d;
  d.ranks = 2;
  d.num_redundant_experts = 2;
  d.eplb.enabled = true;
  d.eplb.window_size = 4;
  d.eplb.step_interval = 3;  // switches in the middle of the workload
  expect_dep_equals_one_rank(path, d, /*min_rebalances=*/1);
}

TEST(LlamaDep, MixtralHfFolderEqualsOneRank) {
  test::TempDir dir;
  testing::TinyLlamaSpec s = moe_spec(model::GgmlType::BF16, model::LlamaArch::Llama, 53);
  s.vocab = 272;  // the folder's tokenizer has 262 ids
  const auto ref = testing::write_tiny_llama(s, dir.file("m.gguf"));
  std::filesystem::create_directory(dir.file("hf"));
  testing::write_hf_llama_dir(ref, {model::LlamaArch::Llama, model::DType::BF16, false, s.context, 0},
                              dir.file("hf"));
  DepConfig d;
  d.ranks = 2;
  expect_dep_equals_one_rank(dir.file("hf"), d);
}

TEST(LlamaDep, ADenseModelHasNoExpertsToSpread) {
  test::TempDir dir;
  testing::TinyLlamaSpec s;
  s.seed = 54;
  testing::write_tiny_llama(s, dir.file("dense.gguf"));
  const auto m = model::LlamaModel::load(dir.file("dense.gguf"));
  EXPECT_FALSE(m->forward->shape().expert_parallel);
  EXPECT_TRUE(m->forward->routed_layers().empty());
  EXPECT_EQ(model::routed_expert_count(*m->forward), 0);
  DepConfig d;
  d.ranks = 2;
  try {
    DepEngine dep(*m->forward, nullptr, config(s.context), d);
    ADD_FAILURE() << "a dense model ran expert-parallel";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no MoE layer"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace troupe::runtime

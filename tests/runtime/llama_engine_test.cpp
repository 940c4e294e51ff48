// A LLaMA-family GGUF model served by the same Engine as V4.1 (issue 15): the paged KV
// cache holds its f32 [K | V] rows (model::llama_serving_shape), and a mixed batch
// (different prompt lengths, chunked prefill, prefix-cache hits, n > 1, logprobs) gives
// the greedy tokens and logprobs of LlamaForward's own one-sequence run on a contiguous
// LlamaState, for a dense and a Mixtral-style MoE file the test writes, and a qwen2 and a
// qwen2moe one (biases, NEOX RoPE, the shared expert on the paged path).
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>

#include "kernels/check.h"
#include "kernels/sampling.h"
#include "model/llama_model.h"
#include "model/temp_dir.h"
#include "runtime/engine.h"
#include "runtime/executor/logprobs.h"
#include "runtime/golden_engine_config.h"
#include "support/llama_ref.h"

namespace troupe::runtime {
namespace {

constexpr int32_t kLogprobs = 3;

struct Case {
  const char* name;
  testing::TinyLlamaSpec spec;
};
void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

testing::TinyLlamaSpec spec(model::GgmlType type, int64_t experts, int64_t top_k, uint32_t seed,
                            model::LlamaArch arch = model::LlamaArch::Llama) {
  testing::TinyLlamaSpec s;
  s.type = type, s.experts = experts, s.top_k = top_k, s.seed = seed, s.arch = arch;
  s.context = 256;
  return s;
}

const Case kCases[] = {
    {"DenseF32", spec(model::GgmlType::F32, 0, 0, 21)},
    {"MoeQ8_0Top2of8", spec(model::GgmlType::Q8_0, 8, 2, 22)},
    {"Qwen2F32", spec(model::GgmlType::F32, 0, 0, 23, model::LlamaArch::Qwen2)},
    {"Qwen2MoeQ8_0Top2of8", spec(model::GgmlType::Q8_0, 8, 2, 24, model::LlamaArch::Qwen2Moe)},
};

std::vector<int32_t> random_prompt(int64_t n, uint32_t seed, int64_t vocab) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> d(3, int32_t(vocab) - 1);  // past BOS / EOS
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (int32_t& x : t) x = d(rng);
  return t;
}

struct Outputs {
  std::vector<int32_t> tokens;
  std::vector<SampleLogprobs> logprobs;
};

// LlamaForward on its own contiguous state, one sequence: the reference.
Outputs reference(const model::LlamaForward& f, const std::vector<int32_t>& prompt, int64_t n) {
  model::LlamaState s = model::LlamaState::empty(f.config());
  std::vector<float> logits = f.run(s, prompt, false);
  Outputs r;
  for (int64_t i = 0; i < n; ++i) {
    const auto tok = int32_t(kernels::argmax(logits.data(), f.config().vocab_size));
    r.tokens.push_back(tok);
    r.logprobs.push_back(sample_logprobs(logits, tok, kLogprobs));
    logits = f.run(s, std::vector<int32_t>{tok}, false);
  }
  return r;
}

RequestParams greedy_logprobs(int64_t n) {
  RequestParams p = greedy(n);
  p.num_logprobs = kLogprobs;
  return p;
}

class LlamaEngineTest : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    testing::write_tiny_llama(GetParam().spec, dir_.file("m.gguf"));
    model_ = model::LlamaModel::load(dir_.file("m.gguf"));
  }
  // 16-token blocks, 24 tokens a step (chunked prefill, several requests per step).
  EngineConfig config(bool async) const {
    EngineConfig c = golden_engine_config(int64_t(4) << 20, async, 24, 6);
    c.scheduler.max_model_len = GetParam().spec.context;
    return c;
  }
  // Runs every request to the end, checking the KV bookkeeping after each step.
  static std::map<RequestId, Outputs> drain(Engine& e, std::map<RequestId, int64_t>* cached = nullptr) {
    std::map<RequestId, Outputs> out;
    for (int steps = 0; e.has_unfinished(); ++steps) {
      for (const RequestOutput& o : e.step()) {
        Outputs& r = out[o.id];
        r.tokens.insert(r.tokens.end(), o.new_tokens.begin(), o.new_tokens.end());
        r.logprobs.insert(r.logprobs.end(), o.new_logprobs.begin(), o.new_logprobs.end());
        EXPECT_NE(o.status, RequestStatus::FinishedError) << o.error;
        if (cached && o.finished()) (*cached)[o.id] = o.num_cached_tokens;
      }
      e.kv_cache().check_invariants();
      if (steps > 2000) {
        ADD_FAILURE() << "the engine did not finish";
        break;
      }
    }
    return out;
  }
  void expect_reference(const Outputs& got, const std::vector<int32_t>& prompt, int64_t n,
                        const std::string& what) const {
    const Outputs want = reference(*model_->forward, prompt, n);
    EXPECT_EQ(got.tokens, want.tokens) << what;
    ASSERT_EQ(got.logprobs.size(), want.logprobs.size()) << what;
    for (size_t i = 0; i < want.logprobs.size(); ++i) {
      const SampleLogprobs &g = got.logprobs[i], &w = want.logprobs[i];
      EXPECT_EQ(g.sampled.token, w.sampled.token) << what << " token " << i;
      EXPECT_NEAR(g.sampled.logprob, w.sampled.logprob, 1e-4) << what << " token " << i;
      ASSERT_EQ(g.top.size(), w.top.size()) << what;
      for (size_t j = 0; j < w.top.size(); ++j)
        EXPECT_NEAR(g.top[j].logprob, w.top[j].logprob, 1e-4) << what << " token " << i;
    }
  }

  test::TempDir dir_;
  std::unique_ptr<model::LlamaModel> model_;
};

TEST_P(LlamaEngineTest, MixedBatchMatchesTheOneSequenceForward) {
  const int64_t V = model_->config.vocab_size;
  for (bool async : {true, false}) {
    Engine e(*model_->forward, nullptr, config(async));
    std::map<RequestId, std::vector<int32_t>> prompts;
    const int64_t lens[] = {5, 37, 60, 1, 23};
    for (int i = 0; i < 5; ++i) {
      prompts[i] = random_prompt(lens[i], 300 + i, V);
      e.add_request(i, prompts[i], greedy_logprobs(8));
    }
    // n = 2: a sibling forked from request 5's prefill, its own greedy run.
    prompts[5] = random_prompt(29, 305, V);
    prompts[6] = prompts[5];
    e.add_request(5, prompts[5], greedy_logprobs(8), {Sibling{6, greedy_logprobs(8)}});
    const auto out = drain(e);
    for (const auto& [id, prompt] : prompts)
      expect_reference(out.at(id), prompt, 8, "request " + std::to_string(id));
    EXPECT_EQ(e.kv_cache().num_used_blocks(), 0);

    // Prefix-cache hits: request 1's first 32 tokens (two blocks) with a new tail, and
    // request 2's whole prompt again.
    std::vector<int32_t> tail = prompts[1];
    tail.resize(32);
    const std::vector<int32_t> more = random_prompt(11, 310, V);
    tail.insert(tail.end(), more.begin(), more.end());
    e.add_request(10, tail, greedy_logprobs(8));
    e.add_request(11, prompts[2], greedy_logprobs(8));
    std::map<RequestId, int64_t> cached;
    const auto hits = drain(e, &cached);
    EXPECT_EQ(cached.at(10), 32);
    EXPECT_EQ(cached.at(11), 48);  // whole blocks, the last token recomputed
    expect_reference(hits.at(10), tail, 8, "hit on request 1's prefix");
    expect_reference(hits.at(11), prompts[2], 8, "hit on request 2's prompt");
    EXPECT_EQ(e.kv_cache().num_used_blocks(), 0);
  }
}

TEST_P(LlamaEngineTest, PreemptedRequestsResumeWithTheSameTokens) {
  // Room for 4 requests' first block and little more: later blocks preempt.
  EngineConfig c = config(true);
  c.kv_budget_bytes = 10 * PagedKvStorage::block_bytes_of(model_->forward->shape(), 16);
  c.enable_prefix_cache = false;
  c.scheduler.max_num_running = 4;
  Engine e(*model_->forward, nullptr, c);
  std::map<RequestId, std::vector<int32_t>> prompts;
  for (int i = 0; i < 4; ++i) {
    prompts[i] = random_prompt(20 + 9 * i, 400 + i, model_->config.vocab_size);
    e.add_request(i, prompts[i], greedy_logprobs(12));
  }
  const auto out = drain(e);
  for (const auto& [id, prompt] : prompts)
    expect_reference(out.at(id), prompt, 12, "request " + std::to_string(id));
  EXPECT_GT(e.figures().preemptions, 0);
  EXPECT_EQ(e.kv_cache().num_used_blocks(), 0);
}

INSTANTIATE_TEST_SUITE_P(Files, LlamaEngineTest, ::testing::ValuesIn(kCases),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(LlamaEngine, TheShapeHoldsOneF32RowPerTokenAndLayer) {
  model::LlamaConfig c;
  c.vocab_size = 80, c.dim = 64, c.layers = 3, c.heads = 4, c.kv_heads = 2, c.head_dim = 16;
  c.context_length = 128, c.eos_token_id = 2;
  const model::ServingShape s = model::llama_serving_shape(c);
  EXPECT_EQ(s.rows.ckv.bytes(), 2 * 2 * 16 * 4);  // [K | V] f32
  EXPECT_EQ(s.rows.ckv_pieces, 2 * 2);            // a block's rows in runs per KV head
  EXPECT_EQ(s.rows.ikey.bytes(), 0);
  EXPECT_EQ(s.window, 0);
  EXPECT_EQ(PagedKvStorage::block_bytes_of(s, 16), 3 * 16 * 256);
  EXPECT_DOUBLE_EQ(s.kv_bytes_per_token, 3 * 256);
  EXPECT_EQ(s.eos_token_id, 2);
  EXPECT_EQ(s.max_positions, 128);
}

TEST(LlamaEngine, V41OnlyFeaturesAreRefusedWithAReason) {
  model::LlamaConfig c;
  c.vocab_size = 80, c.dim = 64, c.layers = 2, c.heads = 4, c.kv_heads = 2, c.head_dim = 16;
  c.context_length = 128;
  const model::ServingShape s = model::llama_serving_shape(c);
  auto error_of = [&](EngineConfig e) -> std::string {
    try {
      prepare_engine(s, e);
    } catch (const Error& err) {
      return err.what();
    }
    return "";
  };
  EngineConfig spec;
  spec.speculative.method = "dspark";
  spec.speculative.num_speculative_tokens = 2;
  EXPECT_NE(error_of(spec).find("DeepSeek-V4.1"), std::string::npos) << error_of(spec);
  EngineConfig clip;
  clip.executor.clip_prefix = true;
  EXPECT_NE(error_of(clip).find("clip_prefix"), std::string::npos) << error_of(clip);
  EXPECT_EQ(error_of(EngineConfig{}), "");
}

}  // namespace
}  // namespace troupe::runtime

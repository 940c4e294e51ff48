// The LLaMA forward (model/llama_forward) on random-weight GGUF files the test writes, in
// every stored type, dense and Mixtral-style MoE, tied and untied output, and the Qwen2
// architectures (qwen2: q/k/v biases, NEOX RoPE, GQA; qwen2moe: 8 experts top-2 without
// renormalisation, plus a sigmoid-gated shared expert): logits and greedy tokens against
// the plain double reference of support/llama_ref.h. The q8_0 / q4_0 files run again with
// the CPU path capped at AVX2 (loaded and run under ScopedCpuPath), so the AVX2 row-group
// kernel is checked end to end on a machine that also has AVX-512.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "kernels/check.h"
#include "kernels/dispatch.h"
#include "kernels/q8_row_groups.h"
#include "kernels/sampling.h"
#include "kernels/weights.h"
#include "model/llama_model.h"
#include "model/temp_dir.h"
#include "support/llama_ref.h"

namespace troupe::model {
namespace {

using testing::DVec;
using testing::TinyLlamaSpec;

struct Case {
  const char* name;
  TinyLlamaSpec spec;
  std::optional<kernels::CpuPath> cap = std::nullopt;  // the path the model loads and runs on
};
void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

TinyLlamaSpec spec(GgmlType type, bool tied = false, int64_t experts = 0, int64_t top_k = 0,
                   uint32_t seed = 1, LlamaArch arch = LlamaArch::Llama) {
  TinyLlamaSpec s;
  s.type = type, s.tied = tied, s.experts = experts, s.top_k = top_k, s.seed = seed;
  s.arch = arch;
  return s;
}

const Case kCases[] = {
    {"F32", spec(GgmlType::F32)},
    {"F16", spec(GgmlType::F16, false, 0, 0, 2)},
    {"BF16Tied", spec(GgmlType::BF16, true, 0, 0, 3)},
    {"Q8_0", spec(GgmlType::Q8_0, false, 0, 0, 4)},
    {"Q4_0Tied", spec(GgmlType::Q4_0, true, 0, 0, 5)},
    {"MoeF32Top2of4", spec(GgmlType::F32, false, 4, 2, 6)},
    {"MoeQ8_0Top2of8", spec(GgmlType::Q8_0, false, 8, 2, 7)},
    {"MoeQ4_0Top3of4", spec(GgmlType::Q4_0, true, 4, 3, 8)},
    {"Qwen2F32", spec(GgmlType::F32, false, 0, 0, 9, LlamaArch::Qwen2)},
    {"Qwen2Q8_0Tied", spec(GgmlType::Q8_0, true, 0, 0, 10, LlamaArch::Qwen2)},
    {"Qwen2MoeF32Top2of8", spec(GgmlType::F32, false, 8, 2, 11, LlamaArch::Qwen2Moe)},
    {"Qwen2MoeQ8_0Top2of8", spec(GgmlType::Q8_0, false, 8, 2, 12, LlamaArch::Qwen2Moe)},
    {"Qwen2MoeBF16Top3of4", spec(GgmlType::BF16, true, 4, 3, 13, LlamaArch::Qwen2Moe)},
    {"Q8_0Avx2", spec(GgmlType::Q8_0, false, 0, 0, 4), kernels::CpuPath::Avx2},
    {"Q4_0TiedAvx2", spec(GgmlType::Q4_0, true, 0, 0, 5), kernels::CpuPath::Avx2},
    {"MoeQ4_0Top3of4Avx2", spec(GgmlType::Q4_0, true, 4, 3, 8), kernels::CpuPath::Avx2},
};

// Relative tolerance on logits. Q8_0 / Q4_0 GEMMs quantize their input to q8_0 (the
// reference does too), so a value within f32 rounding of a rounding edge may land on the
// other q8 step there and here: one step is amax / 127 of one element of 32.
double tolerance(const TinyLlamaSpec& s) {
  return s.type == GgmlType::Q8_0 || s.type == GgmlType::Q4_0 ? 2e-3 : 2e-4;
}

double max_abs_diff(const float* got, const DVec& want) {
  double d = 0;
  for (size_t i = 0; i < want.size(); ++i) d = std::max(d, std::fabs(double(got[i]) - want[i]));
  return d;
}

double max_abs(const DVec& v) {
  double m = 0;
  for (double x : v) m = std::max(m, std::fabs(x));
  return m;
}

class LlamaForwardTest : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    if (const auto cap = GetParam().cap) {
      if (!kernels::cpu_supports(*cap)) GTEST_SKIP() << kernels::missing_reason(*cap);
      path_.emplace(*cap);  // held through the test: the loader's choices and every kernel
    }
    ref_ = testing::write_tiny_llama(GetParam().spec, dir_.file("m.gguf"));
    model_ = LlamaModel::load(dir_.file("m.gguf"));
  }
  std::optional<kernels::ScopedCpuPath> path_;
  test::TempDir dir_;
  testing::RefLlama ref_;
  std::unique_ptr<LlamaModel> model_;
};

TEST_P(LlamaForwardTest, PrefillLogitsOfEveryPositionMatchTheReference) {
  const std::vector<int32_t> tokens{1, 17, 42, 5, 79, 0, 33, 33, 8, 61, 12};
  LlamaState s = LlamaState::empty(model_->config);
  const std::vector<float> got = model_->forward->run(s, tokens, /*all_logits=*/true);
  const auto want = testing::ref_llama_logits(ref_, tokens);
  const int64_t V = ref_.V;
  ASSERT_EQ(got.size(), tokens.size() * V);
  EXPECT_EQ(s.length, int64_t(tokens.size()));
  for (size_t t = 0; t < tokens.size(); ++t) {
    ASSERT_GT(max_abs(want[t]), 0.1) << "reference logits too small to tell anything apart";
    EXPECT_LE(max_abs_diff(got.data() + t * V, want[t]), tolerance(GetParam().spec) * max_abs(want[t]))
        << "position " << t;
  }
}

// Greedy decoding one token per step (the KV cache path) gives the reference's greedy
// tokens, judged teacher-forced on our tokens: at every step the reference's argmax must be
// ours unless its top two are within 1e-4, or twice the tolerance (a near-tie the test reports).
TEST_P(LlamaForwardTest, GreedyDecodeMatchesTheReference) {
  std::vector<int32_t> seq{1, 9, 4};
  LlamaState s = LlamaState::empty(model_->config);
  std::vector<float> logits = model_->forward->run(s, seq, false);
  const int prompt = int(seq.size()), steps = 12;
  std::vector<std::vector<float>> step_logits;
  for (int i = 0; i < steps; ++i) {
    step_logits.push_back(logits);
    const int32_t next = kernels::argmax(logits.data(), ref_.V);
    seq.push_back(next);
    if (i + 1 < steps) logits = model_->forward->run(s, std::vector<int32_t>{next}, false);
  }
  const auto want = testing::ref_llama_logits(ref_, seq);
  int distinct = 0;
  for (int i = 0; i < steps; ++i) {
    const DVec& w = want[prompt - 1 + i];
    std::vector<size_t> order(w.size());
    for (size_t j = 0; j < order.size(); ++j) order[j] = j;
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return w[a] > w[b]; });
    const double tol = tolerance(GetParam().spec) * max_abs(w);
    EXPECT_LE(max_abs_diff(step_logits[i].data(), w), tol) << "step " << i;
    if (w[order[0]] - w[order[1]] < std::max(1e-4, 2 * tol)) {
      std::printf("near-tie at step %d (%.3g)\n", i, w[order[0]] - w[order[1]]);
      continue;
    }
    EXPECT_EQ(seq[prompt + i], int32_t(order[0])) << "step " << i;
    distinct += (i == 0 || seq[prompt + i] != seq[prompt + i - 1]);
  }
  // Tied random models repeat their last token (its own embedding dominates the logits);
  // untied ones must move, or the comparison tells little.
  if (!GetParam().spec.tied) {
    EXPECT_GE(distinct, 2) << "greedy text stuck on one token";
  }
}

TEST_P(LlamaForwardTest, ChunkedPrefillEqualsOnePrefill) {
  const std::vector<int32_t> tokens{3, 1, 4, 1, 5, 9, 2, 6};
  LlamaState one = LlamaState::empty(model_->config), two = LlamaState::empty(model_->config);
  const auto a = model_->forward->run(one, tokens, false);
  model_->forward->run(two, std::vector<int32_t>(tokens.begin(), tokens.begin() + 5), false);
  const auto b = model_->forward->run(two, std::vector<int32_t>(tokens.begin() + 5, tokens.end()), false);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-5f * (1 + std::fabs(a[i]))) << i;
}

// Several sequences of different lengths decoded in one step give each the logits of its
// own single-sequence step (the GEMMs run on all rows together; attention per sequence).
TEST_P(LlamaForwardTest, BatchedDecodeEqualsOneSequenceAtATime) {
  const std::vector<std::vector<int32_t>> prompts{{1, 17, 42}, {5}, {79, 0, 33, 33, 8, 61}};
  const std::vector<int32_t> next{9, 12, 40};
  const int64_t V = ref_.V;
  std::vector<LlamaState> batched, single;
  for (const auto& p : prompts) {
    batched.push_back(LlamaState::empty(model_->config));
    single.push_back(LlamaState::empty(model_->config));
    model_->forward->run(batched.back(), p, false);
    model_->forward->run(single.back(), p, false);
  }
  std::vector<LlamaState*> ptrs{&batched[0], &batched[1], &batched[2]};
  const std::vector<float> got = model_->forward->decode(ptrs, next);
  ASSERT_EQ(got.size(), 3u * V);
  for (size_t i = 0; i < prompts.size(); ++i) {
    const std::vector<float> want = model_->forward->run(single[i], std::vector<int32_t>{next[i]}, false);
    EXPECT_EQ(batched[i].length, int64_t(prompts[i].size()) + 1);
    for (int64_t v = 0; v < V; ++v)
      ASSERT_NEAR(got[i * V + v], want[v], 1e-5f * (1 + std::fabs(want[v]))) << "sequence " << i << " logit " << v;
  }
  std::vector<LlamaState*> twice{&batched[0], &batched[0]};
  EXPECT_THROW(model_->forward->decode(twice, std::vector<int32_t>{1, 2}), Error);
  EXPECT_THROW(model_->forward->decode(ptrs, std::vector<int32_t>{1, 2}), Error);
}

// Every matrix type the GEMM reads stays in the file's mapping in its own format (the
// default alignment of 32 keeps every tensor element-aligned): no owned f32 copy.
TEST_P(LlamaForwardTest, MatricesStayInTheMappingInTheirStoredFormat) {
  kernels::WeightFormat want = kernels::WeightFormat::F32;
  switch (GetParam().spec.type) {
    case GgmlType::F16: want = kernels::WeightFormat::F16; break;
    case GgmlType::BF16: want = kernels::WeightFormat::BF16; break;
    case GgmlType::Q8_0: want = kernels::WeightFormat::Q8_0; break;
    case GgmlType::Q4_0: want = kernels::WeightFormat::Q4_0; break;
    default: break;
  }
  const LlamaWeights& w = model_->weights;
  for (const LlamaMatrix* m : {&w.token_embd, &w.layers[0].wq, &w.layers[1].down}) {
    EXPECT_EQ(m->view().format, want) << kernels::to_string(m->view().format);
    EXPECT_TRUE(m->owned.empty());
  }
}

// Where this process's GEMM reads row groups (AVX-512 VNNI or AVX2), every Q8_0 / Q4_0 matrix a
// GEMM multiplies carries them, so the logits checks above run the row-group kernel
// there; the embedding table only when it is the tied output; other formats never.
TEST_P(LlamaForwardTest, BlockMatricesCarryRowGroupsWhereTheGemmReadsThem) {
  const TinyLlamaSpec& s = GetParam().spec;
  const bool blocks = s.type == GgmlType::Q8_0 || s.type == GgmlType::Q4_0;
  const bool used = blocks && kernels::q8_row_groups_used();
  const LlamaWeights& w = model_->weights;
  const LlamaLayerWeights& l = w.layers[0];
  for (const LlamaMatrix* m : {&l.wq, &l.wk, &l.wv, &l.wo, &l.gate, &l.up, &l.down})
    EXPECT_EQ(m->view().groups != nullptr, used);
  EXPECT_EQ(w.output_view().groups != nullptr, used);
  EXPECT_EQ(w.token_embd.view().groups != nullptr, used && s.tied);
  if (s.experts > 0) {  // an expert of the stacked tensors keeps them where its rows start a group
    EXPECT_EQ(l.expert(1, model_->config.ffn_dim, model_->config.dim).w1.groups != nullptr,
              used && model_->config.ffn_dim % kernels::kGroupRows == 0);
  }
}

INSTANTIATE_TEST_SUITE_P(Files, LlamaForwardTest, ::testing::ValuesIn(kCases),
                         [](const auto& info) { return std::string(info.param.name); });

// GGUF's alignment may be 1: an F16 tensor at an odd address cannot be read as uint16_t,
// so the loader widens it to f32 instead. Two files whose data sections start one byte
// apart (a metadata string one byte longer) put every tensor at an even address in one
// and an odd one in the other; both give the reference's logits.
TEST(LlamaForward, MisalignedF16TensorsAreWidenedAlignedOnesStayInPlace) {
  int odd_files = 0;
  for (const char* pad : {"x", "xy"}) {
    SCOPED_TRACE(pad);
    test::TempDir dir;
    TinyLlamaSpec s = spec(GgmlType::F16, false, 0, 0, 2);
    s.more_metadata = [pad](GgufWriter& w) {
      w.set_u32("general.alignment", 1);
      w.set_string("troupe.test.pad", pad);
    };
    const testing::RefLlama ref = testing::write_tiny_llama(s, dir.file("m.gguf"));
    const auto m = LlamaModel::load(dir.file("m.gguf"));
    const bool odd = reinterpret_cast<uintptr_t>(m->file->find_tensor("blk.0.attn_q.weight")->data) % 2;
    odd_files += odd;
    const LlamaMatrix& wq = m->weights.layers[0].wq;
    EXPECT_EQ(wq.view().format, odd ? kernels::WeightFormat::F32 : kernels::WeightFormat::F16);
    EXPECT_EQ(wq.owned.empty(), !odd);
    const std::vector<int32_t> tokens{1, 17, 42, 5};
    LlamaState st = LlamaState::empty(m->config);
    const std::vector<float> got = m->forward->run(st, tokens, /*all_logits=*/false);
    const DVec want = testing::ref_llama_logits(ref, tokens).back();
    EXPECT_LE(max_abs_diff(got.data(), want), tolerance(s) * max_abs(want));
  }
  EXPECT_EQ(odd_files, 1);
}

TEST(LlamaForward, BadInputIsAnErrorBeforeTheStateChanges) {
  test::TempDir dir;
  testing::write_tiny_llama(spec(GgmlType::F32), dir.file("m.gguf"));
  const auto m = LlamaModel::load(dir.file("m.gguf"));
  LlamaState s = LlamaState::empty(m->config);
  EXPECT_THROW(m->forward->run(s, std::vector<int32_t>{}, false), Error);
  EXPECT_THROW(m->forward->run(s, std::vector<int32_t>{80}, false), Error);
  EXPECT_THROW(m->forward->run(s, std::vector<int32_t>{-1}, false), Error);
  EXPECT_THROW(m->forward->run(s, std::vector<int32_t>(65, 1), false), Error);  // context 64
  EXPECT_EQ(s.length, 0);
  EXPECT_TRUE(s.k[0].empty());
}

TEST(LlamaForward, RoutingPicksTheLargestLogitsAndSoftmaxesThem) {
  const float logits[5] = {0.5f, 2.0f, -1.0f, 2.0f, 1.0f};
  int32_t pick[3];
  float weight[3];
  route_softmax_topk(logits, 5, 3, pick, weight);
  EXPECT_EQ(pick[0], 1);  // tie with 3 -> lower index first
  EXPECT_EQ(pick[1], 3);
  EXPECT_EQ(pick[2], 4);
  const double z = 2 * std::exp(0.0) + std::exp(-1.0);
  EXPECT_NEAR(weight[0], 1 / z, 1e-6);
  EXPECT_NEAR(weight[2], std::exp(-1.0) / z, 1e-6);
}

// qwen2moe's routing: the same picks, weights the softmax over all five logits.
TEST(LlamaForward, QwenRoutingKeepsTheSoftmaxOverAllExperts) {
  const float logits[5] = {0.5f, 2.0f, -1.0f, 2.0f, 1.0f};
  int32_t pick[2];
  float weight[2];
  route_softmax_topk(logits, 5, 2, pick, weight, /*renormalize=*/false);
  EXPECT_EQ(pick[0], 1);
  EXPECT_EQ(pick[1], 3);
  const double z = std::exp(-1.5) + 2 + std::exp(-3.0) + std::exp(-1.0);
  EXPECT_NEAR(weight[0], 1 / z, 1e-6);
  EXPECT_NEAR(weight[1], 1 / z, 1e-6);
}

// Missing or misshapen tensors name the tensor and both shapes.
TEST(LlamaForward, MissingAndMisshapenTensorsAreNamed) {
  test::TempDir dir;
  GgufWriter w;
  w.set_string("general.architecture", "llama");
  w.set_u32("llama.context_length", 16);
  w.set_u32("llama.embedding_length", 32);
  w.set_u32("llama.block_count", 1);
  w.set_u32("llama.feed_forward_length", 32);
  w.set_u32("llama.attention.head_count", 2);
  w.set_f32("llama.attention.layer_norm_rms_epsilon", 1e-5f);
  w.set_u32("llama.vocab_size", 4);
  w.add_tensor("token_embd.weight", GgmlType::F32, {32, 3}, std::vector<float>(96));
  w.write(dir.file("bad.gguf"));
  try {
    LlamaModel::load(dir.file("bad.gguf"));
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'token_embd.weight' has shape [32, 3], expected [32, 4]"),
              std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace troupe::model

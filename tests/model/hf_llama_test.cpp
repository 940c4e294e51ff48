// HF folders of LLaMA-family models (issue 15 part 2): config.json + model.safetensors +
// tokenizer.json written from the same random weights as a GGUF file (for `llama`, with
// llama.cpp's q/k row permutation, which the folder undoes: HF rotates q/k halves, NEOX
// style) give the GGUF file's logits within f32 rounding, and the reference's; `troupe
// generate --model DIR` gives the GGUF file's tokens; bad config.json files name the key
// or the class; a V4.1 folder is still a V4.1 folder.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>

#include "kernels/check.h"
#include "model/hf_llama_config.h"
#include "model/llama_model.h"
#include "model/temp_dir.h"
#include "support/hf_llama_dir.h"
#include "support/llama_ref.h"
#include "support/run_troupe.h"
#include "support/test_paths.h"

namespace troupe::model {
namespace {

using testing::DVec;

struct Case {
  const char* name;
  LlamaArch arch;
  GgmlType type;  // the GGUF file's; the folder's matrices hold the same values
  DType dtype;
  int64_t experts, top_k;
  bool tied;
};
void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

const Case kCases[] = {
    {"LlamaF32", LlamaArch::Llama, GgmlType::F32, DType::F32, 0, 0, false},
    {"MixtralBF16", LlamaArch::Llama, GgmlType::BF16, DType::BF16, 4, 2, false},
    {"Qwen2F16Tied", LlamaArch::Qwen2, GgmlType::F16, DType::F16, 0, 0, true},
    {"Qwen2MoeF32Top2of8", LlamaArch::Qwen2Moe, GgmlType::F32, DType::F32, 8, 2, false},
};

double max_abs(const float* v, int64_t n) {
  double m = 0;
  for (int64_t i = 0; i < n; ++i) m = std::max(m, std::fabs(double(v[i])));
  return m;
}

class HfLlamaTest : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    const Case& c = GetParam();
    testing::TinyLlamaSpec s;
    s.arch = c.arch, s.type = c.type, s.experts = c.experts, s.top_k = c.top_k, s.tied = c.tied;
    s.seed = 51, s.vocab = 272, s.context = 128;  // the tokenizer's 262 ids and HF-style padding
    ref_ = testing::write_tiny_llama(s, dir_.file("m.gguf"));
    std::filesystem::create_directory(dir_.file("hf"));
    testing::write_hf_llama_dir(ref_, {c.arch, c.dtype, c.tied, s.context, s.shared_ffn}, dir_.file("hf"));
  }
  test::TempDir dir_;
  testing::RefLlama ref_;
};

TEST_P(HfLlamaTest, LogitsEqualTheGgufFilesAndTheReference) {
  const auto gguf = LlamaModel::load(dir_.file("m.gguf"));
  const auto hf = LlamaModel::load(dir_.file("hf"), /*need_tokenizer=*/true);
  EXPECT_TRUE(hf->config.rope_neox);
  EXPECT_EQ(hf->config.arch, GetParam().arch);
  EXPECT_EQ(hf->weights.tied_output(), GetParam().tied);
  // Each float dtype stays in the mapping in its own format (this folder's tensors sit at
  // element-aligned addresses).
  const kernels::WeightFormat stored = GetParam().dtype == DType::F32    ? kernels::WeightFormat::F32
                                       : GetParam().dtype == DType::BF16 ? kernels::WeightFormat::BF16
                                                                         : kernels::WeightFormat::F16;
  EXPECT_EQ(hf->weights.layers[0].wq.view().format, stored);
  const std::vector<int32_t> tokens{1, 17, 42, 5, 79, 0, 33, 33, 8, 61, 12, 200, 271};
  LlamaState a = LlamaState::empty(gguf->config), b = LlamaState::empty(hf->config);
  const std::vector<float> want = gguf->forward->run(a, tokens, true), got = hf->forward->run(b, tokens, true);
  const auto reference = testing::ref_llama_logits(ref_, tokens);
  const int64_t V = ref_.V;
  ASSERT_EQ(got.size(), want.size());
  for (size_t t = 0; t < tokens.size(); ++t) {
    const double scale = max_abs(want.data() + t * V, V);
    ASSERT_GT(scale, 0.1);
    for (int64_t v = 0; v < V; ++v) {
      // Only the order of q·k's sums differs (the heads' channels are permuted): f32 rounding.
      ASSERT_NEAR(got[t * V + v], want[t * V + v], 2e-5 * scale) << "position " << t << " logit " << v;
      ASSERT_NEAR(got[t * V + v], reference[t][size_t(v)], 2e-4 * scale) << "position " << t;
    }
  }
}

TEST_P(HfLlamaTest, GenerateOnTheFolderGivesTheGgufFilesTokens) {
  const std::string args = " --tokens 1,9,4,77 --max-tokens 10 --ignore-eos";
  const auto from_gguf = testing::run_troupe("generate --model " + dir_.file("m.gguf") + args);
  const auto from_dir = testing::run_troupe("generate --model " + dir_.file("hf") + args);
  ASSERT_EQ(from_gguf.status, 0) << from_gguf.out;
  ASSERT_EQ(from_dir.status, 0) << from_dir.out;
  EXPECT_EQ(from_dir.out, from_gguf.out);
  EXPECT_FALSE(from_dir.out.empty());
  // Text in, text out through the folder's tokenizer.json.
  const auto text = testing::run_troupe("generate --model " + dir_.file("hf") + " --prompt cab --max-tokens 4");
  EXPECT_EQ(text.status, 0) << text.out;
}

INSTANTIATE_TEST_SUITE_P(Folders, HfLlamaTest, ::testing::ValuesIn(kCases),
                         [](const auto& info) { return std::string(info.param.name); });

// A valid Qwen2 config.json, edited by each case.
nlohmann::json qwen2_config() {
  return {{"architectures", {"Qwen2ForCausalLM"}}, {"hidden_size", 64}, {"num_hidden_layers", 2},
          {"num_attention_heads", 4}, {"num_key_value_heads", 2}, {"intermediate_size", 96},
          {"vocab_size", 300}, {"max_position_embeddings", 128}, {"rms_norm_eps", 1e-6},
          {"rope_theta", 1000000.0}, {"eos_token_id", 2}, {"rope_scaling", nullptr}};
}

std::string config_error(const nlohmann::json& j) {
  try {
    llama_config_from_hf_json(j.dump(), "config.json");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(HfLlamaConfig, ReadsTransformersKeys) {
  const LlamaConfig c = llama_config_from_hf_json(qwen2_config().dump(), "config.json");
  EXPECT_EQ(c.arch, LlamaArch::Qwen2);
  EXPECT_TRUE(c.rope_neox && c.qkv_bias);
  EXPECT_EQ(c.head_dim, 16);
  EXPECT_EQ(c.kv_heads, 2);
  EXPECT_EQ(c.rope_base, 1e6);
  EXPECT_EQ(c.bos_token_id, -1);
  nlohmann::json mistral = qwen2_config();
  mistral["architectures"] = {"MistralForCausalLM"};
  mistral["sliding_window"] = 32;
  mistral["eos_token_id"] = {7, 9};  // LLaMA-3 lists several: the first
  const LlamaConfig m = llama_config_from_hf_json(mistral.dump(), "config.json");
  EXPECT_EQ(m.context_length, 32);  // within the window every key is seen
  EXPECT_FALSE(m.qkv_bias);
  EXPECT_EQ(m.eos_token_id, 7);
}

TEST(HfLlamaConfig, BadConfigsNameTheKeyOrTheClass) {
  auto without = [](const char* key) {
    nlohmann::json j = qwen2_config();
    j.erase(key);
    return j;
  };
  auto with = [](const char* key, nlohmann::json v) {
    nlohmann::json j = qwen2_config();
    j[key] = std::move(v);
    return j;
  };
  const std::pair<nlohmann::json, std::string> cases[] = {
      {without("hidden_size"), "config.json: missing key 'hidden_size'"},
      {without("rms_norm_eps"), "missing key 'rms_norm_eps'"},
      {with("num_hidden_layers", "two"), "key 'num_hidden_layers': expected an integer, got \"two\""},
      {with("architectures", {"GemmaForCausalLM"}), "architectures [\"GemmaForCausalLM\"]: troupe reads LlamaForCausalLM"},
      {without("architectures"), "architectures is missing"},
      {with("rope_scaling", {{"type", "llama3"}, {"factor", 8.0}}), "key 'rope_scaling'"},
      {with("head_dim", 32), "key 'head_dim' = 32 is not supported"},
      {with("hidden_act", "gelu"), "key 'hidden_act' = \"gelu\" is not supported"},
      {with("num_key_value_heads", 3), "head_count 4 is not a multiple of head_count_kv 3"},
  };
  for (const auto& [j, want] : cases) {
    const std::string got = config_error(j);
    EXPECT_NE(got.find(want), std::string::npos) << "want '" << want << "', got '" << got << "'";
  }
  nlohmann::json moe = qwen2_config();
  moe["architectures"] = {"Qwen2MoeForCausalLM"};
  moe["num_experts"] = 4, moe["num_experts_per_tok"] = 2, moe["moe_intermediate_size"] = 32;
  EXPECT_NE(config_error(moe).find("missing key 'shared_expert_intermediate_size'"), std::string::npos);
  moe["shared_expert_intermediate_size"] = 64;
  EXPECT_EQ(config_error(moe), "");
  moe["mlp_only_layers"] = {1};
  EXPECT_NE(config_error(moe).find("key 'mlp_only_layers'"), std::string::npos) << config_error(moe);
  EXPECT_NE(config_error(nlohmann::json::array()).find("not a JSON object"), std::string::npos);
}

// Which loader a folder gets: LLaMA-family classes, V4.1 (no architectures, or DeepSeek's),
// and an error for any other class.
TEST(HfLlamaConfig, FolderKinds) {
  test::TempDir dir;
  auto folder = [&](const std::string& name, const std::string& config) {
    std::filesystem::create_directory(dir.file(name));
    if (!config.empty()) std::ofstream(dir.file(name) + "/config.json") << config;
    return dir.file(name);
  };
  EXPECT_TRUE(is_hf_llama_dir(folder("q", qwen2_config().dump())));
  EXPECT_FALSE(is_hf_llama_dir(folder("v41", R"({"hidden_size": 64})")));
  EXPECT_FALSE(is_hf_llama_dir(folder("ds", R"({"architectures": ["DeepseekV4ForCausalLM"]})")));
  EXPECT_FALSE(is_hf_llama_dir(folder("none", "")));
  EXPECT_FALSE(is_hf_llama_dir(folder("broken", "{")));
  EXPECT_FALSE(is_hf_llama_dir(dir.file("absent")));
  EXPECT_FALSE(is_hf_llama_dir(std::string(TROUPE_TEST_DATA) + "/v41-tiny-seed7"));
  EXPECT_THROW(is_hf_llama_dir(folder("gemma", R"({"architectures": ["GemmaForCausalLM"]})")), Error);
  // The CLI says so too, and a folder missing a tensor names it.
  const auto r = testing::run_troupe("logits --model " + dir.file("gemma") + " --tokens 1");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.out.find("GemmaForCausalLM"), std::string::npos) << r.out;
}

TEST(HfLlamaConfig, AMissingTensorIsNamed) {
  test::TempDir dir;
  testing::TinyLlamaSpec s;
  s.arch = LlamaArch::Qwen2;
  const auto ref = testing::write_tiny_llama(s, dir.file("m.gguf"));
  std::filesystem::create_directory(dir.file("hf"));
  testing::write_hf_llama_dir(ref, {LlamaArch::Qwen2, DType::F32, false, s.context, 0}, dir.file("hf"));
  nlohmann::json c = testing::hf_config_json(ref, {LlamaArch::Qwen2, DType::F32, false, s.context, 0});
  c["num_hidden_layers"] = 3;  // one layer more than the safetensors hold
  std::ofstream(dir.file("hf") + "/config.json") << c.dump();
  try {
    LlamaModel::load(dir.file("hf"));
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("model.layers.2.input_layernorm.weight"), std::string::npos) << e.what();
  }
}

// config.json's tie_word_embeddings decides, not the tensors present: false (or absent:
// transformers' LLaMA-family default) needs lm_head.weight, and a folder without one is an
// error naming the key, the tensor and the folder, never silently tied; true reads the
// embedding as the output even when the folder also holds an lm_head.weight.
TEST(HfLlamaConfig, TieWordEmbeddingsDecidesTheOutputMatrix) {
  test::TempDir dir;
  testing::TinyLlamaSpec s;
  s.arch = LlamaArch::Qwen2, s.seed = 56;
  const auto ref = testing::write_tiny_llama(s, dir.file("m.gguf"));
  auto folder = [&](const std::string& name, bool tied, const char* tie_key) {
    const testing::HfDirSpec spec{LlamaArch::Qwen2, DType::F32, tied, s.context, 0};
    std::filesystem::create_directory(dir.file(name));
    testing::write_hf_llama_dir(ref, spec, dir.file(name));
    nlohmann::json c = testing::hf_config_json(ref, spec);
    if (tie_key == nullptr) c.erase("tie_word_embeddings");
    else c["tie_word_embeddings"] = std::string(tie_key) == "true";
    std::ofstream(dir.file(name) + "/config.json") << c.dump();
    return dir.file(name);
  };
  auto load_error = [](const std::string& path) -> std::string {
    try {
      LlamaModel::load(path);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_TRUE(LlamaModel::load(folder("tied", true, "true"))->weights.tied_output());
  EXPECT_FALSE(LlamaModel::load(folder("untied", false, "false"))->weights.tied_output());
  EXPECT_FALSE(LlamaModel::load(folder("default", false, nullptr))->weights.tied_output());
  // The folder holds lm_head.weight, config.json says tied: the embedding, as transformers.
  EXPECT_TRUE(LlamaModel::load(folder("tied-with-head", false, "true"))->weights.tied_output());
  for (const char* tie : {"false", static_cast<const char*>(nullptr)}) {
    const std::string path = folder(tie ? "no-head" : "no-head-no-key", true, tie);
    const std::string got = load_error(path);
    for (const std::string& want : {path, std::string("tie_word_embeddings is false"), std::string("lm_head.weight")})
      EXPECT_NE(got.find(want), std::string::npos) << "want '" << want << "' in '" << got << "'";
  }
  const auto r = testing::run_troupe("logits --model " + dir.file("no-head") + " --tokens 1");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.out.find("lm_head.weight"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace troupe::model

// config.json parsing, presets, derived CSA2 layer modes and every rule of MODEL.md §1.
#include "model/config.h"

#include <gtest/gtest.h>

#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>

#include "kernels/check.h"
#include "tests/model/temp_dir.h"
#include "support/test_paths.h"

namespace troupe::model {
namespace {

using json = nlohmann::json;

const std::string kGoldenDir = std::string(TROUPE_TEST_DATA) + "/v41-tiny-seed7";

json golden_json() {
  std::ifstream in(kGoldenDir + "/config.json");
  return json::parse(in);
}

// The message of the troupe::Error that parsing j throws ("" if it parses).
std::string parse_error(const json& j, const std::string& origin = "test-config.json") {
  try {
    parse_config(j.dump(), origin);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

std::vector<int64_t> layers_with(const ModelConfig& c, LayerMode m) {
  std::vector<int64_t> ids;
  for (int64_t l = 0; l < c.num_hidden_layers; ++l)
    if (c.layer_mode[l] == m) ids.push_back(l);
  return ids;
}

std::vector<int64_t> range(int64_t first, int64_t last) {
  std::vector<int64_t> v;
  for (int64_t i = first; i <= last; ++i) v.push_back(i);
  return v;
}

TEST(Config, TinyPresetEqualsGoldenConfigJson) {
  const ModelConfig golden = load_config(kGoldenDir + "/config.json");
  const ModelConfig tiny = preset_config("v41-tiny");
  EXPECT_EQ(config_to_json(tiny), config_to_json(golden));
  // The serialization is the literal key set: it equals the golden file as JSON.
  EXPECT_EQ(json::parse(config_to_json(tiny)), golden_json());
  EXPECT_EQ(tiny.vocab_size, 4096);
  EXPECT_EQ(tiny.rope_scaling.factor, 4.0);
  EXPECT_EQ(tiny.rope_scaling.original_max_position, 256);
  EXPECT_EQ(tiny.engram_num_embeddings, (std::vector<int64_t>{20022, 20134}));
}

TEST(Config, TinyDerivedModes) {
  const ModelConfig c = preset_config("v41-tiny");
  EXPECT_EQ(layers_with(c, LayerMode::Swa), (std::vector<int64_t>{0}));
  EXPECT_EQ(layers_with(c, LayerMode::Full), (std::vector<int64_t>{1, 3, 6}));
  EXPECT_EQ(layers_with(c, LayerMode::Reuse), (std::vector<int64_t>{2, 4, 5, 7, 9, 11}));
  EXPECT_EQ(layers_with(c, LayerMode::Reindex), (std::vector<int64_t>{8, 10}));
  // Hand-worked: nearest Full with the same ratio; nearest earlier index source.
  EXPECT_EQ(c.kv_source, (std::vector<int64_t>{-1, 1, 1, 3, 3, 3, 6, 6, 6, 6, 6, 6}));
  EXPECT_EQ(c.topk_source, (std::vector<int64_t>{-1, -1, 1, -1, 3, 3, -1, 6, -1, 8, -1, 10}));
  EXPECT_TRUE(c.is_engram_layer(4));
  EXPECT_EQ(c.engram_index(4), 1);
  EXPECT_EQ(c.engram_index(5), -1);
}

TEST(Config, FlashDerivedModes) {
  const ModelConfig c = preset_config("v41-flash");
  ASSERT_EQ(c.compress_ratios.size(), 43u);
  EXPECT_EQ(layers_with(c, LayerMode::Swa), (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(layers_with(c, LayerMode::Full), (std::vector<int64_t>{2, 8, 14, 20}));
  EXPECT_EQ(layers_with(c, LayerMode::Reindex), (std::vector<int64_t>{24, 28, 32, 36}));
  std::vector<int64_t> reuse;
  for (auto [a, b] :
       {std::pair{3, 7}, {9, 13}, {15, 19}, {21, 23}, {25, 27}, {29, 31}, {33, 35}, {37, 39}})
    for (int64_t l : range(a, b)) reuse.push_back(l);
  EXPECT_EQ(layers_with(c, LayerMode::Reuse), reuse);
  for (int64_t l : range(2, 7)) EXPECT_EQ(c.kv_source[l], 2) << l;
  for (int64_t l : range(14, 19)) EXPECT_EQ(c.kv_source[l], 14) << l;
  for (int64_t l : range(20, 39)) EXPECT_EQ(c.kv_source[l], 20) << l;
  EXPECT_EQ(c.topk_source[3], 2);
  EXPECT_EQ(c.topk_source[23], 20);
  EXPECT_EQ(c.topk_source[25], 24);
  EXPECT_EQ(c.topk_source[39], 36);
  EXPECT_EQ(c.rms_norm_eps, 1e-20);
  EXPECT_EQ(c.rope_scaling.factor, 16.0);
}

TEST(Config, FlashRoundTripsThroughJson) {
  const ModelConfig c = preset_config("v41-flash");
  const std::string text = config_to_json(c);
  EXPECT_EQ(config_to_json(parse_config(text)), text);
}

TEST(Config, UnknownPresetIsAnError) {
  EXPECT_THROW(preset_config("v41-huge"), Error);
}

TEST(Config, AliasesAccepted) {
  json j = golden_json();
  j.erase("n_shared"), j["n_shared_experts"] = 1;
  j.erase("top_k"), j["num_experts_per_tok"] = 6;
  j.erase("dspark_top_k"), j["dspark_n_activated_experts"] = 3;
  const ModelConfig c = parse_config(j.dump());
  EXPECT_EQ(c.n_shared, 1);
  EXPECT_EQ(c.top_k, 6);
  EXPECT_EQ(c.dspark_top_k, 3);
  j["n_activated_experts"] = 6;  // a second alias that agrees is fine
  EXPECT_EQ(parse_config(j.dump()).top_k, 6);
  j["n_activated_experts"] = 5;  // ... one that disagrees is not
  const std::string err = parse_error(j);
  EXPECT_NE(err.find("'num_experts_per_tok'"), std::string::npos) << err;
  EXPECT_NE(err.find("'n_activated_experts'"), std::string::npos) << err;
}

TEST(Config, OptionalKeysDefault) {
  json j = golden_json();
  for (const char* k : {"rope_scaling", "n_shared", "norm_topk_prob", "candidate_source_layer_id"})
    j.erase(k);
  const ModelConfig c = parse_config(j.dump());
  EXPECT_EQ(c.rope_scaling.factor, 1.0);
  EXPECT_EQ(c.n_shared, 1);
  EXPECT_TRUE(c.norm_topk_prob);
  EXPECT_EQ(c.candidate_source_layer_id, -1);
  EXPECT_EQ(json::parse(config_to_json(c)).count("rope_scaling"), 0u);  // factor 1: no YaRN
}

TEST(Config, EveryRequiredKeyIsRequired) {
  const json golden = golden_json();
  for (const auto& [key, value] : golden.items()) {
    if (key == "rope_scaling" || key == "n_shared" || key == "norm_topk_prob" ||
        key == "candidate_source_layer_id")
      continue;
    json j = golden;
    j.erase(key);
    const std::string err = parse_error(j, "my/config.json");
    EXPECT_NE(err.find("missing key '" + key + "'"), std::string::npos) << key << ": " << err;
    EXPECT_NE(err.find("my/config.json"), std::string::npos) << err;
  }
}

struct RuleCase {
  const char* what;
  std::function<void(json&)> edit;
  const char* key;  // the key the error must name
};

// One violation per rule of §1 (and of the supported-value keys); each must name its key.
const RuleCase kRuleCases[] = {
    {"ratios too short", [](json& j) { j["compress_ratios"].erase(14); }, "compress_ratios"},
    {"DSpark stage ratio", [](json& j) { j["compress_ratios"][13] = 1; }, "compress_ratios"},
    {"negative ratio", [](json& j) { j["compress_ratios"][0] = -1; }, "compress_ratios"},
    {"no KV source",
     [](json& j) {
       j["kv_source_layer_ids"] = {3, 6};
     },
     "kv_source_layer_ids"},
    {"KV source ratio 0",
     [](json& j) {
       j["kv_source_layer_ids"] = {0, 1, 3, 6};
     },
     "kv_source_layer_ids"},
    {"KV source out of range",
     [](json& j) {
       j["kv_source_layer_ids"] = {1, 3, 6, 12};
     },
     "kv_source_layer_ids"},
    {"index source repeated", [](json& j) { j["index_source_layer_ids"] = {1, 3, 3, 6, 8, 10}; },
     "index_source_layer_ids"},
    {"Reuse without top-k source",
     [](json& j) {
       j["index_source_layer_ids"] = {3, 6, 8, 10};
     },
     "index_source_layer_ids"},
    {"top-k source with another ratio", [](json& j) { j["compress_ratios"][7] = 2; },
     "index_source_layer_ids"},
    {"top-k source with another KV source",
     [](json& j) {
       j["index_source_layer_ids"] = {1, 6, 8, 10};
     },
     "index_source_layer_ids"},
    {"cs not Full", [](json& j) { j["candidate_source_layer_id"] = 8; },
     "candidate_source_layer_id"},
    {"cs out of range", [](json& j) { j["candidate_source_layer_id"] = 12; },
     "candidate_source_layer_id"},
    {"Full layer after cs", [](json& j) { j["candidate_source_layer_id"] = 3; },
     "candidate_source_layer_id"},
    {"replay: layer Ne not Full", [](json& j) { j["n_encoder_layers"] = 5; }, "n_encoder_layers"},
    {"replay: layer Ne ratio 2",
     [](json& j) { j["n_encoder_layers"] = 3, j["candidate_source_layer_id"] = -1; },
     "n_encoder_layers"},
    {"replay: Full after Ne",
     [](json& j) {
       j["kv_source_layer_ids"] = {1, 3, 6, 8}, j["candidate_source_layer_id"] = -1;
     },
     "kv_source_layer_ids"},
    {"head_dim not /32", [](json& j) { j["head_dim"] = 112; }, "head_dim"},
    {"index_head_dim not /32", [](json& j) { j["index_head_dim"] = 48; }, "index_head_dim"},
    {"hidden_size not /32", [](json& j) { j["hidden_size"] = 250; }, "hidden_size"},
    {"moe_intermediate_size not /32", [](json& j) { j["moe_intermediate_size"] = 100; },
     "moe_intermediate_size"},
    {"engram_head_dim not /32", [](json& j) { j["engram_head_dim"] = 40; }, "engram_head_dim"},
    {"kv heads", [](json& j) { j["num_key_value_heads"] = 2; }, "num_key_value_heads"},
    {"shared experts", [](json& j) { j["n_shared"] = 2; }, "n_shared"},
    {"scoring", [](json& j) { j["scoring_func"] = "sigmoid"; }, "scoring_func"},
    {"topk method", [](json& j) { j["topk_method"] = "greedy"; }, "topk_method"},
    {"yarn type", [](json& j) { j["rope_scaling"]["type"] = "linear"; }, "rope_scaling"},
    {"yarn without original length",
     [](json& j) { j["rope_scaling"].erase("original_max_position_embeddings"); },
     "original_max_position_embeddings"},
    {"zero vocab", [](json& j) { j["vocab_size"] = 0; }, "vocab_size"},
    {"string for int", [](json& j) { j["vocab_size"] = "4096"; }, "vocab_size"},
    {"fraction for int", [](json& j) { j["hidden_size"] = 256.5; }, "hidden_size"},
    {"number for bool", [](json& j) { j["norm_topk_prob"] = 1; }, "norm_topk_prob"},
    {"scalar for list", [](json& j) { j["engram_layer_ids"] = 1; }, "engram_layer_ids"},
    {"odd rope dim", [](json& j) { j["qk_rope_head_dim"] = 33; }, "qk_rope_head_dim"},
    {"groups", [](json& j) { j["o_groups"] = 3; }, "o_groups"},
    {"top_k > experts", [](json& j) { j["top_k"] = 33; }, "top_k"},
    {"eos outside vocab", [](json& j) { j["eos_token_id"] = 4096; }, "eos_token_id"},
    {"engram tables count", [](json& j) { j["engram_num_embeddings"] = {20022}; },
     "engram_num_embeddings"},
    {"engram layer out of range",
     [](json& j) {
       j["engram_layer_ids"] = {1, 12};
     },
     "engram_layer_ids"},
    {"engram 1-grams", [](json& j) { j["engram_max_ngram_size"] = 1; }, "engram_max_ngram_size"},
    {"too many drafts", [](json& j) { j["num_speculative_tokens"] = 5; }, "num_speculative_tokens"},
    {"draft top-k", [](json& j) { j["dspark_top_k"] = 9; }, "dspark_top_k"},
    {"draft target layer",
     [](json& j) {
       j["dspark_target_layer_ids"] = {9, 12};
     },
     "dspark_target_layer_ids"},
    {"noise token", [](json& j) { j["dspark_noise_token_id"] = 5000; }, "dspark_noise_token_id"},
    {"negative replay", [](json& j) { j["replay_tokens"] = -1; }, "replay_tokens"},
};

TEST(Config, EachRuleViolationNamesItsKey) {
  ASSERT_EQ(parse_error(golden_json()), "");
  for (const RuleCase& rc : kRuleCases) {
    json j = golden_json();
    rc.edit(j);
    const std::string err = parse_error(j);
    EXPECT_NE(err.find(std::string("'") + rc.key + "'"), std::string::npos)
        << rc.what << ": expected key " << rc.key << ", got: '" << err << "'";
    EXPECT_NE(err.find("test-config.json"), std::string::npos) << rc.what << ": " << err;
  }
}

TEST(Config, ReplayRulesOnlyApplyWithReplay) {
  json j = golden_json();
  j["kv_source_layer_ids"] = {1, 3, 6, 8};
  j["candidate_source_layer_id"] = -1;
  EXPECT_NE(parse_error(j), "");
  j["replay_tokens"] = 0;  // full compute: no constraint on the layers after Ne
  EXPECT_EQ(parse_error(j), "");
}

TEST(Config, IntegralFloatsAcceptedAsIntegers) {
  json j = golden_json();
  j["vocab_size"] = 4096.0;
  EXPECT_EQ(parse_config(j.dump()).vocab_size, 4096);
}

TEST(Config, BadFilesAreErrors) {
  EXPECT_THROW(load_config("/nonexistent/config.json"), Error);
  test::TempDir dir;
  std::ofstream(dir.file("config.json")) << "{\"vocab_size\": 4096,";
  try {
    load_config(dir.file("config.json"));
    FAIL() << "truncated JSON parsed";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(dir.file("config.json")), std::string::npos) << e.what();
  }
  EXPECT_THROW(parse_config("[1, 2]"), Error);
}

}  // namespace
}  // namespace troupe::model

// config.json <-> ModelConfig (MODEL.md §1). Reading is strict about the keys of the
// table (a missing key or a value of the wrong type is an error naming the key and the
// file) and ignores keys it does not know (HF configs carry architectures, dtype, ...).
// The rules between keys live in config_rules.cpp (ModelConfig::finalize).
#include "model/config.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <initializer_list>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

#include "kernels/check.h"

namespace troupe::model {

const char* to_string(LayerMode m) {
  switch (m) {
    case LayerMode::Swa:
      return "SWA";
    case LayerMode::Full:
      return "Full";
    case LayerMode::Reindex:
      return "Reindex";
    case LayerMode::Reuse:
      return "Reuse";
  }
  return "?";
}

bool ModelConfig::is_engram_layer(int64_t layer) const {
  return engram_index(layer) >= 0;
}

int64_t ModelConfig::engram_index(int64_t layer) const {
  auto it = std::find(engram_layer_ids.begin(), engram_layer_ids.end(), layer);
  return it == engram_layer_ids.end() ? -1 : it - engram_layer_ids.begin();
}

namespace {

using json = nlohmann::json;

// Typed access to the top-level keys; errors name the key (the caller adds the file).
// A key may have aliases (§1): the first one present wins, and two present with
// different values is an error rather than a silent choice.
class KeyReader {
 public:
  explicit KeyReader(const json& j) : j_(j) {}

  const json* find(const char* key, std::initializer_list<const char*> aliases = {}) const {
    const json* found = nullptr;
    const char* found_key = key;
    for (const char* k : concat(key, aliases)) {
      auto it = j_.find(k);
      if (it == j_.end() || it->is_null()) continue;
      if (found && *found != *it)
        TROUPE_FAIL("keys '" << found_key << "' and '" << k << "' (alias) disagree");
      if (!found) found = &*it, found_key = k;
    }
    return found;
  }

  const json& need(const char* key, std::initializer_list<const char*> aliases = {}) const {
    const json* v = find(key, aliases);
    if (!v) TROUPE_FAIL("missing key '" << key << "'");
    return *v;
  }

  int64_t integer(const char* key, std::initializer_list<const char*> aliases = {}) const {
    return to_integer(key, need(key, aliases));
  }
  int64_t integer_or(const char* key, int64_t fallback,
                     std::initializer_list<const char*> aliases = {}) const {
    const json* v = find(key, aliases);
    return v ? to_integer(key, *v) : fallback;
  }
  double number(const char* key) const { return to_number(key, need(key)); }
  bool boolean_or(const char* key, bool fallback) const {
    const json* v = find(key);
    if (!v) return fallback;
    if (!v->is_boolean())
      TROUPE_FAIL("key '" << key << "': expected true or false, got " << v->dump());
    return v->get<bool>();
  }
  std::string string(const char* key) const {
    const json& v = need(key);
    if (!v.is_string()) TROUPE_FAIL("key '" << key << "': expected a string, got " << v.dump());
    return v.get<std::string>();
  }
  std::vector<int64_t> integers(const char* key) const {
    const json& v = need(key);
    if (!v.is_array())
      TROUPE_FAIL("key '" << key << "': expected a list of integers, got " << v.dump());
    std::vector<int64_t> out;
    for (const json& e : v) out.push_back(to_integer(key, e));
    return out;
  }

  // Integral floats (4096.0) are accepted: some writers emit every number as a float.
  static int64_t to_integer(const char* key, const json& v) {
    if (v.is_number_integer() && !v.is_number_unsigned()) return v.get<int64_t>();
    if (v.is_number_unsigned() && v.get<uint64_t>() <= uint64_t(INT64_MAX)) return v.get<int64_t>();
    if (v.is_number_float()) {
      const double d = v.get<double>();
      if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9.0e15) return int64_t(d);
    }
    TROUPE_FAIL("key '" << key << "': expected an integer, got " << v.dump());
  }
  static double to_number(const char* key, const json& v) {
    if (!v.is_number()) TROUPE_FAIL("key '" << key << "': expected a number, got " << v.dump());
    return v.get<double>();
  }

 private:
  static std::vector<const char*> concat(const char* key, std::initializer_list<const char*> rest) {
    std::vector<const char*> all{key};
    all.insert(all.end(), rest.begin(), rest.end());
    return all;
  }
  const json& j_;
};

// rope_scaling is optional; absent, null or factor 1 means no YaRN. HF writes the kind
// as "type" or "rope_type"; the YaRN betas default to the paper's 32 and 1.
kernels::YarnScaling read_rope_scaling(const KeyReader& r) {
  kernels::YarnScaling y;
  const json* v = r.find("rope_scaling");
  if (!v) return y;
  if (!v->is_object()) TROUPE_FAIL("key 'rope_scaling': expected an object, got " << v->dump());
  try {
    KeyReader s(*v);
    y.factor = s.number("factor");
    if (y.factor == 1.0) return y;
    const json* type = s.find("type", {"rope_type"});
    if (!type || *type != "yarn") TROUPE_FAIL("only type \"yarn\" is supported, got " << v->dump());
    y.original_max_position = double(s.integer("original_max_position_embeddings"));
    if (const json* bf = s.find("beta_fast")) y.beta_fast = KeyReader::to_number("beta_fast", *bf);
    if (const json* bs = s.find("beta_slow")) y.beta_slow = KeyReader::to_number("beta_slow", *bs);
  } catch (const Error& e) {
    TROUPE_FAIL("key 'rope_scaling': " << e.what());
  }
  return y;
}

void read_attention_keys(const KeyReader& r, ModelConfig& c) {
  c.vocab_size = r.integer("vocab_size");
  c.hidden_size = r.integer("hidden_size");
  c.num_hidden_layers = r.integer("num_hidden_layers");
  c.n_encoder_layers = r.integer("n_encoder_layers");
  c.num_attention_heads = r.integer("num_attention_heads");
  c.num_key_value_heads = r.integer("num_key_value_heads");
  c.head_dim = r.integer("head_dim");
  c.qk_rope_head_dim = r.integer("qk_rope_head_dim");
  c.q_lora_rank = r.integer("q_lora_rank");
  c.o_groups = r.integer("o_groups");
  c.o_lora_rank = r.integer("o_lora_rank");
  c.sliding_window = r.integer("sliding_window");
  c.compress_ratios = r.integers("compress_ratios");
  c.kv_source_layer_ids = r.integers("kv_source_layer_ids");
  c.index_source_layer_ids = r.integers("index_source_layer_ids");
  c.candidate_source_layer_id = r.integer_or("candidate_source_layer_id", -1);
  c.candidate_block_size = r.integer("candidate_block_size");
  c.candidate_topk_blocks = r.integer("candidate_topk_blocks");
  c.index_n_heads = r.integer("index_n_heads");
  c.index_head_dim = r.integer("index_head_dim");
  c.index_topk = r.integer("index_topk");
  c.rope_theta = r.number("rope_theta");
  c.compress_rope_theta = r.number("compress_rope_theta");
  c.rope_scaling = read_rope_scaling(r);
  c.rms_norm_eps = r.number("rms_norm_eps");
}

void read_moe_hc_keys(const KeyReader& r, ModelConfig& c) {
  c.n_routed_experts = r.integer("n_routed_experts");
  c.n_shared = r.integer_or("n_shared", 1, {"n_shared_experts"});
  c.top_k = r.integer("top_k", {"num_experts_per_tok", "n_activated_experts"});
  c.moe_intermediate_size = r.integer("moe_intermediate_size");
  c.scoring_func = r.string("scoring_func");
  c.topk_method = r.string("topk_method");
  c.norm_topk_prob = r.boolean_or("norm_topk_prob", true);
  c.routed_scaling_factor = r.number("routed_scaling_factor");
  c.swiglu_limit = r.number("swiglu_limit");
  c.hc_mult = r.integer("hc_mult");
  c.hc_sinkhorn_iters = r.integer("hc_sinkhorn_iters");
  c.hc_eps = r.number("hc_eps");
}

void read_engram_dspark_keys(const KeyReader& r, ModelConfig& c) {
  c.engram_layer_ids = r.integers("engram_layer_ids");
  c.engram_max_ngram_size = r.integer("engram_max_ngram_size");
  c.engram_n_heads = r.integer("engram_n_heads");
  c.engram_head_dim = r.integer("engram_head_dim");
  c.engram_vocab_size = r.integer("engram_vocab_size");
  c.engram_num_embeddings = r.integers("engram_num_embeddings");
  c.engram_compressed_vocab_size = r.integer("engram_compressed_vocab_size");
  c.engram_pad_token_id = r.integer("engram_pad_token_id");
  c.num_nextn_predict_layers = r.integer("num_nextn_predict_layers");
  c.dspark_block_size = r.integer("dspark_block_size");
  c.dspark_noise_token_id = r.integer("dspark_noise_token_id");
  c.dspark_target_layer_ids = r.integers("dspark_target_layer_ids");
  c.dspark_markov_rank = r.integer("dspark_markov_rank");
  c.dspark_n_routed_experts = r.integer("dspark_n_routed_experts");
  c.dspark_top_k =
      r.integer("dspark_top_k", {"dspark_num_experts_per_tok", "dspark_n_activated_experts"});
  c.num_speculative_tokens = r.integer("num_speculative_tokens");
  c.replay_tokens = r.integer("replay_tokens");
  c.bos_token_id = r.integer("bos_token_id");
  c.eos_token_id = r.integer("eos_token_id");
  c.pad_token_id = r.integer("pad_token_id");
  c.max_position_embeddings = r.integer("max_position_embeddings");
}

}  // namespace

ModelConfig parse_config(const std::string& json_text, const std::string& origin) {
  try {
    json j;
    try {
      j = json::parse(json_text);
    } catch (const json::exception& e) {
      TROUPE_FAIL("not valid JSON (" << e.what() << ")");
    }
    if (!j.is_object()) TROUPE_FAIL("expected a JSON object at the top level");
    KeyReader r(j);
    ModelConfig c;
    read_attention_keys(r, c);
    read_moe_hc_keys(r, c);
    read_engram_dspark_keys(r, c);
    c.finalize();
    return c;
  } catch (const Error& e) {
    TROUPE_FAIL(origin << ": " << e.what());
  }
}

ModelConfig load_config(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) TROUPE_FAIL(path << ": cannot open the model config");
  std::ostringstream text;
  text << in.rdbuf();
  return parse_config(text.str(), path);
}

std::string config_to_json(const ModelConfig& c) {
  nlohmann::ordered_json j;
  j["vocab_size"] = c.vocab_size;
  j["hidden_size"] = c.hidden_size;
  j["num_hidden_layers"] = c.num_hidden_layers;
  j["n_encoder_layers"] = c.n_encoder_layers;
  j["num_attention_heads"] = c.num_attention_heads;
  j["num_key_value_heads"] = c.num_key_value_heads;
  j["head_dim"] = c.head_dim;
  j["qk_rope_head_dim"] = c.qk_rope_head_dim;
  j["q_lora_rank"] = c.q_lora_rank;
  j["o_groups"] = c.o_groups;
  j["o_lora_rank"] = c.o_lora_rank;
  j["sliding_window"] = c.sliding_window;
  j["compress_ratios"] = c.compress_ratios;
  j["kv_source_layer_ids"] = c.kv_source_layer_ids;
  j["index_source_layer_ids"] = c.index_source_layer_ids;
  j["candidate_source_layer_id"] = c.candidate_source_layer_id;
  j["candidate_block_size"] = c.candidate_block_size;
  j["candidate_topk_blocks"] = c.candidate_topk_blocks;
  j["index_n_heads"] = c.index_n_heads;
  j["index_head_dim"] = c.index_head_dim;
  j["index_topk"] = c.index_topk;
  j["rope_theta"] = c.rope_theta;
  j["compress_rope_theta"] = c.compress_rope_theta;
  if (c.rope_scaling.factor != 1.0) {
    const double orig = c.rope_scaling.original_max_position;  // a length: written as an integer
    j["rope_scaling"] = {{"type", "yarn"},
                         {"factor", c.rope_scaling.factor},
                         {"original_max_position_embeddings", int64_t(orig)},
                         {"beta_fast", c.rope_scaling.beta_fast},
                         {"beta_slow", c.rope_scaling.beta_slow}};
  }
  j["rms_norm_eps"] = c.rms_norm_eps;
  j["n_routed_experts"] = c.n_routed_experts;
  j["n_shared"] = c.n_shared;
  j["top_k"] = c.top_k;
  j["moe_intermediate_size"] = c.moe_intermediate_size;
  j["scoring_func"] = c.scoring_func;
  j["topk_method"] = c.topk_method;
  j["norm_topk_prob"] = c.norm_topk_prob;
  j["routed_scaling_factor"] = c.routed_scaling_factor;
  j["swiglu_limit"] = c.swiglu_limit;
  j["hc_mult"] = c.hc_mult;
  j["hc_sinkhorn_iters"] = c.hc_sinkhorn_iters;
  j["hc_eps"] = c.hc_eps;
  j["engram_layer_ids"] = c.engram_layer_ids;
  j["engram_max_ngram_size"] = c.engram_max_ngram_size;
  j["engram_n_heads"] = c.engram_n_heads;
  j["engram_head_dim"] = c.engram_head_dim;
  j["engram_vocab_size"] = c.engram_vocab_size;
  j["engram_num_embeddings"] = c.engram_num_embeddings;
  j["engram_compressed_vocab_size"] = c.engram_compressed_vocab_size;
  j["engram_pad_token_id"] = c.engram_pad_token_id;
  j["num_nextn_predict_layers"] = c.num_nextn_predict_layers;
  j["dspark_block_size"] = c.dspark_block_size;
  j["dspark_noise_token_id"] = c.dspark_noise_token_id;
  j["dspark_target_layer_ids"] = c.dspark_target_layer_ids;
  j["dspark_markov_rank"] = c.dspark_markov_rank;
  j["dspark_n_routed_experts"] = c.dspark_n_routed_experts;
  j["dspark_top_k"] = c.dspark_top_k;
  j["num_speculative_tokens"] = c.num_speculative_tokens;
  j["replay_tokens"] = c.replay_tokens;
  j["bos_token_id"] = c.bos_token_id;
  j["eos_token_id"] = c.eos_token_id;
  j["pad_token_id"] = c.pad_token_id;
  j["max_position_embeddings"] = c.max_position_embeddings;
  return j.dump(1);
}

}  // namespace troupe::model

// config.json -> LlamaConfig for HF LLaMA-family folders. Keys are transformers' names
// (LlamaConfig, MistralConfig, MixtralConfig, Qwen2Config, Qwen2MoeConfig); what troupe
// does not run (RoPE scaling, an o_proj bias, a head_dim apart from hidden / heads,
// dense layers inside a Qwen2-MoE) is an error naming the key, never ignored.
#include "model/hf_llama_config.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "kernels/check.h"

namespace troupe::model {
namespace {

using json = nlohmann::json;

struct HfClass {
  const char* name;
  LlamaArch arch;
  bool moe;
};
constexpr HfClass kClasses[] = {
    {"LlamaForCausalLM", LlamaArch::Llama, false},
    {"MistralForCausalLM", LlamaArch::Llama, false},
    {"MixtralForCausalLM", LlamaArch::Llama, true},
    {"Qwen2ForCausalLM", LlamaArch::Qwen2, false},
    {"Qwen2MoeForCausalLM", LlamaArch::Qwen2Moe, true},
};
constexpr const char* kClassList =
    "LlamaForCausalLM, MistralForCausalLM, MixtralForCausalLM, Qwen2ForCausalLM, "
    "Qwen2MoeForCausalLM";

// The first entry of "architectures" troupe reads as a LLaMA-family model, else null.
const HfClass* llama_class(const json& j) {
  const auto it = j.find("architectures");
  if (it == j.end() || !it->is_array()) return nullptr;
  for (const json& a : *it)
    for (const HfClass& c : kClasses)
      if (a.is_string() && a.get<std::string>() == c.name) return &c;
  return nullptr;
}

// Typed access to config.json's keys; a null value counts as absent. Errors name the key
// and the file.
class Keys {
 public:
  Keys(const json& j, const std::string& source) : j_(j), source_(source) {}

  const json* find(const char* key) const {
    const auto it = j_.find(key);
    return it == j_.end() || it->is_null() ? nullptr : &*it;
  }
  int64_t integer(const char* key) const {
    const json* v = find(key);
    if (!v) TROUPE_FAIL(source_ << ": missing key '" << key << "'");
    return to_integer(key, *v);
  }
  int64_t integer_or(const char* key, int64_t fallback) const {
    const json* v = find(key);
    return v ? to_integer(key, *v) : fallback;
  }
  double number_or(const char* key, double fallback) const {
    const json* v = find(key);
    if (!v) return fallback;
    if (!v->is_number()) TROUPE_FAIL(source_ << ": key '" << key << "': expected a number, got " << v->dump());
    return v->get<double>();
  }
  double number(const char* key) const {
    if (!find(key)) TROUPE_FAIL(source_ << ": missing key '" << key << "'");
    return number_or(key, 0);
  }
  bool boolean_or(const char* key, bool fallback) const {
    const json* v = find(key);
    if (!v) return fallback;
    if (!v->is_boolean()) TROUPE_FAIL(source_ << ": key '" << key << "': expected true or false, got " << v->dump());
    return v->get<bool>();
  }
  // An id, or a list of ids (LLaMA-3's eos): the first; absent: -1.
  int32_t token_id(const char* key) const {
    const json* v = find(key);
    if (v && v->is_array()) v = v->empty() ? nullptr : &(*v)[0];
    if (!v) return -1;
    const int64_t id = to_integer(key, *v);
    if (id < 0 || id > INT32_MAX) TROUPE_FAIL(source_ << ": key '" << key << "' = " << id << " is not a token id");
    return static_cast<int32_t>(id);
  }
  [[noreturn]] void unsupported(const char* key, const std::string& why) const {
    TROUPE_FAIL(source_ << ": key '" << key << "' = " << find(key)->dump() << " is not supported (" << why << ")");
  }

 private:
  // Integral floats (4096.0) count: some writers emit every number as a float.
  int64_t to_integer(const char* key, const json& v) const {
    if (v.is_number_integer() && (!v.is_number_unsigned() || v.get<uint64_t>() <= uint64_t(INT64_MAX)))
      return v.get<int64_t>();
    if (v.is_number_float() && std::isfinite(v.get<double>()) && v.get<double>() == std::floor(v.get<double>()) &&
        std::fabs(v.get<double>()) < 9.0e15)
      return static_cast<int64_t>(v.get<double>());
    TROUPE_FAIL(source_ << ": key '" << key << "': expected an integer, got " << v.dump());
  }

  const json& j_;
  const std::string& source_;
};

// The widths of the MLP (or of each expert) and the routing of one class.
void read_ffn(const Keys& k, const HfClass& cls, LlamaConfig& c) {
  if (cls.arch != LlamaArch::Qwen2Moe) {
    c.ffn_dim = k.integer("intermediate_size");
    if (cls.moe) {
      c.experts = k.integer("num_local_experts");
      c.experts_used = k.integer("num_experts_per_tok");
    }
    return;
  }
  c.experts = k.integer("num_experts");
  c.experts_used = k.integer("num_experts_per_tok");
  c.ffn_dim = k.integer("moe_intermediate_size");
  c.shared_ffn_dim = k.integer("shared_expert_intermediate_size");
  // transformers' Qwen2-MoE renormalises only with norm_topk_prob (default false).
  c.renormalize_topk = k.boolean_or("norm_topk_prob", false);
  if (k.integer_or("decoder_sparse_step", 1) != 1)
    k.unsupported("decoder_sparse_step", "every layer must be an MoE layer");
  const json* dense = k.find("mlp_only_layers");
  if (dense && !(dense->is_array() && dense->empty()))
    k.unsupported("mlp_only_layers", "every layer must be an MoE layer");
}

// What troupe does not run is refused by key.
void refuse_unsupported(const Keys& k, const HfClass& cls, const LlamaConfig& c) {
  if (k.find("rope_scaling")) k.unsupported("rope_scaling", "only unscaled RoPE");
  const json* act = k.find("hidden_act");
  if (act && !(act->is_string() && act->get<std::string>() == "silu"))
    k.unsupported("hidden_act", "the MLP is SwiGLU: silu");
  if (cls.arch == LlamaArch::Llama && k.boolean_or("attention_bias", false))
    k.unsupported("attention_bias", "LLaMA's bias includes o_proj, which troupe does not add");
  if (c.heads > 0 && k.integer_or("head_dim", c.dim / c.heads) != c.dim / c.heads)
    k.unsupported("head_dim", "it must be hidden_size / num_attention_heads");
}

// A sliding window no shorter than the context changes nothing; a shorter one is honoured
// by serving only that many positions, where every key is inside the window.
void apply_sliding_window(const Keys& k, const HfClass& cls, LlamaConfig& c) {
  const bool used = cls.arch == LlamaArch::Llama ? k.find("sliding_window") != nullptr
                                                 : k.boolean_or("use_sliding_window", false);
  if (!used) return;
  const int64_t window = k.integer("sliding_window");
  if (window >= 1 && window < c.context_length) c.context_length = window;
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) TROUPE_FAIL("cannot open '" << path << "'");
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

bool is_hf_llama_dir(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path config = fs::path(dir) / "config.json";
  if (dir.empty() || !fs::is_directory(dir, ec) || !fs::is_regular_file(config, ec)) return false;
  const json j = json::parse(read_text(config.string()), nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return false;
  if (llama_class(j)) return true;
  const auto it = j.find("architectures");
  if (it == j.end() || !it->is_array()) return false;
  for (const json& a : *it)
    if (a.is_string() && a.get<std::string>().rfind("Deepseek", 0) == 0) return false;
  if (it->empty()) return false;
  TROUPE_FAIL(config.string() << ": architectures " << it->dump() << " is not supported (troupe reads "
                              "DeepSeek-V4.1 folders and " << kClassList << ")");
}

LlamaConfig llama_config_from_hf_json(std::string_view text, const std::string& source) {
  const json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) TROUPE_FAIL(source << ": not a JSON object");
  const HfClass* cls = llama_class(j);
  if (!cls) {
    const auto it = j.find("architectures");
    TROUPE_FAIL(source << ": architectures " << (it == j.end() ? std::string("is missing") : it->dump())
                       << ": troupe reads " << kClassList << " folders");
  }
  const Keys k(j, source);
  LlamaConfig c;
  c.arch = cls->arch;
  c.dim = k.integer("hidden_size");
  c.layers = k.integer("num_hidden_layers");
  c.heads = k.integer("num_attention_heads");
  c.kv_heads = k.integer_or("num_key_value_heads", c.heads);
  c.vocab_size = k.integer("vocab_size");
  c.context_length = k.integer("max_position_embeddings");
  c.rope_base = k.number_or("rope_theta", 10000.0);
  c.rms_eps = static_cast<float>(k.number("rms_norm_eps"));
  c.bos_token_id = k.token_id("bos_token_id");
  c.eos_token_id = k.token_id("eos_token_id");
  c.tie_word_embeddings = k.boolean_or("tie_word_embeddings", false);
  c.head_dim = c.heads > 0 ? c.dim / c.heads : 0;
  c.rope_neox = true;  // rotate_half: q/k halves, not adjacent pairs (docs/gguf.md)
  c.qkv_bias = cls->arch != LlamaArch::Llama;
  read_ffn(k, *cls, c);
  refuse_unsupported(k, *cls, c);
  apply_sliding_window(k, *cls, c);
  try {
    c.validate();
  } catch (const Error& e) {
    TROUPE_FAIL(source << ": " << e.what());
  }
  return c;
}

LlamaConfig llama_config_from_hf(const std::string& dir) {
  const std::string path = (std::filesystem::path(dir) / "config.json").string();
  return llama_config_from_hf_json(read_text(path), path);
}

}  // namespace troupe::model

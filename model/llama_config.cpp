#include "model/llama_config.h"

#include <cmath>
#include <limits>

#include "kernels/check.h"
#include "model/gguf.h"
#include "model/gguf_writer.h"

namespace troupe::model {
namespace {

// Model sizes far beyond any real checkpoint are corrupt metadata, not a model.
constexpr int64_t kMaxDim = int64_t(1) << 20;

int64_t bounded(uint64_t v, int64_t max, const char* key) {
  if (v > uint64_t(max)) TROUPE_FAIL("GGUF metadata " << key << " = " << v << " is above " << max);
  return static_cast<int64_t>(v);
}

int32_t token_id_or(const GgufFile& f, const std::string& key) {
  if (!f.find(key)) return -1;
  return static_cast<int32_t>(bounded(f.get_uint(key), std::numeric_limits<int32_t>::max(),
                                      key.c_str()));
}

int64_t vocab_size_of(const GgufFile& f, const std::string& p) {
  const std::string key = p + "vocab_size";
  if (f.find(key)) return bounded(f.get_uint(key), 1 << 24, key.c_str());
  if (f.find("tokenizer.ggml.tokens"))
    return static_cast<int64_t>(f.get_array("tokenizer.ggml.tokens").size());
  const GgufTensor* e = f.find_tensor("token_embd.weight");
  if (!e || e->ne.size() != 2) TROUPE_FAIL(f.source() << ": no vocabulary size (no " << key << ", "
                                           "tokenizer.ggml.tokens or 2-d token_embd.weight)");
  return e->ne[1];
}

LlamaArch arch_of(const GgufFile& f) {
  const std::string arch = f.get_string("general.architecture");
  for (LlamaArch a : {LlamaArch::Llama, LlamaArch::Qwen2, LlamaArch::Qwen2Moe})
    if (arch == arch_name(a)) return a;
  TROUPE_FAIL(f.source() << ": architecture '" << arch << "' is not supported (troupe reads GGUF "
                         "architectures 'llama' (LLaMA-2/3, Mistral, Mixtral-style MoE), 'qwen2' "
                         "and 'qwen2moe')");
}

// qwen2moe's expert widths (llama.cpp's fallbacks when the expert keys are absent).
void read_qwen2moe_widths(const GgufFile& f, const std::string& p, LlamaConfig& c) {
  const std::string ff = p + "feed_forward_length", exp = p + "expert_feed_forward_length",
                    shexp = p + "expert_shared_feed_forward_length";
  const int64_t dense = bounded(f.get_uint_or(ff, 0), kMaxDim, ff.c_str());
  if (!f.find(exp) && c.experts_used < 1)
    TROUPE_FAIL(f.source() << ": " << exp << " is missing and " << p << "expert_used_count is not "
                           "set (the expert width is one of them)");
  c.ffn_dim = f.find(exp) ? bounded(f.get_uint(exp), kMaxDim, exp.c_str()) : dense / c.experts_used;
  c.shared_ffn_dim = f.find(shexp) ? bounded(f.get_uint(shexp), kMaxDim, shexp.c_str()) : dense;
  if (c.shared_ffn_dim < 1)
    TROUPE_FAIL(f.source() << ": the shared expert's width is 0 (" << shexp << " and " << ff
                           << " are missing or 0)");
}

}  // namespace

const char* arch_name(LlamaArch a) {
  switch (a) {
    case LlamaArch::Llama: return "llama";
    case LlamaArch::Qwen2: return "qwen2";
    case LlamaArch::Qwen2Moe: return "qwen2moe";
  }
  return "?";
}

void LlamaConfig::validate() const {
  auto in = [](int64_t v, int64_t lo, int64_t hi, const char* what) {
    if (v < lo || v > hi) TROUPE_FAIL("LLaMA config: " << what << " = " << v << " is outside [" << lo << ", " << hi << "]");
  };
  in(vocab_size, 1, int64_t(1) << 24, "vocab_size");
  in(dim, 1, kMaxDim, "embedding_length");
  in(layers, 1, 4096, "block_count");
  in(ffn_dim, 1, kMaxDim, "feed_forward_length");
  in(heads, 1, dim, "attention.head_count");
  in(kv_heads, 1, heads, "attention.head_count_kv");
  in(context_length, 1, int64_t(1) << 24, "context_length");
  if (dim % heads != 0) TROUPE_FAIL("LLaMA config: embedding_length " << dim << " is not a multiple of head_count " << heads);
  if (heads % kv_heads != 0) TROUPE_FAIL("LLaMA config: head_count " << heads << " is not a multiple of head_count_kv " << kv_heads);
  if (head_dim % 2 != 0) TROUPE_FAIL("LLaMA config: head dimension " << head_dim << " is odd (RoPE rotates pairs)");
  if (!(rope_base > 0) || !std::isfinite(rope_base)) TROUPE_FAIL("LLaMA config: rope.freq_base = " << rope_base << " must be > 0");
  if (!(rms_eps > 0) || !std::isfinite(rms_eps)) TROUPE_FAIL("LLaMA config: layer_norm_rms_epsilon = " << rms_eps << " must be > 0");
  if (experts > 0) {
    in(experts, 1, 4096, "expert_count");
    in(experts_used, 1, experts, "expert_used_count");
  } else if (experts_used != 0) {
    TROUPE_FAIL("LLaMA config: expert_used_count = " << experts_used << " without expert_count");
  }
  if (arch == LlamaArch::Qwen2Moe && (experts < 1 || shared_ffn_dim < 1))
    TROUPE_FAIL("LLaMA config: a qwen2moe model needs expert_count >= 1 and a shared expert (expert_count "
                << experts << ", shared width " << shared_ffn_dim << ")");
  if (shared_ffn_dim != 0) in(shared_ffn_dim, 1, kMaxDim, "expert_shared_feed_forward_length");
  if (shared_ffn_dim != 0 && experts == 0)
    TROUPE_FAIL("LLaMA config: a shared expert (width " << shared_ffn_dim << ") without expert_count");
  if (bos_token_id >= vocab_size) TROUPE_FAIL("LLaMA config: bos_token_id " << bos_token_id << " >= vocab_size " << vocab_size);
  if (eos_token_id >= vocab_size) TROUPE_FAIL("LLaMA config: eos_token_id " << eos_token_id << " >= vocab_size " << vocab_size);
}

LlamaConfig llama_config_from_gguf(const GgufFile& f) {
  LlamaConfig c;
  c.arch = arch_of(f);
  const std::string p = std::string(arch_name(c.arch)) + ".";
  auto uint_key = [&](const char* name, int64_t max) {
    const std::string key = p + name;
    return bounded(f.get_uint(key), max, key.c_str());
  };
  auto uint_key_or = [&](const char* name, int64_t max, uint64_t fallback) {
    const std::string key = p + name;
    return bounded(f.get_uint_or(key, fallback), max, key.c_str());
  };
  c.dim = uint_key("embedding_length", kMaxDim);
  c.layers = uint_key("block_count", 4096);
  c.heads = uint_key("attention.head_count", kMaxDim);
  c.kv_heads = uint_key_or("attention.head_count_kv", kMaxDim, uint64_t(c.heads));
  c.context_length = uint_key("context_length", int64_t(1) << 24);
  c.rope_base = f.get_float_or(p + "rope.freq_base", 10000.0);
  c.rms_eps = static_cast<float>(f.get_float(p + "attention.layer_norm_rms_epsilon"));
  c.experts = uint_key_or("expert_count", 4096, 0);
  c.experts_used = uint_key_or("expert_used_count", 4096, 0);
  if (c.arch == LlamaArch::Qwen2Moe) {
    read_qwen2moe_widths(f, p, c);
  } else {
    c.ffn_dim = uint_key("feed_forward_length", kMaxDim);
  }
  if (c.arch == LlamaArch::Qwen2 && c.experts != 0)
    TROUPE_FAIL(f.source() << ": " << p << "expert_count " << c.experts << " in a dense qwen2 file "
                           "(Qwen2-MoE is architecture 'qwen2moe')");
  // llama.cpp's rope type for both Qwen2 architectures is NEOX; they carry q/k/v biases
  // and qwen2moe does not renormalise its routing weights (build_moe_ffn's norm_w false).
  const bool qwen = c.arch != LlamaArch::Llama;
  c.rope_neox = qwen;
  c.qkv_bias = qwen;
  c.renormalize_topk = !qwen;
  c.vocab_size = vocab_size_of(f, p);
  c.bos_token_id = token_id_or(f, "tokenizer.ggml.bos_token_id");
  c.eos_token_id = token_id_or(f, "tokenizer.ggml.eos_token_id");
  c.head_dim = c.heads > 0 ? c.dim / c.heads : 0;
  c.validate();
  // troupe's RoPE kernel rotates whole heads here; partial rotary (n_rot < head_dim)
  // would rotate the first n_rot channels in ggml's convention, not supported yet.
  const uint64_t rot = f.get_uint_or(p + "rope.dimension_count", uint64_t(c.head_dim));
  if (rot != uint64_t(c.head_dim))
    TROUPE_FAIL(f.source() << ": " << p << "rope.dimension_count " << rot << " differs from the head "
                           "dimension " << c.head_dim << " (partial rotary is not supported)");
  const std::string scaling = p + "rope.scaling.type";
  if (f.find(scaling) && f.get_string(scaling) != "none")
    TROUPE_FAIL(f.source() << ": " << scaling << " '" << f.get_string(scaling)
                           << "' is not supported (only unscaled RoPE)");
  return c;
}

void write_llama_config(const LlamaConfig& c, const std::string& name, GgufWriter& w) {
  const std::string p = std::string(arch_name(c.arch)) + ".";
  w.set_string("general.architecture", arch_name(c.arch));
  w.set_string("general.name", name);
  w.set_u32(p + "context_length", uint32_t(c.context_length));
  w.set_u32(p + "embedding_length", uint32_t(c.dim));
  w.set_u32(p + "block_count", uint32_t(c.layers));
  w.set_u32(p + "attention.head_count", uint32_t(c.heads));
  w.set_u32(p + "attention.head_count_kv", uint32_t(c.kv_heads));
  w.set_u32(p + "rope.dimension_count", uint32_t(c.head_dim));
  w.set_f32(p + "rope.freq_base", float(c.rope_base));
  w.set_f32(p + "attention.layer_norm_rms_epsilon", c.rms_eps);
  w.set_u32(p + "vocab_size", uint32_t(c.vocab_size));
  if (c.is_moe()) {
    w.set_u32(p + "expert_count", uint32_t(c.experts));
    w.set_u32(p + "expert_used_count", uint32_t(c.experts_used));
  }
  if (c.arch == LlamaArch::Qwen2Moe) {
    // As llama.cpp's converter: the dense width beside the two expert widths.
    w.set_u32(p + "feed_forward_length", uint32_t(c.shared_ffn_dim));
    w.set_u32(p + "expert_feed_forward_length", uint32_t(c.ffn_dim));
    w.set_u32(p + "expert_shared_feed_forward_length", uint32_t(c.shared_ffn_dim));
  } else {
    w.set_u32(p + "feed_forward_length", uint32_t(c.ffn_dim));
  }
}

}  // namespace troupe::model

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

int64_t vocab_size_of(const GgufFile& f) {
  if (f.find("llama.vocab_size")) return bounded(f.get_uint("llama.vocab_size"), 1 << 24, "llama.vocab_size");
  if (f.find("tokenizer.ggml.tokens"))
    return static_cast<int64_t>(f.get_array("tokenizer.ggml.tokens").size());
  const GgufTensor* e = f.find_tensor("token_embd.weight");
  if (!e || e->ne.size() != 2) TROUPE_FAIL(f.source() << ": no vocabulary size (no llama.vocab_size, "
                                           "tokenizer.ggml.tokens or 2-d token_embd.weight)");
  return e->ne[1];
}

}  // namespace

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
  if (bos_token_id >= vocab_size) TROUPE_FAIL("LLaMA config: bos_token_id " << bos_token_id << " >= vocab_size " << vocab_size);
  if (eos_token_id >= vocab_size) TROUPE_FAIL("LLaMA config: eos_token_id " << eos_token_id << " >= vocab_size " << vocab_size);
}

LlamaConfig llama_config_from_gguf(const GgufFile& f) {
  const std::string arch = f.get_string("general.architecture");
  if (arch != "llama")
    TROUPE_FAIL(f.source() << ": architecture '" << arch << "' is not supported (troupe reads GGUF "
                           "architecture 'llama': LLaMA-2/3, Mistral, Mixtral-style MoE)");
  LlamaConfig c;
  c.dim = bounded(f.get_uint("llama.embedding_length"), kMaxDim, "llama.embedding_length");
  c.layers = bounded(f.get_uint("llama.block_count"), 4096, "llama.block_count");
  c.ffn_dim = bounded(f.get_uint("llama.feed_forward_length"), kMaxDim, "llama.feed_forward_length");
  c.heads = bounded(f.get_uint("llama.attention.head_count"), kMaxDim, "llama.attention.head_count");
  c.kv_heads = bounded(f.get_uint_or("llama.attention.head_count_kv", uint64_t(c.heads)), kMaxDim,
                       "llama.attention.head_count_kv");
  c.context_length = bounded(f.get_uint("llama.context_length"), int64_t(1) << 24, "llama.context_length");
  c.rope_base = f.get_float_or("llama.rope.freq_base", 10000.0);
  c.rms_eps = static_cast<float>(f.get_float("llama.attention.layer_norm_rms_epsilon"));
  c.experts = bounded(f.get_uint_or("llama.expert_count", 0), 4096, "llama.expert_count");
  c.experts_used = bounded(f.get_uint_or("llama.expert_used_count", 0), 4096, "llama.expert_used_count");
  c.vocab_size = vocab_size_of(f);
  c.bos_token_id = token_id_or(f, "tokenizer.ggml.bos_token_id");
  c.eos_token_id = token_id_or(f, "tokenizer.ggml.eos_token_id");
  c.head_dim = c.heads > 0 ? c.dim / c.heads : 0;
  c.validate();
  // troupe's RoPE kernel rotates whole heads here; partial rotary (n_rot < head_dim)
  // would rotate the first n_rot channels in ggml's convention, not supported yet.
  const uint64_t rot = f.get_uint_or("llama.rope.dimension_count", uint64_t(c.head_dim));
  if (rot != uint64_t(c.head_dim))
    TROUPE_FAIL(f.source() << ": llama.rope.dimension_count " << rot << " differs from the head "
                           "dimension " << c.head_dim << " (partial rotary is not supported)");
  if (f.find("llama.rope.scaling.type") && f.get_string("llama.rope.scaling.type") != "none")
    TROUPE_FAIL(f.source() << ": llama.rope.scaling.type '" << f.get_string("llama.rope.scaling.type")
                           << "' is not supported (only unscaled RoPE)");
  return c;
}

void write_llama_config(const LlamaConfig& c, const std::string& name, GgufWriter& w) {
  w.set_string("general.architecture", "llama");
  w.set_string("general.name", name);
  w.set_u32("llama.context_length", uint32_t(c.context_length));
  w.set_u32("llama.embedding_length", uint32_t(c.dim));
  w.set_u32("llama.block_count", uint32_t(c.layers));
  w.set_u32("llama.feed_forward_length", uint32_t(c.ffn_dim));
  w.set_u32("llama.attention.head_count", uint32_t(c.heads));
  w.set_u32("llama.attention.head_count_kv", uint32_t(c.kv_heads));
  w.set_u32("llama.rope.dimension_count", uint32_t(c.head_dim));
  w.set_f32("llama.rope.freq_base", float(c.rope_base));
  w.set_f32("llama.attention.layer_norm_rms_epsilon", c.rms_eps);
  w.set_u32("llama.vocab_size", uint32_t(c.vocab_size));
  if (c.is_moe()) {
    w.set_u32("llama.expert_count", uint32_t(c.experts));
    w.set_u32("llama.expert_used_count", uint32_t(c.experts_used));
  }
}

}  // namespace troupe::model

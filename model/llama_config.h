// Hyperparameters of a LLaMA-family checkpoint, read from GGUF metadata and checked:
// GGUF architectures `llama` (LLaMA-2/3, Mistral, Mixtral-style MoE), `qwen2` (q/k/v
// biases, NEOX RoPE) and `qwen2moe` (also: routed experts whose weights are not
// renormalised, and a shared expert behind a sigmoid gate). docs/gguf.md has the math.
#pragma once

#include <cstdint>
#include <string>

namespace troupe::model {

class GgufFile;

// The GGUF architecture: its name prefixes the metadata keys (llama.*, qwen2.*, qwen2moe.*).
enum class LlamaArch { Llama, Qwen2, Qwen2Moe };
const char* arch_name(LlamaArch a);  // "llama", "qwen2", "qwen2moe"

struct LlamaConfig {
  LlamaArch arch = LlamaArch::Llama;
  int64_t vocab_size = 0;
  int64_t dim = 0;            // llama.embedding_length
  int64_t layers = 0;         // llama.block_count
  int64_t ffn_dim = 0;        // llama.feed_forward_length (per expert for MoE; qwen2moe:
                              // expert_feed_forward_length)
  int64_t heads = 0;          // llama.attention.head_count
  int64_t kv_heads = 0;       // llama.attention.head_count_kv (GQA groups)
  int64_t head_dim = 0;       // dim / heads
  int64_t context_length = 0; // llama.context_length
  double rope_base = 10000.0; // llama.rope.freq_base
  float rms_eps = 1e-5f;      // llama.attention.layer_norm_rms_epsilon
  int64_t experts = 0;        // llama.expert_count; 0 = dense MLP
  int64_t experts_used = 0;   // llama.expert_used_count (top-k)
  int64_t shared_ffn_dim = 0; // qwen2moe.expert_shared_feed_forward_length; 0 = no shared expert
  bool rope_neox = false;     // RoPE pairs (i, i + hd/2) (qwen2*), else (2i, 2i + 1)
  bool qkv_bias = false;      // blk.N.attn_{q,k,v}.bias are added after the projections
  bool renormalize_topk = true;  // routing weights softmax over the k picked (Mixtral), else
                                 // the softmax over all experts at the k picked (qwen2moe)
  int32_t bos_token_id = -1;  // tokenizer.ggml.bos_token_id, -1 when absent
  int32_t eos_token_id = -1;  // tokenizer.ggml.eos_token_id, -1 when absent
  // An HF folder's config.json tie_word_embeddings (absent: false, as transformers'
  // LLaMA-family classes default): true, the logits use embed_tokens; false, the folder
  // must hold lm_head.weight. A GGUF file has no such key: a missing output.weight is tied.
  bool tie_word_embeddings = false;

  bool is_moe() const { return experts > 0; }
  bool has_shared_expert() const { return shared_ffn_dim > 0; }
  // Throws troupe::Error naming the field when a value is out of range or inconsistent.
  void validate() const;
};

// Reads general.architecture ("llama", "qwen2" or "qwen2moe") and the keys under its
// prefix (llama.cpp's names). The vocabulary size is <arch>.vocab_size, else the length
// of tokenizer.ggml.tokens, else token_embd's rows. qwen2moe's expert width is
// expert_feed_forward_length, else feed_forward_length / expert_used_count; its shared
// expert's expert_shared_feed_forward_length, else feed_forward_length (as llama.cpp).
LlamaConfig llama_config_from_gguf(const GgufFile& f);

class GgufWriter;
// The other way (files tests and benchmarks write): general.architecture (c.arch),
// general.name, and the <arch>.* keys of c (expert keys only for MoE; no tokenizer keys).
void write_llama_config(const LlamaConfig& c, const std::string& name, GgufWriter& w);

}  // namespace troupe::model

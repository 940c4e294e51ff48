// Hyperparameters of a LLaMA-family checkpoint (LLaMA-2/3, Mistral, Mixtral-style MoE
// under the `llama` GGUF architecture), read from GGUF metadata and checked.
#pragma once

#include <cstdint>
#include <string>

namespace troupe::model {

class GgufFile;

struct LlamaConfig {
  int64_t vocab_size = 0;
  int64_t dim = 0;            // llama.embedding_length
  int64_t layers = 0;         // llama.block_count
  int64_t ffn_dim = 0;        // llama.feed_forward_length (per expert for MoE)
  int64_t heads = 0;          // llama.attention.head_count
  int64_t kv_heads = 0;       // llama.attention.head_count_kv (GQA groups)
  int64_t head_dim = 0;       // dim / heads
  int64_t context_length = 0; // llama.context_length
  double rope_base = 10000.0; // llama.rope.freq_base
  float rms_eps = 1e-5f;      // llama.attention.layer_norm_rms_epsilon
  int64_t experts = 0;        // llama.expert_count; 0 = dense MLP
  int64_t experts_used = 0;   // llama.expert_used_count (top-k)
  int32_t bos_token_id = -1;  // tokenizer.ggml.bos_token_id, -1 when absent
  int32_t eos_token_id = -1;  // tokenizer.ggml.eos_token_id, -1 when absent

  bool is_moe() const { return experts > 0; }
  // Throws troupe::Error naming the field when a value is out of range or inconsistent.
  void validate() const;
};

// Reads general.architecture (must be "llama") and the llama.* keys. The vocabulary size
// is llama.vocab_size, else the length of tokenizer.ggml.tokens, else token_embd's rows.
LlamaConfig llama_config_from_gguf(const GgufFile& f);

class GgufWriter;
// The other way (files tests and benchmarks write): general.architecture "llama",
// general.name, and the llama.* keys of c (expert keys only for MoE; no tokenizer keys).
void write_llama_config(const LlamaConfig& c, const std::string& name, GgufWriter& w);

}  // namespace troupe::model

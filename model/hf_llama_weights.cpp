// A LLaMA-family model's weights from an HF folder's safetensors (transformers' names:
// model.layers.N.self_attn.q_proj.weight, ...), bound as the GGUF loader binds them:
// F32, BF16 and F16 matrices in place in the mapping (an element-misaligned one, possible
// only in a hand-made file, as an owned f32 copy: exact).
// HF q/k rows are in rotate_half order: the config has rope_neox, so no permutation.
#include <cstdint>
#include <string>

#include "kernels/check.h"
#include "model/gguf_dequant.h"
#include "model/llama_weights.h"
#include "model/safetensors.h"

namespace troupe::model {
namespace {

const std::initializer_list<DType> kFloat = {DType::F32, DType::BF16, DType::F16};

GgmlType ggml_of(DType d) {
  return d == DType::F32 ? GgmlType::F32 : d == DType::BF16 ? GgmlType::BF16 : GgmlType::F16;
}

std::vector<float> read_vector(const Checkpoint& ck, const std::string& name, std::vector<int64_t> shape) {
  const TensorInfo& t = ck.get(name, kFloat, shape);
  std::vector<float> out(static_cast<size_t>(t.numel()));
  dequantize_ggml(ggml_of(t.dtype), t.data, t.numel(), out.data());
  return out;
}

LlamaMatrix read_matrix(const Checkpoint& ck, const std::string& name, int64_t rows, int64_t cols) {
  const TensorInfo& t = ck.get(name, kFloat, {rows, cols});
  LlamaMatrix m;
  m.full.rows = rows;
  m.full.cols = cols;
  const auto at = reinterpret_cast<uintptr_t>(t.data);
  if ((t.dtype == DType::F32 && at % 4 == 0) || (t.dtype != DType::F32 && at % 2 == 0)) {
    m.full.format = t.dtype == DType::F32    ? kernels::WeightFormat::F32
                    : t.dtype == DType::BF16 ? kernels::WeightFormat::BF16
                                             : kernels::WeightFormat::F16;
    m.full.data = t.data;
    return m;
  }
  m.owned.resize(static_cast<size_t>(t.numel()));
  dequantize_ggml(ggml_of(t.dtype), t.data, t.numel(), m.owned.data());
  m.full.format = kernels::WeightFormat::F32;
  m.full.data = m.owned.data();
  return m;
}

// Routed experts (Mixtral: block_sparse_moe.experts.e.w1/w3/w2; Qwen2-MoE:
// mlp.experts.e.gate_proj/up_proj/down_proj), the router, and Qwen2-MoE's shared expert.
void read_moe(const Checkpoint& ck, const LlamaConfig& c, const std::string& p, LlamaLayerWeights& w) {
  const int64_t D = c.dim, F = c.ffn_dim;
  const bool qwen = c.arch == LlamaArch::Qwen2Moe;
  const std::string moe = p + (qwen ? "mlp." : "block_sparse_moe.");
  w.router = read_matrix(ck, moe + "gate.weight", c.experts, D);
  for (int64_t e = 0; e < c.experts; ++e) {
    const std::string x = moe + "experts." + std::to_string(e) + ".";
    w.expert_gate.push_back(read_matrix(ck, x + (qwen ? "gate_proj" : "w1") + ".weight", F, D));
    w.expert_up.push_back(read_matrix(ck, x + (qwen ? "up_proj" : "w3") + ".weight", F, D));
    w.expert_down.push_back(read_matrix(ck, x + (qwen ? "down_proj" : "w2") + ".weight", D, F));
  }
  if (!c.has_shared_expert()) return;
  const int64_t Fs = c.shared_ffn_dim;
  w.shared_gate = read_matrix(ck, moe + "shared_expert.gate_proj.weight", Fs, D);
  w.shared_up = read_matrix(ck, moe + "shared_expert.up_proj.weight", Fs, D);
  w.shared_down = read_matrix(ck, moe + "shared_expert.down_proj.weight", D, Fs);
  w.shared_gate_inp = read_vector(ck, moe + "shared_expert_gate.weight", {1, D});
}

LlamaLayerWeights read_layer(const Checkpoint& ck, const LlamaConfig& c, int64_t l) {
  const std::string p = "model.layers." + std::to_string(l) + ".", a = p + "self_attn.";
  const int64_t D = c.dim, F = c.ffn_dim, Q = c.heads * c.head_dim, KV = c.kv_heads * c.head_dim;
  LlamaLayerWeights w;
  w.attn_norm = read_vector(ck, p + "input_layernorm.weight", {D});
  w.wq = read_matrix(ck, a + "q_proj.weight", Q, D);
  w.wk = read_matrix(ck, a + "k_proj.weight", KV, D);
  w.wv = read_matrix(ck, a + "v_proj.weight", KV, D);
  w.wo = read_matrix(ck, a + "o_proj.weight", D, Q);
  if (c.qkv_bias) {
    w.bq = read_vector(ck, a + "q_proj.bias", {Q});
    w.bk = read_vector(ck, a + "k_proj.bias", {KV});
    w.bv = read_vector(ck, a + "v_proj.bias", {KV});
  }
  if (ck.has(a + "o_proj.bias"))
    TROUPE_FAIL("tensor '" << a << "o_proj.bias' is not supported (troupe adds q/k/v biases only)");
  w.ffn_norm = read_vector(ck, p + "post_attention_layernorm.weight", {D});
  if (c.is_moe()) {
    read_moe(ck, c, p, w);
    return w;
  }
  w.gate = read_matrix(ck, p + "mlp.gate_proj.weight", F, D);
  w.up = read_matrix(ck, p + "mlp.up_proj.weight", F, D);
  w.down = read_matrix(ck, p + "mlp.down_proj.weight", D, F);
  return w;
}

}  // namespace

LlamaWeights load_llama_weights(const Checkpoint& ck, const LlamaConfig& c) {
  LlamaWeights w;
  w.token_embd = read_matrix(ck, "model.embed_tokens.weight", c.vocab_size, c.dim);
  w.output_norm = read_vector(ck, "model.norm.weight", {c.dim});
  // Tied: the embedding is the output matrix (transformers ties it over any lm_head).
  // Untied without lm_head.weight would be a model with no output layer: never guessed.
  if (!c.tie_word_embeddings) {
    if (!ck.has("lm_head.weight"))
      TROUPE_FAIL("config.json says tie_word_embeddings is false (its default), but the "
                  "checkpoint has no lm_head.weight; a model tied to its embedding says "
                  "\"tie_word_embeddings\": true");
    w.output = read_matrix(ck, "lm_head.weight", c.vocab_size, c.dim);
  }
  w.layers.reserve(static_cast<size_t>(c.layers));
  for (int64_t l = 0; l < c.layers; ++l) w.layers.push_back(read_layer(ck, c, l));
  return w;
}

}  // namespace troupe::model

// A LLaMA-family model's weights from a GGUF file (tensor names are llama.cpp's), bound
// for the kernels. F32, BF16, F16, Q8_0 and Q4_0 matrices stay in the file's mapping (the
// GEMM reads those formats; q8_0 / q4_0 on int8 dot products, kernels/ggml_blocks.h);
// MXFP4 (and an F32 / BF16 / F16 tensor the file placed off its element alignment) is
// dequantized once at load time to an owned f32 copy (exactly, model/gguf_dequant.h), so
// it costs 4 bytes per parameter in memory.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kernels/moe.h"
#include "kernels/q8_row_groups.h"
#include "kernels/weights.h"
#include "model/llama_config.h"

namespace troupe::model {

class GgufFile;

// A row-major matrix [rows, cols] (GGUF ne = [cols, rows]): F32, BF16, F16, Q8_0 or Q4_0
// in the mapping, or an owned f32 copy of an MXFP4 (or misaligned) tensor.
struct LlamaMatrix {
  std::vector<float> owned;  // empty when the view points into the mapping
  kernels::WeightView full;  // F32, BF16, F16, Q8_0 or Q4_0
  int64_t rows() const { return full.rows; }
  bool empty() const { return !kernels::has_bytes(full); }
  kernels::WeightView view() const { return full; }
  // Rows [r0, r0 + n) as their own matrix (one expert of a stacked [E * F, D] tensor).
  kernels::WeightView slice(int64_t r0, int64_t n) const;
};

struct LlamaLayerWeights {
  std::vector<float> attn_norm;  // [D]
  LlamaMatrix wq;                  // [H * hd, D]
  LlamaMatrix wk;                  // [KV * hd, D]
  LlamaMatrix wv;                  // [KV * hd, D]
  LlamaMatrix wo;                  // [D, H * hd]
  std::vector<float> bq, bk, bv;   // [H * hd], [KV * hd], [KV * hd] (qkv_bias), else empty
  std::vector<float> ffn_norm;   // [D]
  // Dense MLP: [F, D], [F, D], [D, F]. MoE: experts stacked, expert e = rows [e*F, (e+1)*F)
  // of gate/up ([E * F, D]) and rows [e*D, (e+1)*D) of down ([E * D, F]).
  LlamaMatrix gate, up, down;
  // An HF folder's experts are separate tensors: expert e is expert_gate[e] [F, D],
  // expert_up[e] [F, D], expert_down[e] [D, F] (gate, up, down then empty).
  std::vector<LlamaMatrix> expert_gate, expert_up, expert_down;
  LlamaMatrix router;              // [E, D] (MoE only)
  // qwen2moe's shared expert: [Fs, D], [Fs, D], [D, Fs], and its gate's row [D] (the
  // expert's output is scaled by sigmoid(shared_gate_inp · ffn_in)); empty otherwise.
  LlamaMatrix shared_gate, shared_up, shared_down;
  std::vector<float> shared_gate_inp;

  // Expert e's matrices (a dense MLP is expert 0): F the expert width, D the model's.
  kernels::ExpertWeights expert(int64_t e, int64_t F, int64_t D) const;
};

struct LlamaWeights {
  LlamaMatrix token_embd;          // [V, D]
  std::vector<float> output_norm;  // [D]
  LlamaMatrix output;              // [V, D]; empty when tied to token_embd
  std::vector<LlamaLayerWeights> layers;
  // Owns the row groups (WeightView::groups, kernels/q8_row_groups.h) of the Q8_0 / Q4_0
  // matrices the loader regrouped into a copy, and their bytes (the memory they add beside
  // the file's, before the mapping's rounding up to 2 MiB); null and 0 where there are
  // none (e.g. every matrix regrouped in place in the file's bytes: model/llama_weights.cpp).
  std::shared_ptr<uint8_t> row_groups;
  int64_t row_groups_bytes = 0;
  bool tied_output() const { return output.empty(); }
  kernels::WeightView output_view() const { return tied_output() ? token_embd.view() : output.view(); }
};

// Every tensor the config needs, with its exact shape (views into f's mapping: f must
// outlive the weights); the error names the tensor, the
// shape expected and the shape found. A missing output.weight means tied embeddings.
// A bias troupe does not apply (attn_output.bias, output.bias) is an error, not ignored.
LlamaWeights load_llama_weights(const GgufFile& f, const LlamaConfig& c);

class Checkpoint;
// The same from an HF folder's safetensors (transformers' tensor names; F32 and BF16 in
// place, F16 as `WeightFormat::F16`; model/hf_llama_weights.cpp). config.json's
// tie_word_embeddings (LlamaConfig) says whether lm_head.weight is read or the embedding
// is the output; untied without lm_head.weight is an error.
LlamaWeights load_llama_weights(const Checkpoint& ck, const LlamaConfig& c);

}  // namespace troupe::model

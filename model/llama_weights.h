// A LLaMA-family model's weights from a GGUF file (tensor names are llama.cpp's), bound
// for the kernels. This first slice dequantizes every tensor to an owned f32 copy at load
// time (exactly, model/gguf_dequant.h), so the forward runs the kernels' F32 GEMM on any
// stored type; q8_0/q4_0 GEMM on the stored blocks is issue 15's kernel work.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/weights.h"
#include "model/llama_config.h"

namespace troupe::model {

class GgufFile;

// A row-major f32 matrix [rows, cols] (GGUF ne = [cols, rows]).
struct F32Matrix {
  std::vector<float> values;
  int64_t rows = 0;
  int64_t cols = 0;
  kernels::WeightView view() const { return slice(0, rows); }
  // Rows [r0, r0 + n) as their own matrix (one expert of a stacked [E * F, D] tensor).
  kernels::WeightView slice(int64_t r0, int64_t n) const;
};

struct LlamaLayerWeights {
  std::vector<float> attn_norm;  // [D]
  F32Matrix wq;                  // [H * hd, D]
  F32Matrix wk;                  // [KV * hd, D]
  F32Matrix wv;                  // [KV * hd, D]
  F32Matrix wo;                  // [D, H * hd]
  std::vector<float> ffn_norm;   // [D]
  // Dense MLP: [F, D], [F, D], [D, F]. MoE: experts stacked, expert e = rows [e*F, (e+1)*F)
  // of gate/up ([E * F, D]) and rows [e*D, (e+1)*D) of down ([E * D, F]).
  F32Matrix gate, up, down;
  F32Matrix router;              // [E, D] (MoE only)
};

struct LlamaWeights {
  F32Matrix token_embd;          // [V, D]
  std::vector<float> output_norm;  // [D]
  F32Matrix output;              // [V, D]; empty when tied to token_embd
  std::vector<LlamaLayerWeights> layers;
  bool tied_output() const { return output.values.empty(); }
  kernels::WeightView output_view() const { return tied_output() ? token_embd.view() : output.view(); }
};

// Every tensor the config needs, with its exact shape; the error names the tensor, the
// shape expected and the shape found. A missing output.weight means tied embeddings.
LlamaWeights load_llama_weights(const GgufFile& f, const LlamaConfig& c);

}  // namespace troupe::model

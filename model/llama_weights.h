// A LLaMA-family model's weights from a GGUF file (tensor names are llama.cpp's), bound
// for the kernels. F32, BF16, F16, Q8_0 and Q4_0 matrices stay in the file's mapping (the
// GEMM reads those formats; q8_0 / q4_0 on int8 dot products, kernels/ggml_blocks.h);
// MXFP4 (and an F32 / BF16 / F16 tensor the file placed off its element alignment) is
// dequantized once at load time to an owned f32 copy (exactly, model/gguf_dequant.h), so
// it costs 4 bytes per parameter in memory.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

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
  bool empty() const { return full.data == nullptr; }
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
  std::vector<float> ffn_norm;   // [D]
  // Dense MLP: [F, D], [F, D], [D, F]. MoE: experts stacked, expert e = rows [e*F, (e+1)*F)
  // of gate/up ([E * F, D]) and rows [e*D, (e+1)*D) of down ([E * D, F]).
  LlamaMatrix gate, up, down;
  LlamaMatrix router;              // [E, D] (MoE only)
};

struct LlamaWeights {
  LlamaMatrix token_embd;          // [V, D]
  std::vector<float> output_norm;  // [D]
  LlamaMatrix output;              // [V, D]; empty when tied to token_embd
  std::vector<LlamaLayerWeights> layers;
  bool tied_output() const { return output.empty(); }
  kernels::WeightView output_view() const { return tied_output() ? token_embd.view() : output.view(); }
};

// Every tensor the config needs, with its exact shape (views into f's mapping: f must
// outlive the weights); the error names the tensor, the
// shape expected and the shape found. A missing output.weight means tied embeddings.
LlamaWeights load_llama_weights(const GgufFile& f, const LlamaConfig& c);

}  // namespace troupe::model

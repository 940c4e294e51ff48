// The model's weights bound from a checkpoint (MODEL.md §2) to kernel views.
// Quantized matrices stay in the mmap (WeightView points into it); vectors and
// small F32 tensors are converted to owned f32 arrays once at load time.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kernels/moe.h"
#include "kernels/weights.h"
#include "model/config.h"
#include "model/safetensors.h"

namespace troupe::model {

using Vec = std::vector<float>;

// Single-pass mHC mixing parameters of one site (attention or FFN), MODEL.md §5.2.
struct HcMixWeights {
  kernels::WeightView fn;  // [(2+hc)·hc, hc·H] F32
  Vec base;                // [(2+hc)·hc]
  Vec scale;               // [3]
};

struct IndexerWeights {
  kernels::WeightView wq_b;          // [nI·dI, Q] FP8
  kernels::WeightView weights_proj;  // [nI, H] BF16
  kernels::WeightView wk;            // [dI, D] BF16 (Full only)
  Vec k_norm;                        // [dI] (Full only)
};

struct CompressorWeights {
  kernels::WeightView wkv;    // [D, H] F32
  kernels::WeightView wgate;  // [D, H] F32 (ratio > 1 only)
  Vec norm;                   // [D]
};

struct AttentionWeights {
  kernels::WeightView wq_a;  // [Q, H] FP8
  Vec q_norm;                // [Q]
  kernels::WeightView wq_b;  // [nh·D, Q] FP8
  kernels::WeightView wkv;   // [D, H] FP8
  Vec kv_norm;               // [D]
  kernels::WeightView wo_a;  // [G·O, nh·D/G] FP8
  kernels::WeightView wo_b;  // [H, G·O] FP8
  Vec sink;                  // [nh]
  bool has_compressor = false;
  CompressorWeights compressor;
  bool has_indexer = false;
  IndexerWeights indexer;
};

struct MoeWeights {
  kernels::WeightView gate;                   // [nE, H] F32
  Vec gate_bias;                              // [nE]
  kernels::ExpertWeights shared;              // FP8, width I
  std::vector<kernels::ExpertWeights> experts;  // [nE] FP4
};

struct EngramWeights {
  kernels::WeightView embed;  // [rows, eD] ROWFP8
  kernels::WeightView wkv;    // [(hc+1)·H, eH·(N−1)·eD] FP8
  Vec q_weight;               // [hc, H]
  Vec k_weight;               // [hc, H]
  std::vector<int64_t> multipliers;  // [N] this layer's row of engram.multipliers
};

struct LayerWeights {
  Vec attn_norm, ffn_norm;  // [H]
  HcMixWeights hc_attn, hc_ffn;
  AttentionWeights attn;
  MoeWeights ffn;
  bool has_engram = false;
  EngramWeights engram;
};

struct ModelWeights {
  kernels::WeightView embed;  // [V, H] BF16
  kernels::WeightView head;   // [V, H] BF16
  Vec norm;                   // [H]
  kernels::WeightView hc_head_fn;  // [hc, hc·H] F32
  Vec hc_head_base;                // [hc]
  float hc_head_scale = 1.0f;
  std::vector<int32_t> engram_token_map;  // [V]
  std::vector<LayerWeights> layers;       // [L]

  // Owned conversions (F32 copies of unaligned tensors); views above may point here.
  std::vector<std::unique_ptr<std::vector<float>>> owned;
  // The routed experts' row groups where add_expert_row_groups made them (model/row_groups_copy.h).
  std::shared_ptr<uint8_t> expert_row_groups;
};

// One DSpark stage `mtp.{s}.` (MODEL.md §2, §8): an SWA block with the draft's MoE.
struct DsparkStageWeights {
  Vec attn_norm, ffn_norm;  // [H]
  HcMixWeights hc_attn, hc_ffn;
  AttentionWeights attn;    // SWA: no compressor, no indexer
  MoeWeights ffn;           // nEd routed experts
};

// The DSpark draft network; shares the target's embed/head (ModelWeights).
struct DsparkWeights {
  std::vector<DsparkStageWeights> stages;  // [S]
  kernels::WeightView main_proj;           // [H, n_t·H] FP8 (stage 0)
  Vec main_norm;                           // [H] (stage 0)
  Vec norm;                                // [H] (stage S-1)
  kernels::WeightView markov_embed;        // [V, Mr] BF16 (stage S-1)
  kernels::WeightView markov_head;         // [V, Mr] BF16 (stage S-1)
  Vec confidence;                          // [H + Mr] (stage S-1)
  std::vector<std::unique_ptr<std::vector<float>>> owned;
  std::shared_ptr<uint8_t> expert_row_groups;  // as ModelWeights'
};

// Binds every tensor the target forward pass needs; a missing, misshaped or
// mistyped tensor is a troupe::Error naming it. The checkpoint must outlive the weights.
ModelWeights bind_weights(const Checkpoint& ckpt, const ModelConfig& cfg);

// Binds the mtp.* tensors (config needs num_nextn_predict_layers > 0); errors as above.
DsparkWeights bind_dspark_weights(const Checkpoint& ckpt, const ModelConfig& cfg);

// Row slice [r0, r0+n) of a weight (FP8 needs r0 and n multiples of 32 unless n reaches the end).
kernels::WeightView row_slice(const kernels::WeightView& w, int64_t r0, int64_t n);

}  // namespace troupe::model

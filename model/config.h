// The model's hyperparameters: MODEL.md §1, read from an HF-style config.json.
// Checkpoint hyperparameters only; engine/runtime settings live elsewhere.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/rope.h"

namespace troupe::model {

// CSA2 layer modes (MODEL.md §1, "Derived layer modes").
enum class LayerMode : uint8_t { Swa, Full, Reindex, Reuse };
const char* to_string(LayerMode m);

struct ModelConfig {
  int64_t vocab_size = 0;             // V
  int64_t hidden_size = 0;            // H
  int64_t num_hidden_layers = 0;      // L
  int64_t n_encoder_layers = 0;       // Ne
  int64_t num_attention_heads = 0;    // nh
  int64_t num_key_value_heads = 1;
  int64_t head_dim = 0;               // D
  int64_t qk_rope_head_dim = 0;       // Dr
  int64_t q_lora_rank = 0;            // Q
  int64_t o_groups = 0;               // G
  int64_t o_lora_rank = 0;            // O
  int64_t sliding_window = 0;         // W
  std::vector<int64_t> compress_ratios;        // [L + S]
  std::vector<int64_t> kv_source_layer_ids;
  std::vector<int64_t> index_source_layer_ids;
  int64_t candidate_source_layer_id = -1;      // cs
  int64_t candidate_block_size = 0;            // Bc
  int64_t candidate_topk_blocks = 0;           // Kb
  int64_t index_n_heads = 0;                   // nI
  int64_t index_head_dim = 0;                  // dI
  int64_t index_topk = 0;                      // K
  double rope_theta = 10000.0;
  double compress_rope_theta = 160000.0;
  kernels::YarnScaling rope_scaling;           // factor 1 = none
  double rms_norm_eps = 1e-6;
  int64_t n_routed_experts = 0;                // nE
  int64_t n_shared = 1;
  int64_t top_k = 0;                           // kE
  int64_t moe_intermediate_size = 0;           // I
  std::string scoring_func = "sqrtsoftplus";
  std::string topk_method = "noaux_tc";
  bool norm_topk_prob = true;
  double routed_scaling_factor = 1.0;
  double swiglu_limit = 0.0;
  int64_t hc_mult = 0;                         // hc
  int64_t hc_sinkhorn_iters = 0;
  double hc_eps = 1e-6;
  std::vector<int64_t> engram_layer_ids;
  int64_t engram_max_ngram_size = 0;           // N
  int64_t engram_n_heads = 0;                  // eH
  int64_t engram_head_dim = 0;                 // eD
  int64_t engram_vocab_size = 0;
  std::vector<int64_t> engram_num_embeddings;
  int64_t engram_compressed_vocab_size = 0;    // cV
  int64_t engram_pad_token_id = 2;
  int64_t num_nextn_predict_layers = 0;        // S
  int64_t dspark_block_size = 0;               // Bs
  int64_t dspark_noise_token_id = 0;
  std::vector<int64_t> dspark_target_layer_ids;
  int64_t dspark_markov_rank = 0;              // Mr
  int64_t dspark_n_routed_experts = 0;         // nEd
  int64_t dspark_top_k = 0;                    // kEd
  int64_t num_speculative_tokens = 0;          // k
  int64_t replay_tokens = 0;                   // R
  int64_t bos_token_id = 0;
  int64_t eos_token_id = 1;
  int64_t pad_token_id = 2;
  int64_t max_position_embeddings = 0;

  // --- derived (filled by finalize()) ---
  std::vector<LayerMode> layer_mode;        // [L]
  std::vector<int64_t> kv_source;           // [L] KV source layer of a ratio>0 layer, else -1
  std::vector<int64_t> topk_source;         // [L] top-k source of a Reuse layer, else -1

  int64_t ratio(int64_t layer) const { return compress_ratios[layer]; }
  bool is_engram_layer(int64_t layer) const;
  int64_t engram_index(int64_t layer) const;  // position in engram_layer_ids, -1 if none

  // Derives layer modes and sources and checks every rule of MODEL.md §1; throws
  // troupe::Error naming the key that breaks a rule.
  void finalize();
};

// Parses config.json text (MODEL.md §1 keys; aliases accepted); validates.
ModelConfig parse_config(const std::string& json_text, const std::string& origin = "config.json");
ModelConfig load_config(const std::string& path);
std::string config_to_json(const ModelConfig& c);  // the literal key set of §1
// Built-in presets: "v41-flash" (full size), "v41-small" (a few billion parameters,
// memory-bound decode; config_presets.cpp) and "v41-tiny".
ModelConfig preset_config(const std::string& name);

}  // namespace troupe::model

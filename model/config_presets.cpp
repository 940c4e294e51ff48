// Built-in model configs (MODEL.md §1): "v41-tiny" is the spec's literal tiny
// config.json; "v41-flash" is the table's full-size column. Both go through the same
// parser and rules as a config.json on disk, so a preset can never bypass validation.
#include <nlohmann/json.hpp>

#include "kernels/check.h"
#include "model/config.h"

namespace troupe::model {

namespace {

constexpr const char* kTinyJson = R"({
 "vocab_size": 4096, "hidden_size": 256, "num_hidden_layers": 12, "n_encoder_layers": 6,
 "num_attention_heads": 4, "num_key_value_heads": 1, "head_dim": 128, "qk_rope_head_dim": 32,
 "q_lora_rank": 128, "o_groups": 2, "o_lora_rank": 64, "sliding_window": 16,
 "compress_ratios": [0, 2, 2, 2, 2, 2, 1, 1, 1, 1, 1, 1, 0, 0, 0],
 "kv_source_layer_ids": [1, 3, 6], "index_source_layer_ids": [1, 3, 6, 8, 10],
 "candidate_source_layer_id": 6, "candidate_block_size": 4, "candidate_topk_blocks": 8,
 "index_n_heads": 4, "index_head_dim": 64, "index_topk": 16,
 "rope_theta": 10000.0, "compress_rope_theta": 160000.0,
 "rope_scaling": {"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 256,
                  "beta_fast": 32.0, "beta_slow": 1.0},
 "rms_norm_eps": 1e-06, "n_routed_experts": 32, "n_shared": 1, "top_k": 6,
 "moe_intermediate_size": 128, "scoring_func": "sqrtsoftplus", "topk_method": "noaux_tc",
 "norm_topk_prob": true, "routed_scaling_factor": 1.5, "swiglu_limit": 10.0,
 "hc_mult": 4, "hc_sinkhorn_iters": 20, "hc_eps": 1e-06,
 "engram_layer_ids": [1, 4], "engram_max_ngram_size": 3, "engram_n_heads": 2,
 "engram_head_dim": 32, "engram_vocab_size": 4999, "engram_num_embeddings": [20022, 20134],
 "engram_compressed_vocab_size": 4096, "engram_pad_token_id": 2,
 "num_nextn_predict_layers": 3, "dspark_block_size": 5, "dspark_noise_token_id": 4095,
 "dspark_target_layer_ids": [9, 10, 11], "dspark_markov_rank": 32,
 "dspark_n_routed_experts": 8, "dspark_top_k": 3, "num_speculative_tokens": 3,
 "replay_tokens": 16, "bos_token_id": 0, "eos_token_id": 1, "pad_token_id": 2,
 "max_position_embeddings": 4096})";

// "v41-small" (the tiny config with these keys replaced): the tiny config's layers, windows, indexer, Engram and vocabulary with
// production-like widths: hidden 2048, 16 heads, 64 routed experts of 1024 (FP4, top 6).
// About 4.9 B parameters, 2.7 GB on disk; a decode step reads ~0.3 GB, most of it the
// picked experts', so it is bound by memory bandwidth on a CPU, where the tiny model's
// 30 MB sit in cache. For forward and kernel benchmarks at a realistic byte count
// (`troupe make-tiny-model DIR --preset v41-small`); its random weights say nothing of text.
constexpr const char* kSmallOverrides = R"({
 "hidden_size": 2048, "num_attention_heads": 16, "q_lora_rank": 768, "o_groups": 4,
 "o_lora_rank": 512, "n_routed_experts": 64, "moe_intermediate_size": 1024,
 "dspark_n_routed_experts": 16})";

// compress_ratios = [0,0] + [2]*18 + [1]*20 + [0]*3 (40 layers, then 3 DSpark stages).
constexpr const char* kFlashJson = R"({
 "vocab_size": 129280, "hidden_size": 5120, "num_hidden_layers": 40, "n_encoder_layers": 20,
 "num_attention_heads": 64, "num_key_value_heads": 1, "head_dim": 512, "qk_rope_head_dim": 64,
 "q_lora_rank": 1280, "o_groups": 8, "o_lora_rank": 1024, "sliding_window": 128,
 "compress_ratios": [0, 0,
                     2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2,
                     1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
                     0, 0, 0],
 "kv_source_layer_ids": [2, 8, 14, 20],
 "index_source_layer_ids": [2, 8, 14, 20, 24, 28, 32, 36],
 "candidate_source_layer_id": 20, "candidate_block_size": 8, "candidate_topk_blocks": 2048,
 "index_n_heads": 32, "index_head_dim": 128, "index_topk": 512,
 "rope_theta": 10000.0, "compress_rope_theta": 160000.0,
 "rope_scaling": {"type": "yarn", "factor": 16.0, "original_max_position_embeddings": 65536,
                  "beta_fast": 32.0, "beta_slow": 1.0},
 "rms_norm_eps": 1e-20, "n_routed_experts": 384, "n_shared": 1, "top_k": 6,
 "moe_intermediate_size": 2304, "scoring_func": "sqrtsoftplus", "topk_method": "noaux_tc",
 "norm_topk_prob": true, "routed_scaling_factor": 1.5, "swiglu_limit": 10.0,
 "hc_mult": 4, "hc_sinkhorn_iters": 20, "hc_eps": 1e-06,
 "engram_layer_ids": [1, 14], "engram_max_ngram_size": 4, "engram_n_heads": 8,
 "engram_head_dim": 256, "engram_vocab_size": 16000000,
 "engram_num_embeddings": [384006168, 384016682], "engram_compressed_vocab_size": 99092,
 "engram_pad_token_id": 2,
 "num_nextn_predict_layers": 3, "dspark_block_size": 5, "dspark_noise_token_id": 128799,
 "dspark_target_layer_ids": [37, 38, 39], "dspark_markov_rank": 256,
 "dspark_n_routed_experts": 128, "dspark_top_k": 3, "num_speculative_tokens": 3,
 "replay_tokens": 128, "bos_token_id": 0, "eos_token_id": 1, "pad_token_id": 2,
 "max_position_embeddings": 1048576})";

}  // namespace

ModelConfig preset_config(const std::string& name) {
  if (name == "v41-tiny") return parse_config(kTinyJson, "preset v41-tiny");
  if (name == "v41-small") {
    nlohmann::json small = nlohmann::json::parse(kTinyJson);
    small.merge_patch(nlohmann::json::parse(kSmallOverrides));
    return parse_config(small.dump(), "preset v41-small");
  }
  if (name == "v41-flash") return parse_config(kFlashJson, "preset v41-flash");
  TROUPE_FAIL("unknown model preset '" << name << "' (known: v41-flash, v41-small, v41-tiny)");
}

}  // namespace troupe::model

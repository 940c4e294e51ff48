// ModelConfig::finalize(): derives the CSA2 layer modes and sources of MODEL.md §1
// ("Derived layer modes") and checks every rule the spec states between keys, plus
// the "only supported value" keys. Each failure names the key a user has to change.
#include <algorithm>
#include <set>
#include <utility>

#include "kernels/check.h"
#include "model/config.h"

// Fails with "key 'KEY': <message>"; the config reader prefixes the file name.
#define CONFIG_RULE(cond, key, ...)                                   \
  do {                                                                \
    if (!(cond)) TROUPE_FAIL("key '" << key << "': " << __VA_ARGS__); \
  } while (0)

namespace troupe::model {

namespace {

using Named = std::pair<const char*, int64_t>;

bool contains(const std::vector<int64_t>& v, int64_t x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

// Layer-id lists: every id a target layer, no repeats.
void check_layer_ids(const char* key, const std::vector<int64_t>& ids, int64_t L) {
  std::set<int64_t> seen;
  for (int64_t id : ids) {
    CONFIG_RULE(id >= 0 && id < L, key, "layer " << id << " is outside [0, " << L << ")");
    CONFIG_RULE(seen.insert(id).second, key, "layer " << id << " is listed twice");
  }
}

void check_sizes(const ModelConfig& c) {
  for (auto [key, v] : {Named{"vocab_size", c.vocab_size},
                        {"hidden_size", c.hidden_size},
                        {"num_hidden_layers", c.num_hidden_layers},
                        {"num_attention_heads", c.num_attention_heads},
                        {"head_dim", c.head_dim},
                        {"qk_rope_head_dim", c.qk_rope_head_dim},
                        {"q_lora_rank", c.q_lora_rank},
                        {"o_groups", c.o_groups},
                        {"o_lora_rank", c.o_lora_rank},
                        {"sliding_window", c.sliding_window},
                        {"candidate_block_size", c.candidate_block_size},
                        {"candidate_topk_blocks", c.candidate_topk_blocks},
                        {"index_n_heads", c.index_n_heads},
                        {"index_head_dim", c.index_head_dim},
                        {"index_topk", c.index_topk},
                        {"n_routed_experts", c.n_routed_experts},
                        {"top_k", c.top_k},
                        {"moe_intermediate_size", c.moe_intermediate_size},
                        {"hc_mult", c.hc_mult},
                        {"hc_sinkhorn_iters", c.hc_sinkhorn_iters},
                        {"max_position_embeddings", c.max_position_embeddings}})
    CONFIG_RULE(v > 0, key, "must be > 0, got " << v);
  for (auto [key, v] : {Named{"n_encoder_layers", c.n_encoder_layers},
                        {"num_nextn_predict_layers", c.num_nextn_predict_layers},
                        {"num_speculative_tokens", c.num_speculative_tokens},
                        {"replay_tokens", c.replay_tokens}})
    CONFIG_RULE(v >= 0, key, "must be >= 0, got " << v);
  // Activation quantizer blocks (D, dI) and FP4/ROWFP8 scale blocks (H, I, eD) are 32 wide.
  for (auto [key, v] : {Named{"head_dim", c.head_dim},
                        {"index_head_dim", c.index_head_dim},
                        {"hidden_size", c.hidden_size},
                        {"moe_intermediate_size", c.moe_intermediate_size},
                        {"engram_head_dim", c.engram_head_dim}})
    CONFIG_RULE(v % 32 == 0, key, "must be a multiple of 32, got " << v);
  CONFIG_RULE(c.qk_rope_head_dim % 2 == 0 && c.qk_rope_head_dim <= c.head_dim &&
                  c.qk_rope_head_dim <= c.index_head_dim,
              "qk_rope_head_dim",
              "must be even and at most head_dim and index_head_dim, got " << c.qk_rope_head_dim);
  CONFIG_RULE(c.num_attention_heads % c.o_groups == 0, "o_groups",
              c.o_groups << " does not divide num_attention_heads " << c.num_attention_heads);
  CONFIG_RULE(c.top_k <= c.n_routed_experts, "top_k",
              c.top_k << " exceeds n_routed_experts " << c.n_routed_experts);
  CONFIG_RULE(c.n_encoder_layers <= c.num_hidden_layers, "n_encoder_layers",
              c.n_encoder_layers << " exceeds num_hidden_layers " << c.num_hidden_layers);
  for (auto [key, v] : {Named{"bos_token_id", c.bos_token_id},
                        {"eos_token_id", c.eos_token_id},
                        {"pad_token_id", c.pad_token_id}})
    CONFIG_RULE(v >= 0 && v < c.vocab_size, key, v << " is not a token id < vocab_size");
}

void check_numbers(const ModelConfig& c) {
  CONFIG_RULE(c.rope_theta > 0, "rope_theta", "must be > 0");
  CONFIG_RULE(c.compress_rope_theta > 0, "compress_rope_theta", "must be > 0");
  CONFIG_RULE(c.rms_norm_eps > 0, "rms_norm_eps", "must be > 0");
  CONFIG_RULE(c.hc_eps >= 0, "hc_eps", "must be >= 0");
  CONFIG_RULE(c.routed_scaling_factor > 0, "routed_scaling_factor", "must be > 0");
  CONFIG_RULE(c.swiglu_limit > 0, "swiglu_limit", "must be > 0");
  const auto& y = c.rope_scaling;
  CONFIG_RULE(y.factor >= 1, "rope_scaling", "factor must be >= 1, got " << y.factor);
  if (y.factor != 1)
    CONFIG_RULE(y.original_max_position > 0 && y.beta_fast > 0 && y.beta_slow > 0, "rope_scaling",
                "original_max_position_embeddings, beta_fast and beta_slow must be > 0");
}

// Values the spec fixes: other values would be a different model.
void check_supported(const ModelConfig& c) {
  CONFIG_RULE(c.num_key_value_heads == 1, "num_key_value_heads",
              "only 1 is supported (shared latent K=V), got " << c.num_key_value_heads);
  CONFIG_RULE(c.n_shared == 1, "n_shared", "only 1 shared expert is supported, got " << c.n_shared);
  CONFIG_RULE(c.scoring_func == "sqrtsoftplus", "scoring_func",
              "only \"sqrtsoftplus\" is supported, got \"" << c.scoring_func << "\"");
  CONFIG_RULE(c.topk_method == "noaux_tc", "topk_method",
              "only \"noaux_tc\" is supported, got \"" << c.topk_method << "\"");
}

void check_ratios(const ModelConfig& c) {
  const int64_t L = c.num_hidden_layers, S = c.num_nextn_predict_layers;
  CONFIG_RULE(int64_t(c.compress_ratios.size()) == L + S, "compress_ratios",
              "has " << c.compress_ratios.size() << " entries, expected num_hidden_layers + "
                     << "num_nextn_predict_layers = " << L + S);
  for (size_t i = 0; i < c.compress_ratios.size(); ++i)
    CONFIG_RULE(c.compress_ratios[i] >= 0, "compress_ratios", "entry " << i << " is negative");
  for (int64_t s = 0; s < S; ++s)
    CONFIG_RULE(c.compress_ratios[L + s] == 0, "compress_ratios",
                "entry " << L + s << " (DSpark stage " << s << ") must be 0");
  check_layer_ids("kv_source_layer_ids", c.kv_source_layer_ids, L);
  check_layer_ids("index_source_layer_ids", c.index_source_layer_ids, L);
  for (int64_t id : c.kv_source_layer_ids)
    CONFIG_RULE(c.ratio(id) > 0, "kv_source_layer_ids", "layer " << id << " has ratio 0");
  for (int64_t id : c.index_source_layer_ids)
    CONFIG_RULE(c.ratio(id) > 0, "index_source_layer_ids", "layer " << id << " has ratio 0");
}

// Modes, then KV sources (nearest Full j <= l with the same ratio), then top-k sources
// of Reuse layers (nearest index source j < l, same ratio and same KV source).
void derive_modes(ModelConfig& c) {
  const int64_t L = c.num_hidden_layers;
  c.layer_mode.assign(L, LayerMode::Swa);
  c.kv_source.assign(L, -1);
  c.topk_source.assign(L, -1);
  for (int64_t l = 0; l < L; ++l) {
    if (c.ratio(l) == 0) continue;
    c.layer_mode[l] = contains(c.kv_source_layer_ids, l)      ? LayerMode::Full
                      : contains(c.index_source_layer_ids, l) ? LayerMode::Reindex
                                                              : LayerMode::Reuse;
    for (int64_t j = l; j >= 0 && c.kv_source[l] < 0; --j)
      if (c.layer_mode[j] == LayerMode::Full && c.ratio(j) == c.ratio(l)) c.kv_source[l] = j;
    CONFIG_RULE(c.kv_source[l] >= 0, "kv_source_layer_ids",
                "layer " << l << " (ratio " << c.ratio(l) << ", " << to_string(c.layer_mode[l])
                         << ") has no KV source: no Full layer j <= " << l << " with ratio "
                         << c.ratio(l));
  }
  for (int64_t l = 0; l < L; ++l) {
    if (c.layer_mode[l] != LayerMode::Reuse) continue;
    int64_t j = l - 1;
    while (j >= 0 && !contains(c.index_source_layer_ids, j)) --j;
    CONFIG_RULE(j >= 0, "index_source_layer_ids",
                "Reuse layer " << l << " has no top-k source (no index-source layer before it)");
    CONFIG_RULE(c.ratio(j) == c.ratio(l) && c.kv_source[j] == c.kv_source[l],
                "index_source_layer_ids",
                "Reuse layer " << l << " (ratio " << c.ratio(l) << ", KV source " << c.kv_source[l]
                               << ") would reuse the top-k of layer " << j << " (ratio "
                               << c.ratio(j) << ", KV source " << c.kv_source[j] << ")");
    c.topk_source[l] = j;
  }
}

void check_candidates(const ModelConfig& c) {
  const int64_t cs = c.candidate_source_layer_id, L = c.num_hidden_layers;
  if (cs == -1) return;
  CONFIG_RULE(cs >= 0 && cs < L && c.layer_mode[cs] == LayerMode::Full, "candidate_source_layer_id",
              "must be -1 or a Full layer, got " << cs);
  for (int64_t l = cs + 1; l < L; ++l) {
    const LayerMode m = c.layer_mode[l];
    if (m != LayerMode::Full && m != LayerMode::Reindex) continue;
    CONFIG_RULE(m == LayerMode::Reindex && c.kv_source[l] == cs, "candidate_source_layer_id",
                "layer " << l << " after the candidate source " << cs << " is " << to_string(m)
                         << " with KV source " << c.kv_source[l]
                         << "; it must be Reindex with KV source " << cs);
  }
}

// Bounded replay (§6) rebuilds the decoder's global KV from layer Ne alone.
void check_replay(const ModelConfig& c) {
  if (c.replay_tokens == 0) return;
  const int64_t ne = c.n_encoder_layers, L = c.num_hidden_layers;
  CONFIG_RULE(ne < L && c.layer_mode[ne] == LayerMode::Full && c.ratio(ne) == 1, "n_encoder_layers",
              "with replay_tokens > 0, layer " << ne
                                               << " (the first decoder layer) must be Full with "
                                               << "ratio 1");
  for (int64_t l = ne + 1; l < L; ++l)
    CONFIG_RULE(c.layer_mode[l] != LayerMode::Full, "kv_source_layer_ids",
                "with replay_tokens > 0, no Full layer may follow layer n_encoder_layers = "
                    << ne << ", but layer " << l << " is Full");
}

void check_engram(const ModelConfig& c) {
  check_layer_ids("engram_layer_ids", c.engram_layer_ids, c.num_hidden_layers);
  CONFIG_RULE(c.engram_num_embeddings.size() == c.engram_layer_ids.size(), "engram_num_embeddings",
              "has " << c.engram_num_embeddings.size() << " entries, engram_layer_ids has "
                     << c.engram_layer_ids.size());
  if (c.engram_layer_ids.empty()) return;
  for (auto [key, v] : {Named{"engram_n_heads", c.engram_n_heads},
                        {"engram_head_dim", c.engram_head_dim},
                        {"engram_compressed_vocab_size", c.engram_compressed_vocab_size}})
    CONFIG_RULE(v > 0, key, "must be > 0 when engram layers exist, got " << v);
  CONFIG_RULE(c.engram_max_ngram_size >= 2, "engram_max_ngram_size",
              "must be >= 2 (2-grams and up), got " << c.engram_max_ngram_size);
  CONFIG_RULE(c.engram_vocab_size >= 2, "engram_vocab_size",
              "must be >= 2, got " << c.engram_vocab_size);
  for (int64_t n : c.engram_num_embeddings)
    CONFIG_RULE(n > 0, "engram_num_embeddings", "entry " << n << " must be > 0");
  CONFIG_RULE(c.engram_pad_token_id >= 0 && c.engram_pad_token_id < c.vocab_size,
              "engram_pad_token_id", c.engram_pad_token_id << " is not a token id < vocab_size");
}

void check_dspark(const ModelConfig& c) {
  if (c.num_nextn_predict_layers == 0) return;
  for (auto [key, v] : {Named{"dspark_block_size", c.dspark_block_size},
                        {"dspark_markov_rank", c.dspark_markov_rank},
                        {"dspark_n_routed_experts", c.dspark_n_routed_experts},
                        {"dspark_top_k", c.dspark_top_k}})
    CONFIG_RULE(v > 0, key, "must be > 0 when num_nextn_predict_layers > 0, got " << v);
  CONFIG_RULE(c.dspark_top_k <= c.dspark_n_routed_experts, "dspark_top_k",
              c.dspark_top_k << " exceeds dspark_n_routed_experts " << c.dspark_n_routed_experts);
  CONFIG_RULE(
      c.num_speculative_tokens <= c.dspark_block_size - 1, "num_speculative_tokens",
      c.num_speculative_tokens << " exceeds dspark_block_size - 1 = " << c.dspark_block_size - 1);
  CONFIG_RULE(c.dspark_noise_token_id >= 0 && c.dspark_noise_token_id < c.vocab_size,
              "dspark_noise_token_id",
              c.dspark_noise_token_id << " is not a token id < vocab_size");
  CONFIG_RULE(!c.dspark_target_layer_ids.empty(), "dspark_target_layer_ids", "must not be empty");
  check_layer_ids("dspark_target_layer_ids", c.dspark_target_layer_ids, c.num_hidden_layers);
}

}  // namespace

void ModelConfig::finalize() {
  check_sizes(*this);
  check_numbers(*this);
  check_supported(*this);
  check_ratios(*this);
  derive_modes(*this);
  check_candidates(*this);
  check_replay(*this);
  check_engram(*this);
  check_dspark(*this);
}

}  // namespace troupe::model

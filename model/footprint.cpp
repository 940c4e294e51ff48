#include "model/footprint.h"

#include <string>

namespace troupe::model {

namespace {

// "layers.20.attn.wkv.weight" -> "attn.wkv.weight"
std::string local_name(const std::string& name) {
  const auto first = name.find('.');
  const auto second = first == std::string::npos ? first : name.find('.', first + 1);
  return second == std::string::npos ? name : name.substr(second + 1);
}

// Under bounded replay, layer Ne runs its window row, compressor and index key for every
// prompt token (§6 step 2); its queries, indexer, attention and MoE only for the tail.
bool runs_for_every_token_at_ne(const std::string& local) {
  for (const char* p : {"attn_norm.", "attn.wkv.", "attn.kv_norm.", "attn.compressor.",
                        "attn.indexer.wk.", "attn.indexer.k_norm.", "engram."})
    if (local.rfind(p, 0) == 0) return true;
  return false;
}

// Weights one token touches in a tensor: routed experts only for the top_k picked,
// Engram tables only for the looked-up rows (counted per layer by the caller).
int64_t activated(const TensorSpec& t, int64_t top_k) {
  if (t.engram_table) return 0;
  if (t.expert >= 0 && t.expert >= top_k) return 0;
  return t.params();
}

int64_t engram_lookup_params(const ModelConfig& c) {
  return c.engram_n_heads * (c.engram_max_ngram_size - 1) * c.engram_head_dim;
}

int64_t prefill_params(const ModelConfig& c, const TensorSpec& t) {
  const int64_t ne = c.n_encoder_layers;
  const bool full_compute = c.replay_tokens == 0;
  if (t.layer < 0) return t.name == "embed.weight" ? t.params() : 0;
  const bool whole_layer = full_compute || t.layer < ne;
  if (!whole_layer && (t.layer > ne || !runs_for_every_token_at_ne(local_name(t.name)))) return 0;
  const int64_t lookups =
      t.engram_table && t.format != TensorFormat::Scale ? engram_lookup_params(c) : 0;
  return activated(t, c.top_k) + lookups;
}

}  // namespace

ParamSummary summarize_params(const ModelConfig& c, const std::vector<TensorSpec>& specs) {
  ParamSummary s;
  for (const TensorSpec& t : specs) {
    s.total.add(t);
    s.bytes_by_dtype[t.dtypes.front()] += t.bytes();
    const bool draft = t.stage >= 0;
    if (draft) s.draft.add(t);
    if (t.expert >= 0) {
      (draft ? s.draft_experts : s.target_experts).add(t);
    } else if (t.engram_table) {
      s.engram_tables.add(t);
    } else {
      s.dense.add(t);
    }
    if (draft) {
      s.activated_draft += activated(t, c.dspark_top_k);
      continue;
    }
    const bool table_rows = t.engram_table && t.format != TensorFormat::Scale;
    s.activated_decode += activated(t, c.top_k) + (table_rows ? engram_lookup_params(c) : 0);
    s.activated_prefill += prefill_params(c, t);
  }
  return s;
}

double global_kv_bytes_per_token(const ModelConfig& c) {
  const double D = double(c.head_dim), dI = double(c.index_head_dim);
  const double row = D / 2 + D / 16 + dI / 2 + dI / 32;  // NVFP4 KV row + MXFP4 index-key row
  double total = 0;
  for (int64_t l = 0; l < c.num_hidden_layers; ++l)
    if (c.layer_mode[l] == LayerMode::Full) total += row / double(c.ratio(l));
  return total;
}

RequestState request_state_bytes(const ModelConfig& c) {
  const int64_t D = c.head_dim, W = c.sliding_window;
  RequestState r;
  r.swa_bytes = c.num_hidden_layers * W * (D + D / 32);
  if (c.num_nextn_predict_layers > 0)
    r.dspark_bytes = W * c.hidden_size * 4 + c.num_nextn_predict_layers * W * D * 4;
  for (int64_t l = 0; l < c.num_hidden_layers; ++l)
    if (c.layer_mode[l] == LayerMode::Full && c.ratio(l) > 1)
      r.compressor_bytes += (c.ratio(l) - 1) * 2 * D * 4;
  return r;
}

RankMemory rank_memory(const ModelConfig& c, const ParamSummary& s, int64_t ranks) {
  RankMemory m;
  m.ranks = ranks;
  m.target_experts_per_rank = (c.n_routed_experts + ranks - 1) / ranks;
  m.draft_experts_per_rank = (c.dspark_n_routed_experts + ranks - 1) / ranks;
  m.dense_bytes = s.dense.bytes;
  // Experts are uniform in size within the target and within the draft.
  if (c.n_routed_experts > 0)
    m.expert_bytes += s.target_experts.bytes / c.n_routed_experts * m.target_experts_per_rank;
  if (c.dspark_n_routed_experts > 0 && c.num_nextn_predict_layers > 0)
    m.expert_bytes += s.draft_experts.bytes / c.dspark_n_routed_experts * m.draft_experts_per_rank;
  m.engram_sharded_bytes = (s.engram_tables.bytes + ranks - 1) / ranks;
  return m;
}

}  // namespace troupe::model

#include "bench/forward/forward_cost.h"

#include <algorithm>
#include <cmath>

#include "model/tensor_spec.h"

namespace troupe::bench {
namespace {

using model::LayerMode;

// SequenceState keeps window rows, compressed rows and index keys dequantized to f32.
constexpr double kStateBytesPerValue = 4;

bool has_indexer(const model::ModelConfig& c, int64_t l) {
  return c.layer_mode[l] == LayerMode::Full || c.layer_mode[l] == LayerMode::Reindex;
}

// Level-2 Reindex layers (after the candidate source) score only candidate rows.
int64_t rows_scored(const model::ModelConfig& c, int64_t l, int64_t visible) {
  const int64_t cs = c.candidate_source_layer_id;
  if (cs >= 0 && l > cs) return std::min(visible, c.candidate_topk_blocks * c.candidate_block_size);
  return visible;
}

// Attention and indexer FLOPs of one token at position p, summed over the layers.
double token_attention_flops(const model::ModelConfig& c, int64_t p) {
  const int64_t W = c.sliding_window, K = c.index_topk;
  double flops = 0;
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    const int64_t r = c.ratio(l);
    const int64_t visible = r > 0 ? (p + 1) / r : 0;
    const int64_t keys = std::min(W, p + 1) + std::min(K, visible);
    flops += 2.0 * 2.0 * double(c.num_attention_heads * c.head_dim * keys);
    if (has_indexer(c, l))
      flops += 2.0 * double(c.index_n_heads * c.index_head_dim * rows_scored(c, l, visible));
  }
  return flops;
}

// Distinct state values one sequence reads in a step ending at length `end`.
double sequence_kv_values(const model::ModelConfig& c, int64_t end, int64_t tokens) {
  const int64_t W = c.sliding_window, D = c.head_dim, dI = c.index_head_dim;
  double values = 0;
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    const int64_t r = c.ratio(l);
    const int64_t visible = r > 0 ? end / r : 0;
    values += double(std::min(W, end) * D);
    values += double(std::min(visible, tokens * c.index_topk) * D);
    if (has_indexer(c, l)) {
      const int64_t cs = c.candidate_source_layer_id;
      const bool level2 = cs >= 0 && l > cs;
      const int64_t per_token = level2 ? c.candidate_topk_blocks * c.candidate_block_size : visible;
      values += double(std::min(visible, tokens * per_token) * dI);
    }
  }
  return values;
}

double engram_lookup_bytes(const ForwardCostModel& m, double tokens) {
  const model::ModelConfig& c = m.cfg;
  const double rows_per_token = double(c.engram_n_heads * (c.engram_max_ngram_size - 1));
  double bytes = 0;
  for (int64_t rows : c.engram_num_embeddings)
    bytes += std::min(double(rows), tokens * rows_per_token) * m.engram_row_bytes;
  return bytes;
}

}  // namespace

double expected_distinct_experts(int64_t n_experts, int64_t top_k, double tokens) {
  if (n_experts <= 0) return 0;
  const double miss = 1.0 - double(top_k) / double(n_experts);
  return double(n_experts) * (1.0 - std::pow(miss, tokens));
}

ForwardCostModel make_forward_cost_model(const model::ModelConfig& c) {
  ForwardCostModel m;
  m.cfg = c;
  double expert_total = 0;
  for (const model::TensorSpec& t : model::checkpoint_tensor_specs(c)) {
    if (t.stage >= 0) continue;  // DSpark draft stages: not run by the target forward
    const double bytes = double(t.bytes()), params = double(t.params());
    if (t.engram_table) {
      m.engram_row_bytes += bytes / double(t.shape[0]);  // data and scale rows
      continue;
    }
    if (t.expert >= 0) {
      expert_total += bytes;
      if (t.expert < c.top_k) m.matmul_params += params;  // experts are uniform in size
      continue;
    }
    if (t.name == "embed.weight") {
      m.embed_row_bytes = bytes / double(t.shape[0]);
      continue;
    }
    m.dense_bytes += bytes;
    if (t.name == "head.weight")
      m.head_params = params;
    else
      m.matmul_params += params;
  }
  // Every layer has the same routed experts, n_routed_experts of them.
  const double experts = double(c.num_hidden_layers * c.n_routed_experts);
  m.expert_bytes = experts > 0 ? expert_total / experts : 0;
  // Engram layers share one row format; the loop summed it over the layers.
  if (!c.engram_num_embeddings.empty())
    m.engram_row_bytes /= double(c.engram_num_embeddings.size());
  return m;
}

StepCost forward_step_cost(const ForwardCostModel& m, const StepShape& s) {
  const model::ModelConfig& c = m.cfg;
  const double T = double(s.batch * s.tokens);
  StepCost cost;
  const double experts = expected_distinct_experts(c.n_routed_experts, c.top_k, T);
  cost.weight_bytes = m.dense_bytes + std::min(double(c.vocab_size), T) * m.embed_row_bytes +
                      double(c.num_hidden_layers) * experts * m.expert_bytes +
                      engram_lookup_bytes(m, T);
  cost.kv_bytes =
      double(s.batch) * kStateBytesPerValue * sequence_kv_values(c, s.start + s.tokens, s.tokens);
  cost.matmul_flops = 2.0 * m.matmul_params * T + 2.0 * m.head_params * double(s.batch);
  double attention = 0;
  for (int64_t p = s.start; p < s.start + s.tokens; ++p) attention += token_attention_flops(c, p);
  cost.attention_flops = double(s.batch) * attention;
  return cost;
}

}  // namespace troupe::bench

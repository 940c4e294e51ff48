// The forward-step cost model of `troupe bench forward` (bench/forward/forward_cost.h)
// against hand-worked figures for the tiny config (MODEL.md §1, §10) and against the
// independent parameter and byte counts of model/footprint.h.
#include "bench/forward/forward_cost.h"

#include <gtest/gtest.h>

#include <cmath>

#include "model/footprint.h"
#include "model/tensor_spec.h"

namespace troupe::bench {
namespace {

const ForwardCostModel& tiny() {
  static const ForwardCostModel m = make_forward_cost_model(model::preset_config("v41-tiny"));
  return m;
}

TEST(ForwardCost, DistinctExperts) {
  EXPECT_DOUBLE_EQ(expected_distinct_experts(32, 6, 0), 0.0);
  EXPECT_DOUBLE_EQ(expected_distinct_experts(32, 6, 1), 6.0);
  EXPECT_DOUBLE_EQ(expected_distinct_experts(32, 6, 2), 32 * (1 - (26.0 / 32) * (26.0 / 32)));
  EXPECT_NEAR(expected_distinct_experts(32, 6, 1000), 32.0, 1e-9);
  EXPECT_DOUBLE_EQ(expected_distinct_experts(384, 6, 1), 6.0);
  EXPECT_DOUBLE_EQ(expected_distinct_experts(0, 0, 5), 0.0);
}

TEST(ForwardCost, TinyRowSizes) {
  // Routed expert: w1, w3 [I=128, H=256] and w2 [256, 128] FP4 (c/2 bytes per row) with
  // UE8M0 scales [r, c/32].
  EXPECT_EQ(tiny().expert_bytes, 3 * (128 * 256 / 2 + 128 * 256 / 32));
  EXPECT_EQ(tiny().embed_row_bytes, 256 * 2);   // BF16 row of H
  EXPECT_EQ(tiny().engram_row_bytes, 32 + 1);   // ROWFP8 eD + eD/32 scale
  EXPECT_EQ(tiny().head_params, 4096.0 * 256);  // V·H
}

// Every target weight byte sits in exactly one group of the model; matmul + head +
// embedding + Engram lookups is footprint's activated count.
TEST(ForwardCost, AgreesWithFootprint) {
  for (const char* preset : {"v41-tiny", "v41-flash"}) {
    const model::ModelConfig c = model::preset_config(preset);
    const ForwardCostModel m = make_forward_cost_model(c);
    const model::ParamSummary s = model::summarize_params(c, model::checkpoint_tensor_specs(c));
    double engram_rows = 0;
    for (int64_t rows : c.engram_num_embeddings) engram_rows += double(rows);
    const double target_bytes = m.dense_bytes + m.embed_row_bytes * double(c.vocab_size) +
                                m.expert_bytes * double(c.num_hidden_layers * c.n_routed_experts) +
                                m.engram_row_bytes * engram_rows;
    EXPECT_NEAR(target_bytes, double(s.total.bytes - s.draft.bytes), 0.5) << preset;
    const double lookups = double(c.engram_layer_ids.size() * c.engram_n_heads *
                                  (c.engram_max_ngram_size - 1) * c.engram_head_dim);
    const double embed = double(c.vocab_size * c.hidden_size);
    EXPECT_EQ(m.matmul_params + m.head_params + embed + lookups, double(s.activated_decode))
        << preset;
  }
}

// Tiny layers: 0 SWA; 1-5 ratio 2 (Full 1,3); 6-11 ratio 1 (Full 6 = cs, Reindex 8,10
// score at most Kb·Bc = 32 candidates); W = 16, K = 16, nh·D = 4·128, nI·dI = 4·64.
TEST(ForwardCost, AttentionFlopsHandWorked) {
  // p = 0: one window key everywhere, plus the token's own row at ratio-1 layers;
  // indexer scores 1 row at layers 6, 8, 10 (ratio-2 layers see no complete group).
  const double first = 4.0 * 512 * (6 * 1 + 6 * 2) + 2.0 * 256 * 3;
  EXPECT_EQ(forward_step_cost(tiny(), {1, 0, 1}).attention_flops, first);
  // p = 99: 16 window keys; 16 selected at layers 1-11 (50 resp. 100 visible);
  // indexer rows 50, 50 (layers 1, 3), 100 (layer 6), 32, 32 (layers 8, 10).
  const double later = 4.0 * 512 * (16 + 11 * 32) + 2.0 * 256 * (50 + 50 + 100 + 32 + 32);
  EXPECT_EQ(forward_step_cost(tiny(), {1, 99, 1}).attention_flops, later);
  EXPECT_EQ(forward_step_cost(tiny(), {3, 99, 1}).attention_flops, 3 * later);
  EXPECT_EQ(forward_step_cost(tiny(), {1, 0, 2}).attention_flops,
            first + forward_step_cost(tiny(), {1, 1, 1}).attention_flops);
}

TEST(ForwardCost, KvBytesHandWorked) {
  // p = 0: 12 window rows, 6 own rows (ratio 1), index keys at layers 6, 8, 10; f32.
  EXPECT_EQ(forward_step_cost(tiny(), {1, 0, 1}).kv_bytes, 4.0 * (12 * 128 + 6 * 128 + 3 * 64));
  // Decode at p = 99: 16 window rows per layer, 16 selected rows at layers 1-11, index
  // keys 50, 50, 100, 32, 32.
  const double decode = 4.0 * (12 * 16 * 128 + 11 * 16 * 128 + (50 + 50 + 100 + 32 + 32) * 64);
  EXPECT_EQ(forward_step_cost(tiny(), {1, 99, 1}).kv_bytes, decode);
  EXPECT_EQ(forward_step_cost(tiny(), {2, 99, 1}).kv_bytes, 2 * decode);
  // Prefill of 100 tokens: the selections cover every visible row (50 at ratio 2, 100
  // at ratio 1), level 2 every row too (100 tokens x 32 candidates > 100).
  const double prefill =
      4.0 * (12 * 16 * 128 + (5 * 50 + 6 * 100) * 128 + (50 + 50 + 100 + 100 + 100) * 64);
  EXPECT_EQ(forward_step_cost(tiny(), {1, 0, 100}).kv_bytes, prefill);
}

TEST(ForwardCost, WeightBytesAndMatmulFlops) {
  const ForwardCostModel& m = tiny();
  // One decode token: dense once, one embedding row, 6 experts in each of 12 layers,
  // 2 heads x 2 n-gram orders = 4 Engram rows in each of the 2 Engram layers.
  const StepCost one = forward_step_cost(m, {1, 10, 1});
  EXPECT_DOUBLE_EQ(one.weight_bytes,
                   m.dense_bytes + m.embed_row_bytes + 12 * 6 * m.expert_bytes + 2 * 4 * 33.0);
  EXPECT_DOUBLE_EQ(one.matmul_flops, 2 * m.matmul_params + 2 * m.head_params);
  // A long prefill touches every expert and (nearly) every embedding row once; the head
  // runs once per sequence.
  const StepCost big = forward_step_cost(m, {4, 0, 4096});
  EXPECT_NEAR(
      big.weight_bytes,
      m.dense_bytes + 4096 * m.embed_row_bytes + 12 * 32 * m.expert_bytes + (20022 + 20134) * 33.0,
      1.0);
  EXPECT_DOUBLE_EQ(big.matmul_flops, 2 * m.matmul_params * 4 * 4096 + 2 * m.head_params * 4);
}

}  // namespace
}  // namespace troupe::bench

// CSA2 attention of one layer (MODEL.md §5.3-5.4) over a Batch:
//   attention_layer  - queries, window rows, key gathering, sink attention, output proj
//   run_compressor   - Full layers: compressed KV rows and index keys into the state
//   run_indexer      - Full/Reindex layers: scores over the KV source's index keys, top-k
#pragma once

#include <cstdint>
#include <vector>

#include "model/batch.h"
#include "model/config.h"
#include "model/weights.h"

namespace troupe::model {

// Cross-layer selections of one forward call.
struct Selections {
  scratch_vector<scratch_vector<scratch_vector<int32_t>>> sel;  // [L][rows] selected compressed rows
  scratch_vector<scratch_vector<int32_t>> cand;                 // [rows] candidate rows from layer cs
  explicit Selections(int64_t layers) : sel(layers) {}
};

struct LayerContext {
  const ModelConfig& cfg;
  const AttentionWeights& w;
  int64_t layer;
  const std::vector<double>& freqs;  // rope frequencies of this layer
  const Batch& batch;
};

// x: [ctx.batch.rows, H] attention input of every row: window rows and the compressor
// use all of them. Queries (q, indexer, attention, output) run for `queries`, a subset
// of ctx.batch's rows (or ctx.batch itself, bounded replay shrinks it, MODEL.md §6) with
// inputs xq [queries.rows, H]; out: [queries.rows, H] (after wo_b). Selections are
// indexed by query row.
void attention_layer(const LayerContext& ctx, const float* x, const Batch& queries,
                     const float* xq, Selections& sel, float* out);

// out[rows, H] = wo_b · concat_g(wo_a[g] · o[heads of group g]); o: [rows, nh·D]
// (§5.3's output projection; the DSpark draft attention shares it).
void attention_output(const ModelConfig& c, const AttentionWeights& w, int64_t rows,
                      const float* o, float* out);

// x: [rows, H]; appends this chunk's complete groups to the layer's state.
void run_compressor(const LayerContext& ctx, const float* x);

// x: [rows, H], ql: [rows, Q]; fills sel.sel[layer] (and sel.cand at layer cs).
void run_indexer(const LayerContext& ctx, const float* x, const float* ql, Selections& sel);

}  // namespace troupe::model

// What a config costs: parameter counts (total and activated per token), bytes per
// dtype, per-token KV state (MODEL.md §4) and weight memory per rank when the routed
// experts are split over a DEP group. Pure arithmetic over checkpoint_tensor_specs();
// `troupe inspect` prints it.
#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include "model/config.h"
#include "model/tensor_spec.h"

namespace troupe::model {

struct ParamGroup {
  int64_t params = 0;
  int64_t bytes = 0;  // as stored, scales included
  void add(const TensorSpec& t) { params += t.params(), bytes += t.bytes(); }
};

struct ParamSummary {
  ParamGroup total;
  ParamGroup target_experts;  // routed experts of layers.*
  ParamGroup draft_experts;   // routed experts of mtp.*
  ParamGroup engram_tables;   // layers.*.engram.embed
  ParamGroup dense;           // everything else (replicated on every rank), draft included
  ParamGroup draft;           // all of mtp.* (experts included)
  std::map<DType, int64_t> bytes_by_dtype;
  // Weights touched per token by the target (MODEL.md §1 "Activated params check"):
  // every dense tensor, top_k routed experts per layer, the Engram rows looked up,
  // and embed/head counted in full as the spec's check does.
  int64_t activated_decode = 0;
  // Prefill with bounded replay (§6), per token of a long prompt: layers < Ne, the part
  // of layer Ne every token runs (window row, compressor, index key) and embed; the
  // decoder tail and the head are amortized away. With replay_tokens = 0 every layer runs.
  int64_t activated_prefill = 0;
  int64_t activated_draft = 0;  // per draft slot: all stages, dspark_top_k experts each
};

ParamSummary summarize_params(const ModelConfig& c, const std::vector<TensorSpec>& specs);

// Global (shared) KV bytes per token: compressed KV rows (NVFP4) and index keys (MXFP4)
// of every Full layer, 1/r rows per token (§4). Not an integer for odd rows and r > 1.
double global_kv_bytes_per_token(const ModelConfig& c);

struct RequestState {
  int64_t swa_bytes = 0;         // L rings of W rows, D E4M3 + D/32 UE8M0 bytes each
  int64_t dspark_bytes = 0;      // W-ring of F[p] [H] f32 + per stage a W-ring of rows [D] f32
  int64_t compressor_bytes = 0;  // open-group v_k, s_k [D] f32 of r-1 tokens, per Full r>1 layer
};
RequestState request_state_bytes(const ModelConfig& c);

// Weight bytes one rank of a DEP-N group holds: dense replicated, routed experts split
// (ceil) over the N ranks; the Engram tables listed apart (host memory, or sharded).
struct RankMemory {
  int64_t ranks = 1;
  int64_t target_experts_per_rank = 0;  // per layer
  int64_t draft_experts_per_rank = 0;   // per stage
  int64_t dense_bytes = 0;
  int64_t expert_bytes = 0;
  int64_t engram_sharded_bytes = 0;  // engram tables / N, if sharded over the group
  int64_t weight_bytes() const { return dense_bytes + expert_bytes; }
};
RankMemory rank_memory(const ModelConfig& c, const ParamSummary& s, int64_t ranks);

}  // namespace troupe::model

// What the engine needs to know of a model to serve it, provided by the model: the
// vocabulary, positions and EOS, what a paged KV block and a request's slot hold per layer,
// and which of V4.1's engine features the model has. runtime/ reads nothing else of a
// checkpoint, so the paged cache, prefix cache, scheduler and executor serve any model
// that describes itself here (DeepSeek-V4.1: ServingShape(config); the LLaMA family:
// llama_serving_shape in model/llama_forward.h).
//
//   block (block_size tokens):  [layer a: bs/r_a global rows | bs/r_a index keys][layer b: ...]
//                               (layers that hold rows only; a LLaMA layer: bs f32 [K | V] rows)
//   slot (one request):         per layer `window` ring rows; per layer with r > 1 its open
//                               group's carry; with DSpark on, the feature ring
#pragma once

#include <cstdint>
#include <vector>

#include "model/config.h"
#include "model/footprint.h"
#include "model/kv_rows.h"

namespace troupe::model {

struct ServingShape {
  int64_t vocab_size = 0;
  int64_t max_positions = 0;  // positions a sequence may reach
  int32_t eos_token_id = -1;  // -1: none

  // The paged KV layout.
  int64_t layers = 0;
  std::vector<int64_t> ratio;        // [L] tokens per global row; 0: the layer has none
  std::vector<uint8_t> holds_rows;   // [L] 1: the layer's rows live in the blocks (a V4.1
                                     // Reuse/Reindex layer reads another layer's)
  KvRowLayout rows;                  // ring row, global row (ckv), index key
  int64_t window = 0;                // ring rows per layer and request (SWA); 0: none
  int64_t carry_width = 0;           // floats of one carried compressor row (> 0)
  int64_t feature_width = 0;         // floats of one DSpark feature row
  double kv_bytes_per_token = 0;     // global rows of every layer, per token
  RequestState request_state;        // per-request slot bytes

  // V4.1's engine features (MODEL.md §6, §8, §9): a decoder tail (bounded replay,
  // clip_prefix), speculative verify (drafts, feature taps, ring rollback), expert-parallel
  // MoE, Engram n-gram lookback.
  int64_t replay_tokens = 0;    // R; 0: full compute only
  int64_t encoder_layers = 0;   // Ne
  int64_t lookback_tokens = 0;  // earlier tokens a chunk reads (Engram's n - 1)
  bool decoder_tail = false;
  bool speculative = false;
  bool expert_parallel = false;
  // Numbers naming the model for the disk tier's file tag, before and after the block
  // geometry (runtime/kv_cache/tier_storage.h: kv_disk_model_tag).
  std::vector<int64_t> tag_head, tag_tail;

  ServingShape() = default;
  // Implicit on purpose: the V4.1 callers (actors, DEP, tests, benches) keep passing
  // their ModelConfig where the runtime now takes a shape.
  ServingShape(const ModelConfig& c);  // NOLINT(google-explicit-constructor)

  bool has_global_rows(int64_t layer) const { return holds_rows[size_t(layer)] != 0; }
};

}  // namespace troupe::model

#include "model/serving_shape.h"

#include <algorithm>

namespace troupe::model {

ServingShape::ServingShape(const ModelConfig& c)
    : vocab_size(c.vocab_size),
      max_positions(c.max_position_embeddings),
      eos_token_id(static_cast<int32_t>(c.eos_token_id)),
      layers(c.num_hidden_layers),
      rows(KvRowLayout::of(c)),
      window(c.sliding_window),
      carry_width(c.head_dim),
      feature_width(c.hidden_size),
      // footprint.h's figures, as the budget always used them (same bytes, same blocks).
      kv_bytes_per_token(global_kv_bytes_per_token(c)),
      request_state(request_state_bytes(c)),
      replay_tokens(c.replay_tokens),
      encoder_layers(c.n_encoder_layers),
      lookback_tokens(std::max<int64_t>(0, c.engram_max_ngram_size - 1)),
      decoder_tail(true),
      speculative(true),
      expert_parallel(true),
      tag_head{c.vocab_size, c.hidden_size,    c.num_hidden_layers, c.n_encoder_layers,
               c.head_dim,   c.qk_rope_head_dim, c.sliding_window,  c.index_head_dim,
               c.replay_tokens},
      tag_tail(c.compress_ratios) {
  for (int64_t l = 0; l < layers; ++l) {
    ratio.push_back(c.ratio(l));
    holds_rows.push_back(c.layer_mode[size_t(l)] == LayerMode::Full ? 1 : 0);
  }
}

}  // namespace troupe::model

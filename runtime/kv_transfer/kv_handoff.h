// A request's state as one value, to continue it on another engine (P/D disaggregation,
// decode drain; docs/pd.md): its tokens, and one byte region holding every KV row it has
// computed - its blocks of global KV, then its slot (the SWA window rings with their
// positions, the compressor carry, the DSpark feature ring when kept). One region, so a
// transfer is one registered buffer and one put, never a descriptor per layer per block.
//
//   region:  [block 0 | block 1 | ... | block n-1][slot state]
//            n = ceil(num_computed / block_size) blocks of block_bytes each, in token
//            order; the last one partial (rows past num_computed are never read)
//   slot:    rings [L, W, window row bytes] | ring positions [L, W] int64 |
//            per layer: carry_v count (u64), floats, carry_s count (u64), floats |
//            feature ring: present (u64 0/1), rows [W, H] float, positions [W] int64
//
// The sender's engine computed tokens [0, num_computed); the last token (sampled, not yet
// computed) is the receiver's first decode, so its logits and everything after equal an
// undisturbed run's bit for bit (tests/runtime/kv_handoff_test.cpp).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "model/serving_shape.h"
#include "runtime/kv_cache/region_bytes.h"

namespace troupe::runtime {

class PagedKvStorage;

// What both sides must agree on for the region's bytes to mean the same rows.
struct KvHandoffShape {
  int64_t block_size = 0;
  int64_t block_bytes = 0;
  int64_t layers = 0;
  int64_t window = 0;
  int64_t window_row_bytes = 0;
  // How the engine fills its rows (replay modes change which rows a block holds): the
  // Engine's own code for its executor options, and from bit 8 up the rows' pieces less
  // one (model::KvRowLayout::ckv_pieces: where a block holds each piece).
  int64_t rows_mode = 0;

  // An engine's shape from its model and block size (what its PagedKvStorage holds).
  static KvHandoffShape of(const model::ServingShape& m, int64_t block_size, int64_t rows_mode);
  bool operator==(const KvHandoffShape&) const = default;
};

struct KvHandoff {
  std::vector<int32_t> tokens;      // prompt then output; the last one not computed yet
  int64_t num_prompt_tokens = 0;
  int64_t num_cached_tokens = 0;    // the sender's prefix hit (usage reports it)
  // The sender's detokenizer: output text so far, the output tokens it covers, the bytes
  // of it the client has (the receiver streams the rest).
  std::string text;
  int64_t text_tokens = 0;
  uint64_t streamed_text_bytes = 0;
  KvHandoffShape shape;
  int64_t num_blocks = 0;           // blocks at the head of `region`
  RegionBytes region;  // zeroed when fresh, never memset (region_bytes.h)

  int64_t num_computed() const { return static_cast<int64_t>(tokens.size()) - 1; }
  std::span<const uint8_t> block(int64_t i) const {
    return {region.data() + i * shape.block_bytes, size_t(shape.block_bytes)};
  }
  std::span<const uint8_t> slot_state() const {
    const size_t head = size_t(num_blocks * shape.block_bytes);
    return {region.data() + head, region.size() - head};
  }
  bool operator==(const KvHandoff&) const = default;
};

// A hand-off without KV (shape all zero, no region): the request's tokens and text state
// only. The receiver recomputes its tokens as a preempted request does: the fallback when
// a transfer failed or its KV cannot be loaded there (docs/pd.md "When a move fails").
bool carries_kv(const KvHandoff& h);
void drop_kv(KvHandoff& h);

// Packs request state held in `storage` into h (whose tokens are set): the blocks of
// `table` covering tokens [0, tokens.size() - 1) and ring slot `slot`.
void pack_kv_handoff(const PagedKvStorage& storage, const KvHandoffShape& shape,
                     std::span<const int32_t> table, int32_t slot, KvHandoff& h);

// Why a hand-off's tokens and text state cannot continue on a model of this vocabulary,
// or "": the prompt and output lengths, token ids, cached count, text state. Never throws.
std::string check_kv_tokens(const KvHandoff& h, const model::ServingShape& m);

// Why a hand-off (which may come from another process) cannot be loaded into an engine
// of this shape and model, or an empty string: shape, check_kv_tokens, the region's
// size, including every length field inside the slot state. Never throws.
std::string check_kv_handoff(const KvHandoff& h, const KvHandoffShape& shape,
                             const model::ServingShape& m);

}  // namespace troupe::runtime

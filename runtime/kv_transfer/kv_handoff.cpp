#include "runtime/kv_transfer/kv_handoff.h"

#include "kernels/check.h"
#include "runtime/kv_cache/paged_kv.h"
#include "runtime/kv_cache/slot_state.h"

namespace troupe::runtime {

KvHandoffShape KvHandoffShape::of(const model::ServingShape& m, int64_t block_size,
                                  int64_t rows_mode) {
  // Where a block holds its rows' pieces is part of how it is filled: blocks of whole rows
  // and of per-head runs (model/kv_rows.h) hold the same bytes in other places, so a
  // build of one layout refuses the other's hand-offs (the receiver recomputes).
  return {block_size,
          PagedKvStorage::block_bytes_of(m, block_size),
          m.layers,
          m.window,
          m.rows.window.bytes(),
          rows_mode | (m.rows.ckv_pieces - 1) << 8};
}

void pack_kv_handoff(const PagedKvStorage& storage, const KvHandoffShape& shape,
                     std::span<const int32_t> table, int32_t slot, KvHandoff& h) {
  h.shape = shape;
  TROUPE_CHECK(shape.block_size == storage.block_size() && shape.block_bytes == storage.block_bytes(),
               "pack_kv_handoff: a shape of another storage");
  const int64_t bs = h.shape.block_size;
  h.num_blocks = (h.num_computed() + bs - 1) / bs;
  TROUPE_CHECK(h.num_computed() >= 0 && h.num_blocks <= int64_t(table.size()),
               "pack_kv_handoff: ", h.tokens.size(), " tokens, a table of ", table.size(),
               " blocks");
  // One allocation: the blocks, then the slot state (whose carry sizes vary).
  h.region.clear();
  h.region.reserve(size_t(h.num_blocks * h.shape.block_bytes) + size_t(h.shape.layers) *
                       size_t(h.shape.window) * size_t(h.shape.window_row_bytes + 8) + 4096);
  for (int64_t i = 0; i < h.num_blocks; ++i) {
    const std::span<const uint8_t> b = storage.block_data(table[size_t(i)]);
    h.region.insert(h.region.end(), b.begin(), b.end());
  }
  storage.save_slot_state(slot, h.region);
}

bool carries_kv(const KvHandoff& h) { return !(h.shape == KvHandoffShape{}); }

void drop_kv(KvHandoff& h) {
  h.shape = {};
  h.num_blocks = 0;
  h.region.clear();
  h.region.shrink_to_fit();
}

std::string check_kv_tokens(const KvHandoff& h, const model::ServingShape& m) {
  const auto n = static_cast<int64_t>(h.tokens.size());
  if (h.num_prompt_tokens < 1 || h.num_prompt_tokens >= n)
    return "it has " + std::to_string(n) + " tokens and a prompt of " +
           std::to_string(h.num_prompt_tokens) + ": it needs the prompt and a sampled token";
  for (int32_t t : h.tokens)
    if (t < 0 || t >= m.vocab_size) return "token id " + std::to_string(t) + " is out of the vocabulary";
  if (h.num_cached_tokens < 0 || h.num_cached_tokens > h.num_prompt_tokens)
    return "its cached token count is out of range";
  if (h.text_tokens < 0 || h.text_tokens > n - h.num_prompt_tokens || h.streamed_text_bytes > h.text.size())
    return "its text state is out of range";
  return {};
}

std::string check_kv_handoff(const KvHandoff& h, const KvHandoffShape& shape,
                             const model::ServingShape& m) {
  if (!(h.shape == shape))
    return "its KV layout (block size " + std::to_string(h.shape.block_size) + ", " +
           std::to_string(h.shape.block_bytes) + " bytes a block, rows mode " +
           std::to_string(h.shape.rows_mode) + ") is not this engine's (" +
           std::to_string(shape.block_size) + ", " + std::to_string(shape.block_bytes) + ", " +
           std::to_string(shape.rows_mode) + ")";
  if (std::string why = check_kv_tokens(h, m); !why.empty()) return why;
  const int64_t bs = shape.block_size;
  if (h.num_blocks != (h.num_computed() + bs - 1) / bs)
    return std::to_string(h.num_blocks) + " blocks for " + std::to_string(h.num_computed()) +
           " computed tokens";
  const uint64_t head = uint64_t(h.num_blocks) * uint64_t(shape.block_bytes);
  if (h.region.size() < head) return "its region is shorter than its blocks";
  SlotStateView view;
  return parse_slot_state(h.slot_state(), m, view);
}

}  // namespace troupe::runtime

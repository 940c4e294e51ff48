// The bytes behind KvCacheManager's bookkeeping (MODEL.md §4): the global rows of every
// Full layer in shared blocks, and each running request's SWA rings and compressor carry
// in a slot. PagedSequence is one request's model::KvStore view over them.
//
//   block (block_size tokens):  [Full layer a: bs/r_a KV rows | bs/r_a index keys][layer b: ...]
//   row j of layer l:           block table[(j·r_l) / bs], row (j mod (bs/r_l)) inside it
//   a layer's KV rows in a block, rows().ckv_pieces = P pieces a row:
//                               [piece 0 of rows 0 .. bs/r_l - 1][piece 1 of them]...[piece P-1]
//   slot (one request):         per layer W window rows (+ the position each holds);
//                               per Full layer with r > 1 its open group's v/s carry;
//                               with DSpark on, the F ring of the last W positions
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "model/serving_shape.h"
#include "runtime/kv_cache/region_bytes.h"
#include "model/kv_store.h"

namespace troupe::runtime {

class StepUndo;
struct SlotStateView;

class PagedKvStorage {
 public:
  // keep_features: each slot holds a DSpark feature ring (MODEL.md §8), which a forward
  // with the draft weights fills; the drafter reads it.
  PagedKvStorage(const model::ServingShape& c, int64_t block_size, int64_t num_blocks,
                 int64_t num_slots, bool keep_features = false);

  // The bytes of one block of a model's global KV (the rows of every layer that holds
  // them), as held.
  static int64_t block_bytes_of(const model::ServingShape& c, int64_t block_size);

  const model::KvRowLayout& rows() const { return rows_; }
  int64_t block_size() const { return block_size_; }
  int64_t block_bytes() const { return block_bytes_; }
  int64_t ratio(int64_t layer) const { return ratio_[layer]; }
  int64_t layers() const { return layers_; }
  // Layer l's KV row `within` (its first piece) and index key `within` of block `id`
  // (l a Full layer).
  uint8_t* ckv_row(int32_t id, int64_t layer, int64_t within);
  // Bytes from piece p of a layer's KV row to piece p + 1 (a run of the block's rows).
  int64_t ckv_piece_stride(int64_t layer) const;
  uint8_t* ikey_row(int32_t id, int64_t layer, int64_t within);
  uint8_t* window_row(int32_t slot, int64_t layer, int64_t ring_slot);
  int64_t& window_pos(int32_t slot, int64_t layer, int64_t ring_slot);
  std::vector<float>& carry_v(int32_t slot, int64_t layer) { return carry_v_[slot * layers_ + layer]; }
  std::vector<float>& carry_s(int32_t slot, int64_t layer) { return carry_s_[slot * layers_ + layer]; }
  int64_t window() const { return window_; }
  bool is_full_layer(int64_t layer) const { return layer_off_[layer] >= 0; }  // compresses
  // The slot's feature ring, or null when features are not kept.
  model::FeatureRing* features(int32_t slot) {
    return features_.empty() ? nullptr : &features_[slot];
  }
  // A slot handed to a request that starts (or restarts) its prefill: empty rings, no carry.
  void reset_slot(int32_t slot);
  // n > 1 fork: slot dst gets slot src's rings, ring positions and compressor carry;
  // block dst gets block src's rows (all of them: rows past the parent's length are
  // never read before they are written).
  void copy_slot(int32_t src, int32_t dst);
  void copy_block(int32_t src, int32_t dst);
  // A window snapshot as bytes, for the host and disk tiers (docs/kv-cache.md "Window
  // snapshots in the tiers"): every layer's W window rows, then their positions (int64).
  // Taken at a block boundary, where every compressor group is closed: save checks that
  // the slot holds no carry. The DSpark feature ring is not kept: load clears it (the
  // drafter then proposes from less, verified decoding emits the same tokens).
  int64_t snapshot_bytes() const;
  static int64_t snapshot_bytes_of(const model::ServingShape& c);
  void save_snapshot(int32_t slot, std::span<uint8_t> out) const;
  void load_snapshot(int32_t slot, std::span<const uint8_t> in);
  // Block id's bytes (every layer's rows): what the host and disk tiers copy.
  std::span<uint8_t> block_data(int32_t id) {
    return {blocks_.data() + id * block_bytes_, size_t(block_bytes_)};
  }
  std::span<const uint8_t> block_data(int32_t id) const {
    return {blocks_.data() + id * block_bytes_, size_t(block_bytes_)};
  }
  // A slot's whole state, anywhere in a sequence (runtime/kv_cache/slot_state.h: rings,
  // carry, feature ring), for a KV hand-off: save appends it to `out`; load sets the slot
  // from a parsed one. A feature ring this storage keeps and `in` lacks is cleared (the
  // drafter proposes from less; verified tokens stay the same), one it does not keep is
  // skipped.
  void save_slot_state(int32_t slot, RegionBytes& out) const;
  void load_slot_state(int32_t slot, const SlotStateView& in);

 private:
  model::KvRowLayout rows_;
  int64_t block_size_, layers_, window_;
  int64_t block_bytes_ = 0;
  std::vector<int64_t> ratio_;       // [L]
  std::vector<int64_t> layer_off_;   // [L] byte offset of a Full layer's rows in a block, -1 otherwise
  // [num_blocks, block_bytes]. Fresh zero pages, not a memset: the pool is most of the
  // KV budget (GBs), and zero-filling it up front cost the first request ~7 s on this
  // 2-vCPU machine (the rank is built when its first step arrives). A page is zeroed
  // by the kernel when a step first writes it.
  RegionBytes blocks_;
  std::vector<uint8_t> rings_;       // [slots, L, W, window row bytes]
  std::vector<int64_t> ring_pos_;    // [slots, L, W]
  std::vector<std::vector<float>> carry_v_, carry_s_;  // [slots * L]
  std::vector<model::FeatureRing> features_;           // [slots] or empty
};

// One request's state for a step: global rows through its block table, rings and carry
// in its slot, tokens from the request. kv_length = tokens whose global rows are stored.
class PagedSequence final : public model::KvStore {
 public:
  // lookback: the tokens at positions [lookback_start, lookback_start + size), the ones a
  // step may read before its first new token (Engram n-grams).
  PagedSequence(PagedKvStorage& storage, std::span<const int32_t> block_table, int32_t slot,
                std::span<const int32_t> lookback, int64_t lookback_start, int64_t kv_length);
  // The view of another step (same storage), reusing this one's buffers.
  void reset(std::span<const int32_t> block_table, int32_t slot, std::span<const int32_t> lookback,
             int64_t lookback_start, int64_t kv_length);

  int64_t length() const override { return kv_length_; }
  int32_t token(int64_t pos) const override;
  void advance(std::span<const int32_t>) override {}  // the scheduler owns the counts
  const model::KvRowLayout& rows() const override { return storage_.rows(); }
  uint8_t* window_row(int64_t layer, int64_t s) override { return storage_.window_row(slot_, layer, s); }
  int64_t& window_pos(int64_t layer, int64_t s) override { return storage_.window_pos(slot_, layer, s); }
  int64_t compressed_rows(int64_t layer) const override { return rows_[layer]; }
  const uint8_t* ckv_row(int64_t layer, int64_t j) const override;
  int64_t ckv_piece_stride(int64_t layer) const override {
    return storage_.ckv_piece_stride(layer);
  }
  const uint8_t* ikey_row(int64_t layer, int64_t j) const override;
  void append_row(int64_t layer, const uint8_t* ckv, const uint8_t* ikey) override;
  std::vector<float>& carry_v(int64_t layer) override { return storage_.carry_v(slot_, layer); }
  std::vector<float>& carry_s(int64_t layer) override { return storage_.carry_s(slot_, layer); }
  void close_group(int64_t layer, int64_t group_start) override;
  model::FeatureRing* features() override { return storage_.features(slot_); }
  // A speculative verify step: groups closed during it are kept in `undo` (may be null).
  void keep_closed_groups(StepUndo* undo) { undo_ = undo; }

 private:
  // (block id, row within the block) of compressed row j of a layer.
  std::pair<int32_t, int64_t> locate(int64_t layer, int64_t j) const;

  PagedKvStorage& storage_;
  std::span<const int32_t> table_;
  int32_t slot_ = -1;
  std::span<const int32_t> lookback_;
  int64_t lookback_start_ = 0;
  int64_t kv_length_ = 0;
  std::vector<int64_t> rows_;  // [L] compressed rows held (complete groups + appended)
  StepUndo* undo_ = nullptr;
};

}  // namespace troupe::runtime

#include "runtime/kv_cache/paged_kv.h"

#include <algorithm>
#include <cstring>

#include "kernels/check.h"
#include "runtime/kv_cache/slot_state.h"
#include "runtime/kv_cache/step_undo.h"

namespace troupe::runtime {

PagedKvStorage::PagedKvStorage(const model::ServingShape& c, int64_t block_size,
                               int64_t num_blocks, int64_t num_slots, bool keep_features)
    : rows_(c.rows),
      block_size_(block_size),
      layers_(c.layers),
      window_(c.window) {
  TROUPE_CHECK(rows_.ckv_pieces >= 1 && rows_.ckv.bytes() % rows_.ckv_pieces == 0, "a KV row of ",
               rows_.ckv.bytes(), " bytes does not split into ", rows_.ckv_pieces, " pieces");
  ratio_.assign(layers_, 0);
  layer_off_.assign(layers_, -1);
  for (int64_t l = 0; l < layers_; ++l) {
    ratio_[l] = c.ratio[size_t(l)];
    if (!c.has_global_rows(l)) continue;
    TROUPE_CHECK(block_size % ratio_[l] == 0, "block_size ", block_size,
                 " must be a multiple of layer ", l, "'s compress ratio ", ratio_[l]);
    layer_off_[l] = block_bytes_;
    block_bytes_ += (block_size / ratio_[l]) * (rows_.ckv.bytes() + rows_.ikey.bytes());
  }
  blocks_.resize(size_t(num_blocks * block_bytes_));  // zero pages, untouched (paged_kv.h)
  rings_.assign(num_slots * layers_ * window_ * rows_.window.bytes(), 0);
  ring_pos_.assign(num_slots * layers_ * window_, -1);
  carry_v_.resize(num_slots * layers_);
  carry_s_.resize(num_slots * layers_);
  if (keep_features) features_.assign(num_slots, model::FeatureRing(window_, c.feature_width));
}

int64_t PagedKvStorage::block_bytes_of(const model::ServingShape& c, int64_t block_size) {
  int64_t bytes = 0;
  for (int64_t l = 0; l < c.layers; ++l)
    if (c.has_global_rows(l))
      bytes += (block_size / c.ratio[size_t(l)]) * (c.rows.ckv.bytes() + c.rows.ikey.bytes());
  return bytes;
}

uint8_t* PagedKvStorage::ckv_row(int32_t id, int64_t layer, int64_t within) {
  return &blocks_[id * block_bytes_ + layer_off_[layer] +
                  within * (rows_.ckv.bytes() / rows_.ckv_pieces)];
}

int64_t PagedKvStorage::ckv_piece_stride(int64_t layer) const {
  return (block_size_ / ratio_[layer]) * (rows_.ckv.bytes() / rows_.ckv_pieces);
}

uint8_t* PagedKvStorage::ikey_row(int32_t id, int64_t layer, int64_t within) {
  const int64_t per_block = block_size_ / ratio_[layer];
  return &blocks_[id * block_bytes_ + layer_off_[layer] + per_block * rows_.ckv.bytes() +
                  within * rows_.ikey.bytes()];
}

uint8_t* PagedKvStorage::window_row(int32_t slot, int64_t layer, int64_t ring_slot) {
  return &rings_[((slot * layers_ + layer) * window_ + ring_slot) * rows_.window.bytes()];
}

int64_t& PagedKvStorage::window_pos(int32_t slot, int64_t layer, int64_t ring_slot) {
  return ring_pos_[(slot * layers_ + layer) * window_ + ring_slot];
}

void PagedKvStorage::reset_slot(int32_t slot) {
  std::fill_n(&ring_pos_[slot * layers_ * window_], layers_ * window_, -1);
  for (int64_t l = 0; l < layers_; ++l) {
    carry_v_[slot * layers_ + l].clear();
    carry_s_[slot * layers_ + l].clear();
  }
  if (!features_.empty()) std::fill(features_[slot].pos.begin(), features_[slot].pos.end(), -1);
}

void PagedKvStorage::copy_slot(int32_t src, int32_t dst) {
  const int64_t rows = layers_ * window_, bytes = rows * rows_.window.bytes();
  std::copy_n(rings_.data() + src * bytes, bytes, rings_.data() + dst * bytes);
  std::copy_n(ring_pos_.data() + src * rows, rows, ring_pos_.data() + dst * rows);
  for (int64_t l = 0; l < layers_; ++l) {
    carry_v_[dst * layers_ + l] = carry_v_[src * layers_ + l];
    carry_s_[dst * layers_ + l] = carry_s_[src * layers_ + l];
  }
  if (!features_.empty()) features_[dst] = features_[src];
}

void PagedKvStorage::copy_block(int32_t src, int32_t dst) {
  std::copy_n(blocks_.data() + src * block_bytes_, block_bytes_,
              blocks_.data() + dst * block_bytes_);
}

int64_t PagedKvStorage::snapshot_bytes_of(const model::ServingShape& c) {
  const int64_t rows = c.layers * c.window;
  return rows * (c.rows.window.bytes() + int64_t(sizeof(int64_t)));
}

int64_t PagedKvStorage::snapshot_bytes() const {
  return layers_ * window_ * (rows_.window.bytes() + int64_t(sizeof(int64_t)));
}

void PagedKvStorage::save_snapshot(int32_t slot, std::span<uint8_t> out) const {
  TROUPE_CHECK(int64_t(out.size()) == snapshot_bytes(), "save_snapshot: ", out.size(),
               " bytes for a snapshot of ", snapshot_bytes());
  for (int64_t l = 0; l < layers_; ++l)
    TROUPE_CHECK(carry_v_[slot * layers_ + l].empty() && carry_s_[slot * layers_ + l].empty(),
                 "save_snapshot: slot ", slot, " holds an open compressor group at layer ", l);
  const int64_t rows = layers_ * window_, bytes = rows * rows_.window.bytes();
  std::copy_n(rings_.data() + slot * bytes, bytes, out.data());
  std::memcpy(out.data() + bytes, ring_pos_.data() + slot * rows, size_t(rows) * sizeof(int64_t));
}

void PagedKvStorage::load_snapshot(int32_t slot, std::span<const uint8_t> in) {
  TROUPE_CHECK(int64_t(in.size()) == snapshot_bytes(), "load_snapshot: ", in.size(),
               " bytes for a snapshot of ", snapshot_bytes());
  reset_slot(slot);  // no carry, no feature ring
  const int64_t rows = layers_ * window_, bytes = rows * rows_.window.bytes();
  std::copy_n(in.data(), bytes, rings_.data() + slot * bytes);
  std::memcpy(ring_pos_.data() + slot * rows, in.data() + bytes, size_t(rows) * sizeof(int64_t));
}

void PagedKvStorage::save_slot_state(int32_t slot, RegionBytes& out) const {
  const int64_t rows = layers_ * window_, bytes = rows * rows_.window.bytes();
  append_bytes(out, std::span<const uint8_t>(rings_.data() + slot * bytes, size_t(bytes)));
  append_bytes(out, std::span<const int64_t>(ring_pos_.data() + slot * rows, size_t(rows)));
  for (int64_t l = 0; l < layers_; ++l) {
    append_counted(out, carry_v_[slot * layers_ + l]);
    append_counted(out, carry_s_[slot * layers_ + l]);
  }
  const uint64_t present = features_.empty() ? 0 : 1;
  append_bytes(out, std::span<const uint64_t>(&present, 1));
  if (!present) return;
  const model::FeatureRing& f = features_[slot];
  const uint64_t width = uint64_t(f.width);
  append_bytes(out, std::span<const uint64_t>(&width, 1));
  append_bytes(out, std::span<const float>(f.rows));
  append_bytes(out, std::span<const int64_t>(f.pos));
}

void PagedKvStorage::load_slot_state(int32_t slot, const SlotStateView& in) {
  const int64_t rows = layers_ * window_, bytes = rows * rows_.window.bytes();
  TROUPE_CHECK(int64_t(in.rings.size()) == bytes && int64_t(in.carry_v.size()) == layers_,
               "load_slot_state: a slot state of another shape");
  reset_slot(slot);
  std::copy_n(in.rings.data(), bytes, rings_.data() + slot * bytes);
  std::memcpy(ring_pos_.data() + slot * rows, in.positions.data(), in.positions.size());
  auto floats = [](std::span<const uint8_t> b, std::vector<float>& v) {
    v.resize(b.size() / sizeof(float));
    if (!b.empty()) std::memcpy(v.data(), b.data(), b.size());  // an empty vector's data() may be null
  };
  for (int64_t l = 0; l < layers_; ++l) {
    floats(in.carry_v[size_t(l)], carry_v_[slot * layers_ + l]);
    floats(in.carry_s[size_t(l)], carry_s_[slot * layers_ + l]);
  }
  if (features_.empty() || !in.has_features) return;  // reset_slot cleared a kept ring
  model::FeatureRing& f = features_[slot];
  TROUPE_CHECK(in.feature_rows.size() == f.rows.size() * sizeof(float) &&
                   in.feature_positions.size() == f.pos.size() * sizeof(int64_t),
               "load_slot_state: a feature ring of another shape");
  std::memcpy(f.rows.data(), in.feature_rows.data(), in.feature_rows.size());
  std::memcpy(f.pos.data(), in.feature_positions.data(), in.feature_positions.size());
}

PagedSequence::PagedSequence(PagedKvStorage& storage, std::span<const int32_t> block_table,
                             int32_t slot, std::span<const int32_t> lookback,
                             int64_t lookback_start, int64_t kv_length)
    : storage_(storage) {
  reset(block_table, slot, lookback, lookback_start, kv_length);
}

void PagedSequence::reset(std::span<const int32_t> block_table, int32_t slot,
                          std::span<const int32_t> lookback, int64_t lookback_start,
                          int64_t kv_length) {
  table_ = block_table;
  slot_ = slot;
  lookback_ = lookback;
  lookback_start_ = lookback_start;
  kv_length_ = kv_length;
  undo_ = nullptr;
  rows_.assign(storage_.layers(), 0);
  for (int64_t l = 0; l < storage_.layers(); ++l)
    if (storage_.ratio(l) > 0) rows_[l] = kv_length / storage_.ratio(l);  // complete groups
}

int32_t PagedSequence::token(int64_t pos) const {
  const int64_t i = pos - lookback_start_;
  TROUPE_CHECK(i >= 0 && i < static_cast<int64_t>(lookback_.size()), "token ", pos,
               " is outside the chunk's lookback [", lookback_start_, ", ",
               lookback_start_ + static_cast<int64_t>(lookback_.size()), ")");
  return lookback_[i];
}

std::pair<int32_t, int64_t> PagedSequence::locate(int64_t layer, int64_t j) const {
  const int64_t per_block = storage_.block_size() / storage_.ratio(layer);
  const int64_t block = j / per_block;
  TROUPE_CHECK(block < static_cast<int64_t>(table_.size()), "compressed row ", j, " of layer ",
               layer, " is past the block table (", table_.size(), " blocks)");
  return {table_[block], j % per_block};
}

const uint8_t* PagedSequence::ckv_row(int64_t layer, int64_t j) const {
  const auto [id, within] = locate(layer, j);
  return storage_.ckv_row(id, layer, within);
}

const uint8_t* PagedSequence::ikey_row(int64_t layer, int64_t j) const {
  const auto [id, within] = locate(layer, j);
  return storage_.ikey_row(id, layer, within);
}

void PagedSequence::append_row(int64_t layer, const uint8_t* ckv, const uint8_t* ikey) {
  const auto [id, within] = locate(layer, rows_[layer]++);
  const int64_t pieces = storage_.rows().ckv_pieces, piece = storage_.rows().ckv.bytes() / pieces,
                stride = storage_.ckv_piece_stride(layer);
  uint8_t* row = storage_.ckv_row(id, layer, within);
  for (int64_t p = 0; p < pieces; ++p) std::copy_n(ckv + p * piece, piece, row + p * stride);
  std::copy_n(ikey, storage_.rows().ikey.bytes(), storage_.ikey_row(id, layer, within));
}

void PagedSequence::close_group(int64_t layer, int64_t group_start) {
  if (undo_ != nullptr) undo_->keep_closed_group(layer, group_start, carry_v(layer), carry_s(layer));
  carry_v(layer).clear();
  carry_s(layer).clear();
}

}  // namespace troupe::runtime

// Where one sequence's model state lives (MODEL.md §4). The forward pass reads and
// writes packed rows only through this interface, so the same layer code runs on the
// contiguous SequenceState (model/state.h) and on the engine's paged cache, where the
// global rows sit in shared, ref-counted blocks and the rings in per-request slots.
//
//   window ring of layer l:   W slots, slot = p mod W, window_pos = the position held
//   global rows of Full l:    row j covers tokens [j·r, j·r + r); appended in order
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "model/feature_ring.h"
#include "model/kv_rows.h"

namespace troupe::model {

class KvStore {
 public:
  virtual ~KvStore() = default;

  // Tokens already processed (the position of the next new token).
  virtual int64_t length() const = 0;
  // An earlier token (pos < length()), for Engram's n-gram lookback.
  virtual int32_t token(int64_t pos) const = 0;
  // Called once after a forward step added `tokens` at positions length()...
  virtual void advance(std::span<const int32_t> tokens) = 0;

  virtual const KvRowLayout& rows() const = 0;
  virtual uint8_t* window_row(int64_t layer, int64_t slot) = 0;   // [window row bytes]
  virtual int64_t& window_pos(int64_t layer, int64_t slot) = 0;   // -1 = empty
  virtual int64_t compressed_rows(int64_t layer) const = 0;
  // Row j's first piece (rows().ckv_pieces): the whole row where rows are whole.
  virtual const uint8_t* ckv_row(int64_t layer, int64_t j) const = 0;   // [ckv row bytes]
  // Bytes from a row's piece p to its piece p + 1. A store that keeps rows whole (every
  // store with one piece, and SequenceState) has them side by side.
  virtual int64_t ckv_piece_stride(int64_t layer) const {
    (void)layer;
    return rows().ckv.bytes() / rows().ckv_pieces;
  }
  virtual const uint8_t* ikey_row(int64_t layer, int64_t j) const = 0;  // [ikey row bytes]
  // Appends row compressed_rows(layer) of a Full layer: its KV row (whole, its pieces in
  // order) and index key.
  virtual void append_row(int64_t layer, const uint8_t* ckv, const uint8_t* ikey) = 0;
  // The open compressor group of a Full layer with ratio r > 1: v_k and s_k [k, D] f32.
  virtual std::vector<float>& carry_v(int64_t layer) = 0;
  virtual std::vector<float>& carry_s(int64_t layer) = 0;
  // The open group of a Full layer starting at token group_start was pooled into a row:
  // its carry is dropped. A store that may have to undo a step (speculative decoding's
  // rejected tokens) keeps the carried rows instead, so it can reopen the group.
  virtual void close_group(int64_t layer, int64_t group_start) {
    (void)group_start;
    carry_v(layer).clear();
    carry_s(layer).clear();
  }
  // The DSpark feature ring (MODEL.md §8), or null: a forward pass computes and stores
  // F[p] only for stores that hold one, so stores without it pay nothing.
  virtual FeatureRing* features() { return nullptr; }
};

}  // namespace troupe::model

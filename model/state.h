// Contiguous per-sequence model state (MODEL.md §4) for the plain forward pass:
// every layer's SWA ring, each Full layer's compressed KV rows and index keys, all
// as packed rows in their stored formats (model/kv_rows.h: fp8 window rows, nvfp4
// KV rows, mxfp4 index keys, so global KV costs MODEL.md's bytes per token), the
// compressor carry of an open group, and the token history (Engram lookback).
// The paged engine cache (runtime/) holds the same rows in blocks.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "model/config.h"
#include "model/kv_rows.h"
#include "model/kv_store.h"

namespace troupe::model {

//   window ring of layer l, W slots:   slot = p mod W
//   +---------+---------+-----+-----------+
//   | p≡0     | p≡1     | ... | p≡W-1     |   holds positions [length-W, length)
//   +---------+---------+-----+-----------+
struct LayerState {
  std::vector<uint8_t> window;  // [W, window row bytes] packed fp8_ue8m0 rows
  std::vector<int64_t> window_pos;  // [W] position each slot holds, -1 = empty (§6: rows
                                    // a bounded replay skipped are missing, not zero)
  std::vector<uint8_t> ckv;     // [rows, ckv row bytes] packed nvfp4 rows (Full layers)
  std::vector<uint8_t> ikey;    // [rows, ikey row bytes] packed mxfp4 rows (Full layers)
  std::vector<float> carry_v;  // [k, D] open group's v_k so far (ratio > 1)
  std::vector<float> carry_s;  // [k, D] open group's s_k so far (ratio > 1)
};

class SequenceState final : public KvStore {
 public:
  int64_t length_ = 0;          // tokens already processed (next position)
  std::vector<int32_t> tokens;  // [length] every token so far
  std::vector<LayerState> layers;
  KvRowLayout layout;           // the packed row formats
  std::optional<FeatureRing> feature_ring;  // DSpark F[p] ring, when enabled

  static SequenceState empty(const ModelConfig& c);
  // Bytes of global (shared) KV held: compressed rows and index keys of every layer.
  int64_t global_kv_bytes() const;
  // Asks later forward passes to keep DSpark target features F[p] (a W-ring of [H]).
  void enable_features(const ModelConfig& c) {
    feature_ring.emplace(c.sliding_window, c.hidden_size);
  }

  int64_t length() const override { return length_; }
  int32_t token(int64_t pos) const override { return tokens[pos]; }
  void advance(std::span<const int32_t> t) override {
    tokens.insert(tokens.end(), t.begin(), t.end());
    length_ += static_cast<int64_t>(t.size());
  }
  const KvRowLayout& rows() const override { return layout; }
  uint8_t* window_row(int64_t l, int64_t slot) override {
    return &layers[l].window[slot * layout.window.bytes()];
  }
  int64_t& window_pos(int64_t l, int64_t slot) override { return layers[l].window_pos[slot]; }
  int64_t compressed_rows(int64_t l) const override {
    return static_cast<int64_t>(layers[l].ckv.size()) / layout.ckv.bytes();
  }
  const uint8_t* ckv_row(int64_t l, int64_t j) const override {
    return &layers[l].ckv[j * layout.ckv.bytes()];
  }
  const uint8_t* ikey_row(int64_t l, int64_t j) const override {
    return &layers[l].ikey[j * layout.ikey.bytes()];
  }
  void append_row(int64_t l, const uint8_t* ckv, const uint8_t* ikey) override {
    layers[l].ckv.insert(layers[l].ckv.end(), ckv, ckv + layout.ckv.bytes());
    layers[l].ikey.insert(layers[l].ikey.end(), ikey, ikey + layout.ikey.bytes());
  }
  std::vector<float>& carry_v(int64_t l) override { return layers[l].carry_v; }
  std::vector<float>& carry_s(int64_t l) override { return layers[l].carry_s; }
  FeatureRing* features() override { return feature_ring ? &*feature_ring : nullptr; }
};

}  // namespace troupe::model

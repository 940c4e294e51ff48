// Contiguous per-sequence model state (MODEL.md §4) for the plain forward pass:
// every layer's SWA ring, each Full layer's compressed KV rows and index keys
// (kept dequantized: the exact f32 values of the stored FP4/FP8 codes), the
// compressor carry of an open group, and the token history (Engram lookback).
// The paged engine cache (runtime/) replaces this with block tables.
#pragma once

#include <cstdint>
#include <vector>

#include "model/config.h"

namespace troupe::model {

//   window ring of layer l, W slots:   slot = p mod W
//   +---------+---------+-----+-----------+
//   | p≡0     | p≡1     | ... | p≡W-1     |   holds positions [length-W, length)
//   +---------+---------+-----+-----------+
struct LayerState {
  std::vector<float> window;   // [W, D] fp8_ue8m0 window rows (dequantized)
  std::vector<float> ckv;      // [rows, D] nvfp4 compressed KV rows (Full layers)
  std::vector<float> ikey;     // [rows, dI] mxfp4 index keys (Full layers)
  std::vector<float> carry_v;  // [k, D] open group's v_k so far (ratio > 1)
  std::vector<float> carry_s;  // [k, D] open group's s_k so far (ratio > 1)
};

struct SequenceState {
  int64_t length = 0;           // tokens already processed (next position)
  std::vector<int32_t> tokens;  // [length] every token so far
  std::vector<LayerState> layers;

  static SequenceState empty(const ModelConfig& c);
  int64_t compressed_rows(int64_t layer, int64_t dim) const {
    return static_cast<int64_t>(layers[layer].ckv.size()) / dim;
  }
};

}  // namespace troupe::model

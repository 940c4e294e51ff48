// Packed KV row formats of MODEL.md §4: each row is [data bytes][scale bytes],
// contiguous, exactly as stored in the cache and moved in P/D transfers.
//
//   window row (SWA ring)   fp8_ue8m0, D ch:  D E4M3      + D/32 UE8M0   (full 528 B)
//   compressed KV row       nvfp4,     D ch:  D/2 packed  + D/16 E4M3    (full 288 B)
//   index-key row           mxfp4,    dI ch:  dI/2 packed + dI/32 UE8M0  (full  68 B)
//
// F32 (no scales) is the LLaMA family's row: K and V of one token as computed, so the
// paged engine reads exactly what the contiguous LlamaState holds (model/llama_forward.h).
#pragma once

#include <cstdint>

#include "model/config.h"

namespace troupe::model {

enum class RowFormat : uint8_t { Fp8Ue8m0, Nvfp4, Mxfp4, F32 };

struct RowCodec {
  RowFormat format = RowFormat::Fp8Ue8m0;
  int64_t dim = 0;

  int64_t data_bytes() const;
  int64_t scale_bytes() const;
  int64_t bytes() const { return data_bytes() + scale_bytes(); }
  // Quantizes x[dim] into one packed row (§3 quantizer of the format).
  void encode(const float* x, uint8_t* row) const;
  // Dequantizes one packed row to f32 (exact).
  void decode(const uint8_t* row, float* out) const;
};

struct KvRowLayout {
  RowCodec window;  // fp8_ue8m0 over D
  RowCodec ckv;     // nvfp4 over D
  RowCodec ikey;    // mxfp4 over dI
  // A paged block holds its KV rows of a layer as ckv_pieces runs: a row splits into
  // that many equal pieces, and piece p of every row of the block lies in run p, row
  // after row. 1: whole rows one after another (V4.1). The LLaMA family's row (each KV
  // head's K, then its V) splits per head and K / V, so attention reads a head's keys
  // and values of a block as one stretch (llama_forward.cpp).
  int64_t ckv_pieces = 1;
  static KvRowLayout of(const ModelConfig& c);
};

}  // namespace troupe::model

// The checkpoint's tensor list (MODEL.md §2) derived from a ModelConfig: every name,
// accepted dtype and exact shape, including the `.scale` companion of each quantized
// weight. One list serves the loader's validation, checkpoint writers and `troupe
// inspect` (parameter and byte counts), so they cannot disagree about the layout.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/config.h"
#include "model/safetensors.h"

namespace troupe::model {

// How a tensor stores its values (§2 dtype legend; r rows, c columns of the logical matrix).
enum class TensorFormat : uint8_t {
  Plain,   // values as stored (BF16, F32, I32, I64)
  Fp8,     // E4M3 [r, c]; scale [ceil(r/32), ceil(c/32)]
  Fp4,     // two E2M1 codes per byte [r, c/2]; scale [r, c/32]
  RowFp8,  // E4M3 [r, c]; scale [r, c/32]
  Scale,   // the UE8M0 `.scale` companion of one of the above
};

struct TensorSpec {
  std::string name;
  std::vector<DType> dtypes;   // accepted; dtypes[0] is the one writers write
  std::vector<int64_t> shape;  // exact stored shape
  TensorFormat format = TensorFormat::Plain;
  int64_t layer = -1;         // l of `layers.{l}.*`, else -1
  int64_t stage = -1;         // s of `mtp.{s}.*` (DSpark), else -1
  int64_t expert = -1;        // j of `*.ffn.experts.{j}.*` (routed), else -1
  bool engram_table = false;  // `layers.{l}.engram.embed.*`: rows are looked up, not multiplied

  int64_t numel() const;
  int64_t bytes() const;   // stored bytes in dtypes[0]
  int64_t params() const;  // logical weights: FP4 holds two per byte; scales and I32/I64 none
};

// Every tensor of §2 for this config: globals, per-layer tensors by layer mode, Engram,
// and the DSpark stages mtp.{s} (stage-0 and last-stage extras included).
std::vector<TensorSpec> checkpoint_tensor_specs(const ModelConfig& c);

// Throws troupe::Error naming the first tensor that is missing or has another dtype or
// shape, then checks the Engram values of §2 (token_map in [0, cV), multipliers in
// [1, (2^63-1) div cV], engram_num_embeddings equal to the §7 prime sums).
void validate_checkpoint(const Checkpoint& ckpt, const ModelConfig& c);

}  // namespace troupe::model

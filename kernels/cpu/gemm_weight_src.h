// How the SIMD GEMMs (gemm_avx512.cpp, gemm_avx2.cpp) read one stored weight: strides
// per format and the scale tables. Plain data without intrinsics; weight_src() and the
// scratch buffers are defined in baseline-compiled files (gemm.cpp, gemm_scratch.cpp)
// because an inline function compiled in two files with different -m flags may be
// linked once, as the wider ISA's copy, and then fault on the narrower CPU.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/weights.h"

namespace troupe::kernels::cpu {

// Largest UE8M0 code whose 2^120·2^(code-127) is still a finite f32.
constexpr int kMaxFoldedScale = 134;

struct WeightSrc {
  const uint8_t* data;
  const uint8_t* scale;
  int64_t k;                // columns
  int64_t row_bytes;        // bytes per stored row
  int64_t scale_ld;         // scale codes per scale row
  const float* ue8m0;       // [256] scale values
  const float* e4m3_scale;  // [256] 2^120 · scale value, for codes <= kMaxFoldedScale
  // [256][16], 64-byte rows: row c is the 16 E2M1 values times ue8m0[c], each the f32
  // product the decode multiplied per block before. Loading the block's row instead saves
  // a broadcast and a multiply per 32 weights and row (one thread, an L2-resident matrix:
  // 1.0-1.4x at M = 4, level at M = 1; docs/kernels-bench.md).
  const float* fp4_scaled;
  // [256][64], 64-byte rows, for AVX2's vpshufb: row c holds the 16 values of fp4_scaled's
  // row c as bf16 (each is one exactly), their low bytes twice then their high bytes
  // twice (a 16-byte table per 128-bit lane, loaded without a broadcast).
  const uint8_t* fp4_bf16;
  bool no_nan_codes;  // WeightView::no_nan_codes
};
WeightSrc weight_src(const WeightView& w);

// Per-thread scratch, grown on demand and reused across calls (64-byte aligned; 2 MiB
// pages once large). One for the activation copy, one for a thread's weight panel.
class Scratch {
 public:
  ~Scratch();
  void* get_bytes(size_t bytes);
  template <class T>
  T* get(int64_t count) {
    return static_cast<T*>(get_bytes(static_cast<size_t>(count) * sizeof(T)));
  }
  void trim(size_t keep);  // frees the buffer when it holds more than `keep` bytes

 private:
  void* p_ = nullptr;
  size_t cap_ = 0;
};
Scratch& gemm_x_scratch();  // activations: written before, read inside parallel_for
Scratch& gemm_w_scratch();  // this thread's dequantized panel
constexpr size_t kKeepScratchBytes = size_t{16} << 20;  // activation copy kept between calls

}  // namespace troupe::kernels::cpu

// Q8_0 / Q4_0 weights (and FP4 ones, for GemmPrecision::Int8) regrouped for the AVX-512
// VNNI and AVX2 row-group kernels: the same values as the GGUF blocks (kernels/ggml_blocks.h)
// or FP4 codes and UE8M0 scales (kernels/weights.h), 16 weight rows side by side, so that
// one zmm of codes against 4 broadcast activation bytes adds 4 products into each of 16
// rows' lanes (vpdpbusd; on AVX2 two ymm of 8 rows, vpmaddubsw + vpmaddwd), and one load
// gives the 16 rows' block scales. In the GGUF layout a
// decode step spends more instructions taking each 18-byte block apart than DRAM needs
// to deliver it; here a block of 16 rows is 4 (Q4_0) or 8 (Q8_0) loads, a mask and a
// shift, and one scale conversion.
//
// Row group g (rows 16g .. 16g + 15) is blocks · group_block_bytes contiguous bytes,
// block b after block b - 1; within a block, j the row (0..15), t the byte (0..3):
//   Q8_0  data[c][j][t], c = 0..7   u8 = q(k) + 128            k = 32b + 4c + t
//         scale[j]                  f16 bits as stored         (512 + 32 = 544 = 16 · 34)
//   Q4_0  data[c][j][t], c = 0..3   u8 = n(k) | n(k + 16) << 4, k = 32b + 4c + t, n the
//                                   stored nibble (q + 8), so the low nibbles are chunks
//                                   c and the high ones chunks c + 4 of the block
//         scale[j]                  f16 bits as stored         (256 + 32 = 288 = 16 · 18)
//   FP4   data[c][j][t], c = 0..3   u8 = e(k) | e(k + 16) << 4, e the stored E2M1 code of
//                                   column k (bit 3 the sign), as Q4_0's nibbles
//         scale[j]                  the UE8M0 code as stored   (256 + 16 = 272 = 16 · 17)
// Rows past the matrix's last (the last group's padding) have zero codes and scales. The
// regrouped matrix is therefore exactly as large as the GGUF one (FP4: its codes and
// scales together), rows rounded up to 16.
//
// A WeightView carries it in `groups` beside its GGUF `data` (kernels/weights.h); the
// portable path reads `data`, so every path computes the same values. A matrix regrouped
// in place (regroup_q8_in_place) has only `groups`: the row-group kernels read it, and
// every reader of `data` refuses it (require_data). One layout serves both ISAs: AVX2 reads a 64-byte chunk as two
// ymm and turns Q8_0's q + 128 back into q with one xor per ymm
// (kernels/cpu/gemm_q8_groups_avx2.cpp).
#pragma once

#include <cstdint>

#include "kernels/weights.h"

namespace troupe::kernels {

constexpr int64_t kGroupRows = 16;

// Bytes of one row group's block (544, 288 or 272), and of the whole regrouped matrix.
int64_t q8_group_block_bytes(WeightFormat f);
int64_t q8_row_groups_bytes(const WeightView& w);

// Writes w's regrouped copy (q8_row_groups_bytes(w) bytes) to out. w: Q8_0 or Q4_0 in
// the GGUF layout, or FP4 (codes and scales as kernels/weights.h stores them).
void pack_q8_row_groups(const WeightView& w, uint8_t* out);

// Rewrites w's GGUF bytes (data == w.data, writable; w.rows a multiple of 16) as its row
// groups, in place (Q8_0 / Q4_0: FP4 keeps its scales apart, so its groups never fit its
// codes' bytes): the 16 GGUF rows of group g occupy exactly the group's bytes, so each
// group is packed through a buffer of one group and copied over its own rows. Returns
// data, now the groups; the matrix then has no GGUF rows, so its view is groups = data,
// data = null (a loader keeping one copy of the matrix, model/llama_weights.cpp).
const uint8_t* regroup_q8_in_place(const WeightView& w, uint8_t* data);

// Whether a view has its bytes: `data`, or only the row groups of a matrix regrouped in
// place (then only the row-group kernels can read it).
inline bool has_bytes(const WeightView& w) { return w.data != nullptr || w.groups != nullptr; }
// Fails (troupe::Error naming `who`) for a matrix with groups but no `data`: the check of
// every reader of GGUF blocks.
void require_data(const WeightView& w, const char* who);

// Whether the GEMM this process runs now reads row groups (AVX-512 VNNI or AVX2 on the
// active CPU path, so TROUPE_CPU=portable says no): a loader regroups its Q8_0 / Q4_0
// matrices only then.
bool q8_row_groups_used();

// The view of rows [r0, r0 + n) of a regrouped matrix's groups: r0 a multiple of 16.
inline const uint8_t* q8_row_groups_at(const WeightView& w, int64_t r0) {
  return w.groups + (r0 / kGroupRows) * (w.cols / 32) * q8_group_block_bytes(w.format);
}

}  // namespace troupe::kernels

// The row layout of one forward call: every new token of every sequence is one row;
// rows of a sequence are contiguous and in position order.
//
//   rows:  | seq 0: p=P0 .. E0-1 | seq 1: p=P1 .. E1-1 | ...
//   row r -> (seq[r], pos[r]);  seq s -> rows [begin[s], begin[s+1])
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "kernels/scratch.h"
#include "model/forward.h"

namespace troupe::model {

using kernels::scratch_vector;  // a forward pass's buffers (no allocation in steady decode)

struct Batch {
  int64_t rows = 0;
  scratch_vector<int32_t> seq;       // [rows] sequence of each row
  scratch_vector<int64_t> pos;       // [rows] absolute position of each row
  scratch_vector<int32_t> token;     // [rows]
  scratch_vector<int64_t> begin;     // [seqs + 1] first row of each sequence
  scratch_vector<KvStore*> states;   // [seqs]
  // [seqs] or empty: window rows of positions below this are not stored in the ring
  // (layer Ne under bounded replay stores only [P, E) and the tail, MODEL.md §6.2).
  scratch_vector<int64_t> store_window_from;
  const TraceFn* trace = nullptr;
  // The MoE experts' GEMM precision (ForwardOptions; F32 unless the caller opted in).
  kernels::GemmPrecision expert_precision = kernels::GemmPrecision::F32;

  int64_t seqs() const { return static_cast<int64_t>(states.size()); }
  int64_t rows_of(int64_t s) const { return begin[s + 1] - begin[s]; }
  int64_t chunk_start(int64_t s) const { return pos[begin[s]]; }  // P of sequence s (rows_of > 0)

  // The batch of the given rows (ascending), same sequences and states.
  Batch subset(const scratch_vector<int64_t>& rows_kept) const;

  // Records a [rows, n] intermediate through the trace hook (no-op without one).
  void record(const char* name, int64_t layer, const float* data, int64_t n) const;
  void record_ints(const char* name, int64_t layer, const int32_t* data, int64_t n) const;
};

}  // namespace troupe::model

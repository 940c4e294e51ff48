// Rolling back the rejected tail of a speculative verify step in one request's slot,
// without copying blocks (docs/dspark.md "Paged rollback"):
//
//   before the forward:  StepUndo undo(storage, slot, start, end);   // positions [start, end)
//                        seq.keep_closed_groups(&undo);
//   after it:            undo.rollback(accepted_end);    // state of tokens [0, accepted_end)
//
//   SWA rings, F ring:   the ring slots of [start, end) are saved (<= end - start rows per
//                        layer); those of rejected positions get their old rows back
//   compressor carry:    a group closed inside the step is kept (its v/s rows), so the
//                        group open at accepted_end is reopened with its first rows
//   global rows:         untouched; rows past accepted_end's complete groups are not read
//                        (PagedSequence counts kv_length / r) and get rewritten
//
// Every row of an accepted position was computed from accepted positions only (causal
// attention, per-row dense work), so the result is the state an honest run has. An
// executor keeps its StepUndos across steps and reset()s them, so their buffers are
// reused (no allocation per speculative step once warm).
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/kv_cache/paged_kv.h"

namespace troupe::runtime {

class StepUndo {
 public:
  // Saves what a step writing positions [start, end) overwrites; end - start <= window.
  StepUndo(PagedKvStorage& storage, int32_t slot, int64_t start, int64_t end);

  // The same for another step (any slot of the same storage), reusing the buffers.
  void reset(int32_t slot, int64_t start, int64_t end);

  // PagedSequence::close_group: layer's group starting at group_start closed in the step.
  void keep_closed_group(int64_t layer, int64_t group_start, const std::vector<float>& v,
                         const std::vector<float>& s);

  // The slot as after tokens [0, accepted_end), start < accepted_end <= end.
  void rollback(int64_t accepted_end);

 private:
  void reopen_group(int64_t layer, int64_t r, int64_t accepted_end);

  struct ClosedGroup {
    int64_t layer = 0, start = 0;
    std::vector<float> v, s;  // the closed group's v and s rows [r, D]
  };

  PagedKvStorage& storage_;
  int32_t slot_ = -1;
  int64_t start_ = 0, end_ = 0;
  // Ring slot of position start + i before the step: window rows [L][end - start][row
  // bytes] and the positions they held [L][end - start]; the F ring's likewise.
  std::vector<uint8_t> window_rows_;
  std::vector<int64_t> window_pos_;
  std::vector<float> feature_rows_;
  std::vector<int64_t> feature_pos_;
  std::vector<ClosedGroup> closed_;  // the first num_closed_ are this step's
  size_t num_closed_ = 0;
};

}  // namespace troupe::runtime

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
// attention, per-row dense work), so the result is the state an honest run has.
#pragma once

#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "runtime/kv_cache/paged_kv.h"

namespace troupe::runtime {

class StepUndo {
 public:
  // Saves what a step writing positions [start, end) overwrites; end - start <= window.
  StepUndo(PagedKvStorage& storage, int32_t slot, int64_t start, int64_t end);

  // PagedSequence::close_group: layer's group starting at group_start closed in the step.
  void keep_closed_group(int64_t layer, int64_t group_start, const std::vector<float>& v,
                         const std::vector<float>& s);

  // The slot as after tokens [0, accepted_end), start < accepted_end <= end.
  void rollback(int64_t accepted_end);

 private:
  void reopen_group(int64_t layer, int64_t r, int64_t accepted_end);

  struct SavedRow {
    int64_t pos;  // the position the ring slot held before the step
    std::vector<uint8_t> bytes;
  };

  PagedKvStorage& storage_;
  int32_t slot_;
  int64_t start_, end_;
  std::vector<std::vector<SavedRow>> window_;  // [L][end - start] ring slot of start + i
  std::vector<SavedRow> features_;             // [end - start] or empty
  // (layer, group start) -> the closed group's v and s rows [r, D]
  std::map<std::pair<int64_t, int64_t>, std::pair<std::vector<float>, std::vector<float>>> closed_;
};

}  // namespace troupe::runtime

// DSpark speculative decoding on a contiguous SequenceState (MODEL.md §8): draft
// d_1..d_k after the bonus token, verify [bonus, d_1..d_k] in one target forward, accept
// the longest prefix the target's argmax agrees with, emit the target's next token, and
// roll the state back to the last accepted token.
//
//   before:  tokens [0, a]            anchor a, bonus b = tok[a+1] (not yet in the state)
//   verify:  [b, d_1 .. d_k] at positions a+1 .. a+1+k  ->  P_0 .. P_k
//   accept:  m = longest prefix with d_i == argmax P_{i-1};  emit d_1..d_m, argmax P_m
//   after:   tokens [0, a+1+m]        next anchor a+1+m, next bonus argmax P_m
//
// Rollback (CHOSEN, docs/model-notes.md): a StepSnapshot taken before the verify forward
// restores the state exactly (ring slots the step overwrote, global rows, compressor
// carry, feature ring, length); when m < k the accepted [b, d_1..d_m] are then run
// again, because the compressor carry after an accepted token is not in any snapshot.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "model/dspark_draft.h"
#include "model/forward.h"
#include "model/state.h"

namespace troupe::model {

// What a step of n new tokens may change in a SequenceState, saved before the step.
class StepSnapshot {
 public:
  StepSnapshot(const SequenceState& st, int64_t n_new);
  // Puts st back exactly as it was when the snapshot was taken.
  void restore(SequenceState& st) const;

 private:
  struct Slot {
    int64_t slot, pos;
    std::vector<uint8_t> bytes;
  };
  int64_t length_ = 0;
  std::vector<size_t> ckv_bytes_, ikey_bytes_;         // [L]
  std::vector<std::vector<float>> carry_v_, carry_s_;  // [L]
  std::vector<std::vector<Slot>> window_;              // [L][slots the step writes]
  std::vector<Slot> features_;                         // feature-ring slots (f32 bytes)
};

struct SpeculativeStats {
  int64_t steps = 0;     // verify forwards
  int64_t drafted = 0;   // draft tokens proposed
  int64_t accepted = 0;  // draft tokens accepted
  int64_t emitted = 0;   // tokens emitted by verify steps (accepted + one per step)
  double tokens_per_step() const { return steps ? double(emitted) / double(steps) : 0.0; }
};

struct SpeculativeResult {
  std::vector<int32_t> tokens;  // [n_tokens] the greedy continuation
  SpeculativeStats stats;
};

// Test hook: may rewrite the drafts of a step before verification (same length or shorter).
using DraftOverride = std::function<void(std::vector<int32_t>& drafts)>;

// Greedy generation of n_tokens after `prompt` (appended to `state`, which gains feature
// keeping if it lacks it). `forward` must have the draft weights. The tokens equal plain
// greedy decoding of the target (verification is exact).
SpeculativeResult speculative_greedy(const Forward& forward, const DsparkDraft& draft,
                                     SequenceState& state, std::span<const int32_t> prompt,
                                     int64_t n_tokens, const DraftOverride& override = nullptr);

}  // namespace troupe::model

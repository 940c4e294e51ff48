// DSpark target features (MODEL.md §8) captured during a target forward pass:
//
//   Z_l[p] = Σ_s pre_s X_s after target layer l (pre = that layer's f_pre)   (CHOSEN, §8)
//   F[p]   = RMSNorm(main_proj · concat(Z_l[p] for l in dspark_target_layer_ids), main_norm)
//
// for the rows that run every layer, stored into the feature ring of each sequence whose
// state holds one (KvStore::features()). Inactive (no work, no memory) when none does.
#pragma once

#include <cstdint>
#include <vector>

#include "model/batch.h"
#include "model/config.h"
#include "model/weights.h"

namespace troupe::model {

class FeatureCapture {
 public:
  // Active iff some state of the batch has a feature ring; then `dspark` must be given.
  FeatureCapture(const ModelConfig& c, const DsparkWeights* dspark, const Batch& b);

  bool active() const { return active_; }
  // After layer l of the target: X [rows, hc, H], pre [rows, hc] of the batch's rows.
  void after_layer(int64_t layer, const float* X, const float* pre, int64_t rows);
  // The batch shrank to rows `kept` (ascending; bounded replay, §6).
  void keep_rows(const scratch_vector<int64_t>& kept);
  // F of every row of b (the rows that ran every layer) into the sequences' rings.
  void store(const Batch& b);

 private:
  const ModelConfig& c_;
  const DsparkWeights* w_ = nullptr;
  bool active_ = false;
  int64_t width_ = 0;     // n_t·H
  scratch_vector<float> z_;  // [rows, n_t·H] concat of Z_l in dspark_target_layer_ids order
};

}  // namespace troupe::model

#include "model/dspark_features.h"

#include <algorithm>

#include "kernels/check.h"
#include "model/hc.h"
#include "model/op_profile.h"
#include "model/ops.h"

namespace troupe::model {

FeatureCapture::FeatureCapture(const ModelConfig& c, const DsparkWeights* dspark, const Batch& b)
    : c_(c), w_(dspark) {
  for (KvStore* s : b.states) active_ = active_ || s->features() != nullptr;
  if (!active_) return;
  TROUPE_CHECK(w_ != nullptr,
               "forward: a state keeps DSpark features but the Forward has no draft weights");
  width_ = static_cast<int64_t>(c.dspark_target_layer_ids.size()) * c.hidden_size;
  z_.assign(b.rows * width_, 0.0f);
}

void FeatureCapture::after_layer(int64_t layer, const float* X, const float* pre, int64_t rows) {
  if (!active_ || rows == 0) return;
  const auto& ids = c_.dspark_target_layer_ids;
  const int64_t H = c_.hidden_size;
  for (size_t t = 0; t < ids.size(); ++t) {
    if (ids[t] != layer) continue;
    scratch_vector<float> z(rows * H);
    hc_premix(c_, X, pre, rows, z.data());
    for (int64_t r = 0; r < rows; ++r) std::copy_n(&z[r * H], H, &z_[r * width_ + t * H]);
  }
}

void FeatureCapture::keep_rows(const scratch_vector<int64_t>& kept) {
  if (!active_) return;
  for (size_t i = 0; i < kept.size(); ++i)
    std::copy_n(&z_[kept[i] * width_], width_, &z_[i * width_]);
  z_.resize(kept.size() * width_);
}

void FeatureCapture::store(const Batch& b) {
  if (!active_ || b.rows == 0) return;
  const ScopedOp op(Op::DraftFeatures);
  const int64_t H = c_.hidden_size;
  scratch_vector<float> f = linear(z_.data(), b.rows, w_->main_proj);
  rms_norm_rows(f.data(), b.rows, H, w_->main_norm, c_.rms_norm_eps);
  for (int64_t r = 0; r < b.rows; ++r)
    if (FeatureRing* ring = b.states[b.seq[r]]->features()) ring->put(b.pos[r], &f[r * H]);
}

}  // namespace troupe::model

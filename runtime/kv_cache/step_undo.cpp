#include "runtime/kv_cache/step_undo.h"

#include <algorithm>
#include <cstring>

#include "kernels/check.h"

namespace troupe::runtime {

StepUndo::StepUndo(PagedKvStorage& storage, int32_t slot, int64_t start, int64_t end)
    : storage_(storage), slot_(slot), start_(start), end_(end) {
  const int64_t W = storage.window();
  TROUPE_CHECK(start < end && end - start <= W, "StepUndo: step [", start, ", ", end,
               ") must be non-empty and fit the window ", W);
  const int64_t row = storage.rows().window.bytes();
  window_.resize(storage.layers());
  for (int64_t l = 0; l < storage.layers(); ++l) {
    for (int64_t p = start; p < end; ++p) {
      const uint8_t* b = storage.window_row(slot, l, p % W);
      window_[l].push_back({storage.window_pos(slot, l, p % W), {b, b + row}});
    }
  }
  const model::FeatureRing* F = storage.features(slot);
  if (F == nullptr) return;
  for (int64_t p = start; p < end; ++p) {
    const int64_t s = p % F->slots();
    const auto* b = reinterpret_cast<const uint8_t*>(&F->rows[s * F->width]);
    features_.push_back({F->pos[s], {b, b + F->width * int64_t(sizeof(float))}});
  }
}

void StepUndo::keep_closed_group(int64_t layer, int64_t group_start, const std::vector<float>& v,
                                 const std::vector<float>& s) {
  closed_[{layer, group_start}] = {v, s};
}

void StepUndo::rollback(int64_t accepted_end) {
  TROUPE_CHECK(accepted_end > start_ && accepted_end <= end_, "StepUndo: accepted end ",
               accepted_end, " outside (", start_, ", ", end_, "]");
  const int64_t W = storage_.window();
  const int64_t row = storage_.rows().window.bytes();
  for (int64_t l = 0; l < storage_.layers(); ++l) {
    for (int64_t p = accepted_end; p < end_; ++p) {
      const SavedRow& saved = window_[l][p - start_];
      std::memcpy(storage_.window_row(slot_, l, p % W), saved.bytes.data(), row);
      storage_.window_pos(slot_, l, p % W) = saved.pos;
    }
    const int64_t r = storage_.ratio(l);
    if (r > 1 && storage_.is_full_layer(l)) reopen_group(l, r, accepted_end);
  }
  model::FeatureRing* F = storage_.features(slot_);
  if (F == nullptr) return;
  for (int64_t p = accepted_end; p < end_; ++p) {
    const SavedRow& saved = features_[p - start_];
    const int64_t s = p % F->slots();
    std::memcpy(&F->rows[s * F->width], saved.bytes.data(), saved.bytes.size());
    F->pos[s] = saved.pos;
  }
}

// Layer l's carry after accepted_end holds the v/s rows of [g0, accepted_end), g0 its group
// start: the first rows of the group open at end_ when that is the same group, else of
// the one closed inside the step.
void StepUndo::reopen_group(int64_t l, int64_t r, int64_t accepted_end) {
  std::vector<float>& cv = storage_.carry_v(slot_, l);
  std::vector<float>& cs = storage_.carry_s(slot_, l);
  const int64_t g0 = accepted_end / r * r, g_end = end_ / r * r;
  int64_t rows = end_ - g_end;  // rows in cv now
  if (g0 != g_end) {
    const auto closed = closed_.find({l, g0});
    TROUPE_CHECK(closed != closed_.end(), "StepUndo: layer ", l, "'s group at ", g0,
                 " closed outside the step");
    cv = closed->second.first;
    cs = closed->second.second;
    rows = r;
  }
  const size_t keep = rows == 0 ? 0 : cv.size() / size_t(rows) * size_t(accepted_end - g0);
  cv.resize(keep);
  cs.resize(keep);
}

}  // namespace troupe::runtime

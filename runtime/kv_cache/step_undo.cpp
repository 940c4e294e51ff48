#include "runtime/kv_cache/step_undo.h"

#include <algorithm>
#include <cstring>

#include "kernels/check.h"

namespace troupe::runtime {

StepUndo::StepUndo(PagedKvStorage& storage, int32_t slot, int64_t start, int64_t end)
    : storage_(storage) {
  reset(slot, start, end);
}

void StepUndo::reset(int32_t slot, int64_t start, int64_t end) {
  const int64_t W = storage_.window();
  TROUPE_CHECK(start < end && end - start <= W, "StepUndo: step [", start, ", ", end,
               ") must be non-empty and fit the window ", W);
  slot_ = slot;
  start_ = start;
  end_ = end;
  num_closed_ = 0;
  const int64_t n = end - start, row = storage_.rows().window.bytes(), L = storage_.layers();
  window_rows_.resize(size_t(L * n * row));
  window_pos_.resize(size_t(L * n));
  for (int64_t l = 0; l < L; ++l) {
    for (int64_t p = start; p < end; ++p) {
      const int64_t i = l * n + (p - start);
      std::memcpy(&window_rows_[size_t(i * row)], storage_.window_row(slot, l, p % W), size_t(row));
      window_pos_[size_t(i)] = storage_.window_pos(slot, l, p % W);
    }
  }
  const model::FeatureRing* F = storage_.features(slot);
  feature_rows_.clear();
  feature_pos_.clear();
  if (F == nullptr) return;
  feature_rows_.resize(size_t(n * F->width));
  feature_pos_.resize(size_t(n));
  for (int64_t p = start; p < end; ++p) {
    const int64_t s = p % F->slots();
    std::copy_n(&F->rows[s * F->width], F->width, &feature_rows_[size_t((p - start) * F->width)]);
    feature_pos_[size_t(p - start)] = F->pos[s];
  }
}

void StepUndo::keep_closed_group(int64_t layer, int64_t group_start, const std::vector<float>& v,
                                 const std::vector<float>& s) {
  if (num_closed_ == closed_.size()) closed_.emplace_back();
  ClosedGroup& g = closed_[num_closed_++];
  g.layer = layer;
  g.start = group_start;
  g.v.assign(v.begin(), v.end());
  g.s.assign(s.begin(), s.end());
}

void StepUndo::rollback(int64_t accepted_end) {
  TROUPE_CHECK(accepted_end > start_ && accepted_end <= end_, "StepUndo: accepted end ",
               accepted_end, " outside (", start_, ", ", end_, "]");
  const int64_t W = storage_.window();
  const int64_t n = end_ - start_, row = storage_.rows().window.bytes();
  for (int64_t l = 0; l < storage_.layers(); ++l) {
    for (int64_t p = accepted_end; p < end_; ++p) {
      const int64_t i = l * n + (p - start_);
      std::memcpy(storage_.window_row(slot_, l, p % W), &window_rows_[size_t(i * row)], size_t(row));
      storage_.window_pos(slot_, l, p % W) = window_pos_[size_t(i)];
    }
    const int64_t r = storage_.ratio(l);
    if (r > 1 && storage_.is_full_layer(l)) reopen_group(l, r, accepted_end);
  }
  model::FeatureRing* F = storage_.features(slot_);
  if (F == nullptr) return;
  for (int64_t p = accepted_end; p < end_; ++p) {
    const int64_t s = p % F->slots();
    std::copy_n(&feature_rows_[size_t((p - start_) * F->width)], F->width, &F->rows[s * F->width]);
    F->pos[s] = feature_pos_[size_t(p - start_)];
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
    const auto closed = std::find_if(closed_.begin(), closed_.begin() + ptrdiff_t(num_closed_),
                                     [&](const ClosedGroup& g) { return g.layer == l && g.start == g0; });
    TROUPE_CHECK(closed != closed_.begin() + ptrdiff_t(num_closed_), "StepUndo: layer ", l,
                 "'s group at ", g0, " closed outside the step");
    cv.assign(closed->v.begin(), closed->v.end());
    cs.assign(closed->s.begin(), closed->s.end());
    rows = r;
  }
  const size_t keep = rows == 0 ? 0 : cv.size() / size_t(rows) * size_t(accepted_end - g0);
  cv.resize(keep);
  cs.resize(keep);
}

}  // namespace troupe::runtime

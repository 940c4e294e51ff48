#include "runtime/speculative/draft_length.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "kernels/check.h"

namespace troupe::runtime {

StepCostTable::StepCostTable(int64_t max_batch, int64_t kmax, double weight)
    : max_batch_(max_batch), kmax_(kmax), weight_(weight) {
  TROUPE_CHECK(max_batch >= 1 && kmax >= 0, "StepCostTable: max_batch ", max_batch, ", kmax ",
               kmax);
  TROUPE_CHECK(weight > 0 && weight <= 1, "StepCostTable: weight must be in (0, 1], got ", weight);
  cells_.resize(size_t(max_batch * (kmax + 1)));
}

int64_t StepCostTable::clamp(int64_t batch) const {
  return std::clamp<int64_t>(batch, 1, max_batch_);
}

size_t StepCostTable::index(int64_t batch, int64_t k) const {
  return size_t((clamp(batch) - 1) * (kmax_ + 1) + k);
}

const StepCostTable::Cell& StepCostTable::cell(int64_t batch, int64_t k) const {
  return cells_[index(batch, k)];
}

void StepCostTable::observe(const StepTimeSample& s) {
  if (s.k < 0 || s.k > kmax_ || !(s.seconds > 0)) return;
  Cell& c = cells_[index(s.batch, s.k)];
  if (c.count == 0) {
    c.seconds = s.seconds;
  } else if (c.count == 1) {
    c.seconds = std::min(c.seconds, s.seconds);
  } else {
    c.seconds = (1 - weight_) * c.seconds + weight_ * s.seconds;
  }
  c.count += 1;
}

void StepCostTable::seed(const StepTimeSample& s) {
  if (s.k < 0 || s.k > kmax_ || !(s.seconds > 0)) return;
  cells_[index(s.batch, s.k)] = {s.seconds, 2};
}

std::vector<StepTimeSample> StepCostTable::cells() const {
  std::vector<StepTimeSample> out;
  for (int64_t b = 1; b <= max_batch_; ++b)
    for (int64_t k = 0; k <= kmax_; ++k)
      if (cell(b, k).count > 0) out.push_back({b, k, cell(b, k).seconds});
  return out;
}

bool StepCostTable::measured(int64_t batch, int64_t k) const {
  return k >= 0 && k <= kmax_ && cell(batch, k).count > 0;
}

const StepCostTable::Cell* StepCostTable::estimate_cell(int64_t batch, int64_t k) const {
  if (k < 0 || k > kmax_) return nullptr;
  const int64_t b = clamp(batch);
  // Nearest first, smaller batch sizes before larger at equal distance.
  for (int64_t d = 0; d <= b; ++d)
    for (const int64_t other : {b - d, b + d}) {
      if (other < 1 || other > max_batch_ || 2 * other < b || other > 2 * b) continue;
      if (cell(other, k).count > 0) return &cell(other, k);
    }
  return nullptr;
}

std::optional<double> StepCostTable::estimate(int64_t batch, int64_t k) const {
  const Cell* c = estimate_cell(batch, k);
  if (c == nullptr) return std::nullopt;
  return c->seconds;
}

bool StepCostTable::single_sample(int64_t batch, int64_t k) const {
  const Cell* c = estimate_cell(batch, k);
  return c != nullptr && c->count == 1;
}

AcceptanceTracker::AcceptanceTracker(int64_t kmax, double decay)
    : decay_(decay), reached_(size_t(kmax), 0.0), accepted_(size_t(kmax), 0.0) {}

void AcceptanceTracker::observe(std::span<const std::pair<int64_t, int64_t>> drafts) {
  for (const auto& [drafted, accepted] : drafts) {
    // Position j (1-based) was verified if every draft before it was accepted.
    const int64_t verified = std::min<int64_t>(drafted, accepted + 1);
    for (int64_t j = 0; j < verified && j < static_cast<int64_t>(reached_.size()); ++j) {
      reached_[size_t(j)] = decay_ * reached_[size_t(j)] + 1;
      accepted_[size_t(j)] = decay_ * accepted_[size_t(j)] + (j < accepted ? 1 : 0);
    }
  }
}

double AcceptanceTracker::rate(int64_t position) const {
  const size_t j = size_t(position - 1);
  return (accepted_.at(j) + 0.5) / (reached_.at(j) + 1.0);  // prior: one half of a draft
}

double AcceptanceTracker::upper_rate(int64_t position) const {
  const size_t j = size_t(position - 1);
  const double n = reached_.at(j);
  if (n <= 0) return 1.0;
  const double p = std::clamp(accepted_[j] / n, 0.0, 1.0);
  return std::min(1.0, (p + 0.5 / n + std::sqrt(p * (1 - p) / n + 0.25 / (n * n))) / (1 + 1 / n));
}

double AcceptanceTracker::expected_tokens(int64_t k, bool optimistic) const {
  double e = 1, run = 1;
  for (int64_t j = 1; j <= k && j <= static_cast<int64_t>(reached_.size()); ++j) {
    run *= optimistic ? upper_rate(j) : rate(j);
    e += run;
  }
  return e;
}

DraftLengthChooser::DraftLengthChooser(int64_t kmax, int64_t max_batch,
                                       std::span<const StepTimeSample> seed)
    : kmax_(kmax), table_(max_batch, kmax), acceptance_(kmax) {
  for (const StepTimeSample& s : seed) table_.seed(s);
}

std::optional<double> DraftLengthChooser::expected_rate(int64_t batch, int64_t k,
                                                        bool optimistic) const {
  const std::optional<double> t = table_.estimate(batch, k);
  if (!t) return std::nullopt;
  return double(std::max<int64_t>(1, batch)) * acceptance_.expected_tokens(k, optimistic) / *t;
}

int64_t DraftLengthChooser::best(int64_t batch, bool optimistic) const {
  int64_t best = 0;
  double best_rate = -1;
  for (int64_t k = 0; k <= kmax_; ++k) {
    const std::optional<double> r = expected_rate(batch, k, optimistic);
    if (r && *r > best_rate) best = k, best_rate = *r;
  }
  return best;
}

std::optional<int64_t> DraftLengthChooser::uncalibrated(int64_t batch) const {
  if (!table_.estimate(batch, kmax_)) return kmax_;  // drafting's cost and its acceptance
  for (int64_t k = 0; k < kmax_; ++k)
    if (!table_.estimate(batch, k)) return k;
  // A second sample where the first, were it a slow one, could hide the best k (the
  // ranking only once some time rests on one sample: not on every serving step).
  std::optional<double> top;
  for (int64_t k = kmax_; k >= 0; --k) {
    if (!table_.single_sample(batch, k)) continue;
    if (!top) top = *expected_rate(batch, best(batch, true), true);
    if (*expected_rate(batch, k, true) >= *top / 2) return k;
  }
  return std::nullopt;
}

// Every other k in turn, so each cell's time (a single calibration step may have been a
// noisy one) and the acceptance of every position stay current.
int64_t DraftLengthChooser::probe_k(int64_t best) const {
  if (kmax_ == 0) return 0;
  return (best + 1 + (probes_ - 1) % kmax_) % (kmax_ + 1);
}

int64_t DraftLengthChooser::choose(int64_t batch) {
  if (const std::optional<int64_t> k = uncalibrated(batch)) return *k;
  if (pending_probe_ >= 0) return pending_probe_;
  const int64_t b = best(batch, /*optimistic=*/true);
  if (++steps_since_probe_ < probe_interval_) return b;
  steps_since_probe_ = 0;
  // Probes double their interval while the chosen k stays put; a change starts over.
  probe_interval_ = b == last_best_ ? std::min(kLastProbe, 2 * probe_interval_) : kFirstProbe;
  last_best_ = b;
  probes_ += 1;
  return pending_probe_ = probe_k(b);
}

void DraftLengthChooser::observe(const StepOutcome& step) {
  if (step.batch > 0 && step.limit == pending_probe_) pending_probe_ = -1;
  acceptance_.observe(step.drafts);
  if (step.decode_only && step.batch > 0) table_.observe({step.batch, step.k, step.seconds});
}

}  // namespace troupe::runtime

// The online cost table (issue 13, after DeepInfer / SGLang): per decode step, the number
// of draft tokens k in 0..kmax that maximises expected tokens per second, from measured
// step times by (batch size, k) and the running acceptance rate. Pure logic: no model,
// no clock; the StepPipeline feeds it each step's plan and wall time.
//
//   tokens/s (b, k) = b * E(k) / T(b, k)
//   E(k)  = 1 + sum_{j=1..k} a_1 * ... * a_j    expected tokens per request per step
//   a_j   = P(draft j accepted | drafts 1..j-1 accepted), counted with decay
//   T(b, k) measured step seconds (EWMA per cell; seeded from a bench run, or calibrated:
//           the first steps at a new batch size try every k once)
//
// k = 0 is a plain decode (E = 1), so when drafts are never accepted the chooser settles
// on 0; it still probes the other k in turn now and then (at doubling intervals, 16 to 512
// steps, while the best k stays put) so that a draft which starts to pay, or a time that
// changed, is noticed. Calibration and probing are the "cost of noticing".
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

namespace troupe::runtime {

// One measured (or benchmarked) step: `batch` decodes of up to k drafts took `seconds`.
struct StepTimeSample {
  int64_t batch = 1;
  int64_t k = 0;
  double seconds = 0;
};

// Step seconds by (batch size 1..max_batch, k 0..kmax): an EWMA per cell.
class StepCostTable {
 public:
  StepCostTable(int64_t max_batch, int64_t kmax, double weight = 0.25);

  void observe(const StepTimeSample& s);  // batch clamped to [1, max_batch]
  bool measured(int64_t batch, int64_t k) const;
  // The cell's time; unmeasured: the nearest measured batch size within a factor of two
  // (step time changes slowly with the batch), else nothing.
  std::optional<double> estimate(int64_t batch, int64_t k) const;

  int64_t max_batch() const { return max_batch_; }
  int64_t kmax() const { return kmax_; }

 private:
  struct Cell {
    double seconds = 0;
    int64_t count = 0;
  };
  size_t index(int64_t batch, int64_t k) const;
  const Cell& cell(int64_t batch, int64_t k) const;
  int64_t clamp(int64_t batch) const;

  int64_t max_batch_, kmax_;
  double weight_;
  std::vector<Cell> cells_;  // [max_batch][kmax + 1]
};

// Per-position conditional acceptance with exponential forgetting; prior 1/2.
class AcceptanceTracker {
 public:
  explicit AcceptanceTracker(int64_t kmax, double decay = 0.95);

  // One step's verified drafts: for each, (drafted k', accepted m <= k').
  void observe(std::span<const std::pair<int64_t, int64_t>> drafts);
  double rate(int64_t position) const;      // a_j, position 1..kmax
  double expected_tokens(int64_t k) const;  // E(k) above

 private:
  double decay_;
  std::vector<double> reached_, accepted_;  // [kmax] at positions 1..kmax
};

// What a finished step tells the chooser.
struct StepOutcome {
  int64_t k = 0;            // the step's draft limit
  int64_t batch = 0;        // its decode chunks
  bool decode_only = true;  // no prefill or fork: the time is the decodes' own
  double seconds = 0;
  std::vector<std::pair<int64_t, int64_t>> drafts;  // (drafted, accepted) per speculating chunk
  int64_t limit = 0;  // the plan's draft limit: what choose() said for it
};

class DraftLengthChooser {
 public:
  // seed: step times of a bench run (cells it fills need no calibration).
  DraftLengthChooser(int64_t kmax, int64_t max_batch, std::span<const StepTimeSample> seed = {});

  // k for the next step of about `batch` decodes.
  int64_t choose(int64_t batch);
  void observe(const StepOutcome& step);

  // Expected tokens/s at (batch, k); nothing while T(batch, k) is unknown.
  std::optional<double> expected_rate(int64_t batch, int64_t k) const;
  // The argmax of expected_rate over the k with a time (0 when none has one).
  int64_t best(int64_t batch) const;

  const StepCostTable& table() const { return table_; }
  const AcceptanceTracker& acceptance() const { return acceptance_; }

  static constexpr int64_t kFirstProbe = 16;  // steps between probes, at first
  static constexpr int64_t kLastProbe = 512;  // at most

 private:
  std::optional<int64_t> uncalibrated(int64_t batch) const;  // a k with no time, kmax first
  int64_t probe_k(int64_t best) const;

  int64_t kmax_;
  StepCostTable table_;
  AcceptanceTracker acceptance_;
  int64_t steps_since_probe_ = 0;
  int64_t probe_interval_ = kFirstProbe;
  int64_t last_best_ = -1;
  int64_t probes_ = 0;
  // A probe chosen but not run yet (-1: none): an async plan may come out empty (its
  // requests wait for the step in flight), so the probe is asked for until a step of
  // decodes ran with it.
  int64_t pending_probe_ = -1;
};

}  // namespace troupe::runtime

// The online cost table (issue 13, after DeepInfer / SGLang): per decode step, the number
// of draft tokens k in 0..kmax that maximises expected tokens per second, from measured
// step times by (batch size, k) and the running acceptance rate. Pure logic: no model,
// no clock; the StepPipeline feeds it each step's plan and wall time.
//
//   tokens/s (b, k) = b * E(k) / T(b, k)
//   E(k)  = 1 + sum_{j=1..k} a_1 * ... * a_j    expected tokens per request per step
//   a_j   = P(draft j accepted | drafts 1..j-1 accepted), counted with decay per
//           verified draft at position j
//   T(b, k) measured step seconds (per cell the smaller of its first two samples, then
//           an EWMA; seeded from a bench run, or calibrated: the first steps at a new
//           batch size try every k, and twice each k that could pay)
//
// A step of k drafts tells nothing about positions past k, and a plain step (k = 0)
// nothing at all, so a chooser that ranked k by the estimated rates alone stayed on a
// short k once an early estimate was low (with v41-small's batch-1 times and drafts
// accepted with p = 0.9, it ran k = 3 on 1 of 500 steps for most seeds: the 1/2 prior
// never let E(3) pay for T(1, 3)). So the choice ranks by an upper confidence bound on
// each rate (Wilson's, one standard deviation): a position with few verified drafts
// counts as promising until drafts there are seen, and the bound closes on the rate as
// they are. k = 0 is a plain decode (E = 1), so when drafts are never accepted the
// chooser settles on 0 after a few drafts; it still probes the other k in turn now and
// then (at doubling intervals, 16 to 512 steps, while the chosen k stays put) so that a
// draft which starts to pay, or a time that changed, is noticed. Calibration, the
// bound's first drafts and probing are the "cost of noticing".
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

// Step seconds by (batch size 1..max_batch, k 0..kmax). A cell's first sample is often a
// slow one (the first decode after a prefill, or a neighbour's burst: a step is only ever
// slowed), and the chooser runs a k that looks slow only when it probes, so one slow
// sample would hold a cell high for many probes under an EWMA alone (v41-small's batch-1
// times, p = 0.9, the first step 2.5x slow: k = 3, the best, on 1.8% of the steps;
// tests/runtime/draft_length_test.cpp). So a cell holds the smaller of its first two
// samples, then an EWMA from there; a seeded cell (a bench run's) counts as two.
class StepCostTable {
 public:
  StepCostTable(int64_t max_batch, int64_t kmax, double weight = 0.25);

  void observe(const StepTimeSample& s);  // batch clamped to [1, max_batch]
  void seed(const StepTimeSample& s);     // a trusted time: as two samples of it
  bool measured(int64_t batch, int64_t k) const;
  // The cell's time; unmeasured: the nearest measured batch size within a factor of two
  // (step time changes slowly with the batch), else nothing.
  std::optional<double> estimate(int64_t batch, int64_t k) const;
  // Whether the time estimate() gives rests on a single sample.
  bool single_sample(int64_t batch, int64_t k) const;

  // The measured cells, by batch then k: what a table file keeps (cost_table_file.h).
  std::vector<StepTimeSample> cells() const;

  int64_t max_batch() const { return max_batch_; }
  int64_t kmax() const { return kmax_; }

 private:
  struct Cell {
    double seconds = 0;
    int64_t count = 0;
  };
  size_t index(int64_t batch, int64_t k) const;
  const Cell& cell(int64_t batch, int64_t k) const;
  const Cell* estimate_cell(int64_t batch, int64_t k) const;  // the cell estimate() reads
  int64_t clamp(int64_t batch) const;

  int64_t max_batch_, kmax_;
  double weight_;
  std::vector<Cell> cells_;  // [max_batch][kmax + 1]
};

// Per-position conditional acceptance with exponential forgetting: each verified draft at
// a position discounts that position's earlier ones by `decay` (a window of about
// 1 / (1 - decay) drafts, whatever the batch; positions a step did not reach keep what
// they had). Prior: half a draft accepted of one.
class AcceptanceTracker {
 public:
  explicit AcceptanceTracker(int64_t kmax, double decay = 0.99);

  // One step's verified drafts: for each, (drafted k', accepted m <= k').
  void observe(std::span<const std::pair<int64_t, int64_t>> drafts);
  double rate(int64_t position) const;        // a_j, position 1..kmax
  double upper_rate(int64_t position) const;  // its Wilson upper bound (z = 1); 1 unseen
  // E(k) above, from the rates or (optimistic) from their upper bounds.
  double expected_tokens(int64_t k, bool optimistic = false) const;

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

  // Expected tokens/s at (batch, k), from the rates or their upper bounds; nothing while
  // T(batch, k) is unknown.
  std::optional<double> expected_rate(int64_t batch, int64_t k, bool optimistic = false) const;
  // The argmax of expected_rate over the k with a time (0 when none has one); choose()
  // runs the optimistic one.
  int64_t best(int64_t batch, bool optimistic = false) const;

  const StepCostTable& table() const { return table_; }
  const AcceptanceTracker& acceptance() const { return acceptance_; }

  static constexpr int64_t kFirstProbe = 16;  // steps between probes, at first
  static constexpr int64_t kLastProbe = 512;  // at most

 private:
  // A k with no time (kmax first), else one whose time is a single sample and whose
  // optimistic rate, on that time, is at least half the best one's; else nothing.
  std::optional<int64_t> uncalibrated(int64_t batch) const;
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

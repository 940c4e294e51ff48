#include "runtime/speculative/draft_step_summary.h"

#include <algorithm>

#include "kernels/check.h"

namespace troupe::runtime {

DraftStepSummary summarize(const StepOutcome& step, int64_t kmax, int64_t running) {
  DraftStepSummary s;
  s.limit = step.limit;
  s.decodes = step.batch;
  s.timed = step.decode_only;
  s.seconds = step.seconds;
  s.running = running;
  if (step.drafts.empty()) return s;
  const auto side = static_cast<size_t>(kmax + 1);
  s.verified.assign(side * side, 0);
  for (const auto& [drafted, accepted] : step.drafts) {
    TROUPE_CHECK(drafted >= 0 && drafted <= kmax && accepted >= 0 && accepted <= drafted,
                 "a draft of ", drafted, " tokens with ", accepted, " accepted (kmax ", kmax, ")");
    s.verified[size_t(drafted) * side + size_t(accepted)] += 1;
  }
  return s;
}

DraftStepSummary reduce_summaries(const DraftStepSummary& a, const DraftStepSummary& b) {
  TROUPE_CHECK(a.verified.empty() || b.verified.empty() || a.verified.size() == b.verified.size(),
               "draft histograms of ", a.verified.size(), " and ", b.verified.size(),
               " cells cannot be reduced together");
  DraftStepSummary r;
  r.limit = std::max(a.limit, b.limit);
  r.decodes = a.decodes + b.decodes;
  r.timed = a.timed && b.timed;
  r.seconds = std::max(a.seconds, b.seconds);
  r.running = a.running + b.running;
  r.verified = a.verified.empty() ? b.verified : a.verified;
  if (!a.verified.empty() && !b.verified.empty())
    for (size_t i = 0; i < r.verified.size(); ++i) r.verified[i] += b.verified[i];
  return r;
}

void group_outcome(const DraftStepSummary& s, int64_t kmax, StepOutcome& o) {
  o.k = 0;
  o.drafts.clear();
  o.limit = s.limit;
  o.batch = s.decodes;
  o.decode_only = s.timed;
  o.seconds = s.seconds;
  if (s.verified.empty()) return;
  const auto side = static_cast<size_t>(kmax + 1);
  TROUPE_CHECK(s.verified.size() == side * side, "a draft histogram of ", s.verified.size(),
               " cells for kmax ", kmax);
  for (size_t d = 0; d < side; ++d)
    for (size_t a = 0; a < side; ++a) {
      const int64_t n = s.verified[d * side + a];
      TROUPE_CHECK(n >= 0 && n <= kMaxGroupDrafts && (a <= d || n == 0), "a draft histogram count of ",
                   n, " for ", a, " of ", d, " drafts accepted");
      if (n > 0) o.k = std::max(o.k, static_cast<int64_t>(d));
      for (int64_t i = 0; i < n; ++i) o.drafts.emplace_back(int64_t(d), int64_t(a));
    }
}

}  // namespace troupe::runtime

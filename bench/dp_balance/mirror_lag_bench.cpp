#include "bench/dp_balance/mirror_lag_bench.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>

#include "bench/common/stats.h"
#include "kernels/check.h"
#include "runtime/dep/dep_engine.h"

namespace troupe::bench {

void MirrorLagConfig::validate() const {
  TROUPE_CHECK(ranks >= 1, "mirror-lag: ranks must be >= 1, got ", ranks);
  TROUPE_CHECK(requests >= 1, "mirror-lag: requests must be >= 1, got ", requests);
  TROUPE_CHECK(prompt_len >= 1, "mirror-lag: prompt length must be >= 1, got ", prompt_len);
  TROUPE_CHECK(max_tokens >= 1, "mirror-lag: max tokens must be >= 1, got ", max_tokens);
  for (const int64_t d : lags) TROUPE_CHECK(d >= 1, "mirror-lag: each lag must be >= 1, got ", d);
}

MirrorLagRun run_mirror_lag(const model::Forward& forward, const MirrorLagConfig& c,
                            int64_t lag) {
  c.validate();
  const model::ModelConfig& m = forward.config();
  runtime::DepConfig dep;
  dep.ranks = c.ranks;
  runtime::DepEngine engine(forward, nullptr, make_engine_config(m, c.engine, false), dep);

  std::vector<std::vector<int32_t>> prompts;
  for (int64_t i = 0; i < c.requests; ++i)
    prompts.push_back(random_tokens(c.prompt_len, m.vocab_size, c.seed + uint64_t(i)));

  MirrorLagRun run;
  run.lag = lag;
  run.outputs.resize(size_t(c.ranks * c.requests));
  std::vector<double> step_seconds;
  std::vector<int64_t> scheduled(size_t(c.ranks), 0);
  double balance_sum = 0;
  int64_t balance_steps = 0;
  int arrived = 0;   // ranks 0 .. arrived-1 have their copies
  int64_t clock = 0;  // lockstep steps so far: rank r's copies arrive at clock r x lag
  while (true) {
    for (; arrived < c.ranks && clock >= int64_t(arrived) * lag; ++arrived)
      for (int64_t i = 0; i < c.requests; ++i)
        engine.add_request_on(arrived, arrived * c.requests + i, prompts[size_t(i)],
                              greedy_params(c.max_tokens));
    if (!engine.has_unfinished()) {
      if (arrived == c.ranks) break;
      clock = int64_t(arrived) * lag;  // nothing runs until the next rank's copies arrive
      continue;
    }
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<runtime::RequestOutput> outs = engine.step();
    step_seconds.push_back(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    for (runtime::RequestOutput& o : outs) {
      check_output(o);
      auto& tokens = run.outputs[size_t(o.id)];
      tokens.insert(tokens.end(), o.new_tokens.begin(), o.new_tokens.end());
    }
    int64_t step_max = 0, step_sum = 0;
    for (int r = 0; r < c.ranks; ++r) {
      const int64_t now = engine.figures(r).scheduled_tokens;
      const int64_t t = now - scheduled[size_t(r)];
      scheduled[size_t(r)] = now;
      step_max = std::max(step_max, t);
      step_sum += t;
    }
    run.tokens += step_sum;
    // A step that only completed work planned earlier plans nothing new: no figure.
    if (step_max > 0) {
      balance_sum += double(step_sum) / c.ranks / double(step_max);
      ++balance_steps;
    }
    ++run.steps;
    ++clock;
  }
  for (int r = 0; r < c.ranks; ++r) run.idle_rank_steps += engine.dummy_steps(r);
  run.dp_balance = balance_steps ? balance_sum / double(balance_steps) : 1;
  for (double s : step_seconds) run.wall_s += s;
  if (!step_seconds.empty()) {
    run.step_p50_s = percentile(step_seconds, 0.50);
    run.step_p99_s = percentile(step_seconds, 0.99);
  }
  return run;
}

bool copies_agree(const MirrorLagConfig& c, const std::vector<MirrorLagRun>& runs) {
  if (runs.empty()) return true;
  for (const MirrorLagRun& run : runs)
    for (int r = 0; r < c.ranks; ++r)
      for (int64_t i = 0; i < c.requests; ++i)
        if (run.outputs[size_t(r * c.requests + i)] != runs[0].outputs[size_t(i)]) return false;
  return true;
}

void print_mirror_lag_report(const MirrorLagConfig& c, const std::vector<MirrorLagRun>& runs) {
  std::printf("%-10s %7s %10s %9s %11s %9s %11s %11s %9s %9s\n", "arrival", "steps", "idle-steps",
              "tokens", "dp-balance", "wall-ms", "p50-step-ms", "p99-step-ms", "tok/s",
              "vs-mirror");
  const double base = runs.empty() ? 0 : runs[0].wall_s;
  for (const MirrorLagRun& r : runs) {
    const std::string name = r.lag == 0 ? "mirror" : "lag " + std::to_string(r.lag);
    std::printf("%-10s %7lld %10lld %9lld %11.3f %9.1f %11.2f %11.2f %9.0f %8.2fx\n", name.c_str(),
                static_cast<long long>(r.steps), static_cast<long long>(r.idle_rank_steps),
                static_cast<long long>(r.tokens), r.dp_balance, r.wall_s * 1e3,
                r.step_p50_s * 1e3, r.step_p99_s * 1e3, r.tokens_per_s(),
                base > 0 ? r.wall_s / base : 0);
  }
  std::printf("\nidle-steps: rank-steps that ran a dummy step (no work, joined the MoE exchange); "
              "dp-balance: per step, mean rank tokens / max rank tokens, averaged; vs-mirror: wall "
              "time / mirror's\ncopies: every rank's copy of every request %s in every run\n",
              copies_agree(c, runs) ? "produced the same tokens" : "did NOT produce the same tokens");
}

}  // namespace troupe::bench

#include "bench/forward/dep_bench.h"

#include "bench/dp_sync/inproc_all_reduce.h"

#include <algorithm>
#include <barrier>
#include <cstdio>
#include <memory>
#include <random>
#include <thread>

#include "bench/common/stats.h"
#include "kernels/exec_context.h"
#include "kernels/parallel.h"
#include "runtime/dep/expert_parallel.h"
#include "runtime/dep/in_process_group.h"
#include "runtime/eplb/static_placement.h"

namespace troupe::bench {
namespace {

using model::SequenceInput;
using model::SequenceState;

std::vector<std::vector<int32_t>> prompts_of(const ForwardBenchShape& s, int64_t vocab) {
  std::mt19937_64 rng(s.seed);
  std::uniform_int_distribution<int32_t> id(0, static_cast<int32_t>(vocab - 1));
  std::vector<std::vector<int32_t>> out(s.batch, std::vector<int32_t>(s.context));
  for (auto& p : out)
    for (int32_t& t : p) t = id(rng);
  return out;
}

int32_t argmax(const std::vector<float>& logits) {
  return static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

// One rank's sequences: prefill, then each decode step between two barriers.
struct RankRun {
  std::vector<SequenceState> states;
  std::vector<std::vector<int32_t>> prompts;
  std::vector<int32_t> next;
  std::vector<SequenceInput> in;

  void prefill(const model::Forward& f, model::RoutedExperts* routed) {
    for (auto& p : prompts) {
      states.push_back(SequenceState::empty(f.config()));
      in.push_back({&states.back(), p, false});
    }
    for (size_t i = 0; i < in.size(); ++i) in[i].state = &states[i];  // after the vector settled
    step(f, routed);
  }
  void step(const model::Forward& f, model::RoutedExperts* routed) {
    if (routed != nullptr) routed->begin_step();
    if (in.empty()) return f.run_idle(*routed);
    const auto logits = f.run(in, nullptr, routed);
    next.resize(in.size());
    for (size_t i = 0; i < in.size(); ++i) {
      next[i] = argmax(logits[i]);
      in[i].tokens = {&next[i], 1};
    }
  }
};

}  // namespace

DepStepSplit time_plain_decode(const model::Forward& forward, const ForwardBenchShape& shape) {
  RankRun run;
  run.prompts = prompts_of(shape, forward.config().vocab_size);
  run.prefill(forward, nullptr);
  std::vector<double> steps;
  for (int64_t n = 0; n < shape.new_tokens; ++n) {
    const double t0 = now_seconds();
    run.step(forward, nullptr);
    steps.push_back(now_seconds() - t0);
  }
  DepStepSplit r;
  r.step_s = steps.empty() ? 0 : percentile(steps, 0.5);
  return r;
}

DepStepSplit time_dep_decode(const model::Forward& forward, const ForwardBenchShape& shape,
                             int ranks) {
  const model::ModelConfig& c = forward.config();
  runtime::InProcessGroup group(ranks);
  auto placement = std::make_shared<const runtime::eplb::ExpertPlacement>(
      runtime::eplb::ep_default_placement(c.num_hidden_layers, c.n_routed_experts, ranks, 0));
  const auto prompts = prompts_of(shape, c.vocab_size);
  // The machine's kernel threads shared out: each rank its own context.
  const int threads = std::max(1, kernels::default_num_threads() / ranks);
  std::vector<runtime::ExpertParallelTimes> before(ranks), after(ranks);
  std::vector<double> steps, sync_s(ranks, 0.0);
  std::vector<InprocMailbox<DpSyncMessage>> boxes(ranks);
  const std::atomic<bool> never{false};
  std::barrier sync(ranks);
  std::vector<std::thread> pool;
  for (int r = 0; r < ranks; ++r)
    pool.emplace_back([&, r] {
      kernels::ExecContext ctx(threads);
      kernels::ScopedExecContext bind(ctx);
      runtime::ExpertParallel experts(group.communicator(r), placement);
      RankRun run;
      for (int64_t s = r; s < shape.batch; s += ranks) run.prompts.push_back(prompts[s]);
      run.prefill(forward, &experts);
      before[r] = experts.times();
      DpSyncRank dp(runtime::collectives::recursive_doubling_schedule(r, ranks));
      std::vector<DpSyncMessage> batch;
      for (int64_t n = 0; n < shape.new_tokens; ++n) {
        sync.arrive_and_wait();
        const double t0 = now_seconds();
        const auto mine = runtime::collectives::local_step_metadata(
            r, ranks, n + 1, static_cast<int64_t>(run.prompts.size()), true);
        inproc_all_reduce(dp, boxes, r, n + 1, mine, MailWait::Spin, never, batch);
        sync_s[r] += now_seconds() - t0;
        run.step(forward, &experts);
        sync.arrive_and_wait();
        if (r == 0) steps.push_back(now_seconds() - t0);
      }
      after[r] = experts.times();
    });
  for (auto& t : pool) t.join();
  DepStepSplit out;
  out.ranks = ranks;
  out.step_s = steps.empty() ? 0 : percentile(steps, 0.5);
  const double per = shape.new_tokens > 0 ? 1.0 / double(shape.new_tokens) : 0.0;
  for (int r = 0; r < ranks; ++r) {
    out.route_s += (after[r].route_s - before[r].route_s) * per / ranks;
    out.dispatch_s += (after[r].dispatch_s - before[r].dispatch_s) * per / ranks;
    out.experts_s += (after[r].experts_s - before[r].experts_s) * per / ranks;
    out.combine_s += (after[r].combine_s - before[r].combine_s) * per / ranks;
    out.sync_s += sync_s[r] * per / ranks;
    out.rows_sent += double(after[r].rows_sent - before[r].rows_sent) * per;
    out.rows_kept += double(after[r].rows_kept - before[r].rows_kept) * per;
  }
  return out;
}

void print_dep_table(const ForwardBenchShape& shape, const std::vector<DepStepSplit>& rows) {
  std::printf("\ndecode step of %lld sequences over R ranks (median of %lld steps; per step, mean "
              "over ranks; exchanges include waiting for the slowest rank)\n",
              static_cast<long long>(shape.batch), static_cast<long long>(shape.new_tokens));
  std::printf("%-10s %10s %9s %12s %10s %10s %10s %10s %10s %11s %11s\n", "ranks", "step ms",
              "vs base", "own layers", "dp sync", "route", "dispatch", "experts", "combine",
              "rows sent", "rows kept");
  const double base = rows.empty() ? 0 : rows.front().step_s;
  for (const DepStepSplit& r : rows) {
    const double moe = r.sync_s + r.route_s + r.dispatch_s + r.experts_s + r.combine_s;
    char name[32];
    std::snprintf(name, sizeof name, r.ranks == 0 ? "1 (plain)" : "%d", r.ranks);
    std::printf("%-10s %10.3f %8.2fx %12.3f %10.3f %10.3f %10.3f %10.3f %10.3f %11.0f %11.0f\n",
                name, r.step_s * 1e3, base > 0 ? r.step_s / base : 0.0,
                (r.ranks == 0 ? r.step_s : std::max(0.0, r.step_s - moe)) * 1e3, r.sync_s * 1e3,
                r.route_s * 1e3,
                r.dispatch_s * 1e3, r.experts_s * 1e3, r.combine_s * 1e3, r.rows_sent, r.rows_kept);
  }
  std::printf("(\"own layers\" = step - the DP sync and the MoE exchange parts: attention, norms, "
              "mHC, gate, shared expert, head; \"dp sync\" = the recursive-doubling all-reduce of "
              "the step metadata before the step, over in-process mailboxes; on fewer cores than "
              "ranks the ranks time-share, so wall time grows with R)\n");
}

}  // namespace troupe::bench

#include "bench/engine/replay_bench.h"

#include <cstdio>
#include <filesystem>
#include <unordered_map>

#include "bench/common/stats.h"
#include "kernels/check.h"

namespace troupe::bench {
namespace {

using runtime::AgenticWorkload;
using runtime::Engine;
using runtime::RequestId;
using runtime::RequestOutput;

// Submits conversations' next turns and folds finished turns back into the workload.
// Request id = conversation · turns + turn.
class ReplayDriver {
 public:
  ReplayDriver(Engine& engine, AgenticWorkload& workload, ReplayRun& run)
      : engine_(engine), workload_(workload), run_(run) {}

  void submit(int64_t conversation) {
    const std::vector<int32_t> prompt = workload_.next_prompt(conversation);
    const RequestId id =
        conversation * workload_.config().turns + workload_.turns_done(conversation);
    run_.prompt_tokens += int64_t(prompt.size());
    engine_.add_request(id, prompt, greedy_params(workload_.config().output_len));
  }

  void on_output(const RequestOutput& out) {
    check_output(out);
    std::vector<int32_t>& tokens = outputs_[out.id];
    tokens.insert(tokens.end(), out.new_tokens.begin(), out.new_tokens.end());
    if (!out.finished()) return;
    TROUPE_CHECK(out.status == runtime::RequestStatus::FinishedLength, "request ", out.id,
                 " ended early: ", out.finish_reason());
    const int64_t conversation = out.id / workload_.config().turns;
    ++run_.turns;
    run_.cached_tokens += out.num_cached_tokens;
    run_.output_tokens += int64_t(tokens.size());
    workload_.finish_turn(conversation, tokens);
    outputs_.erase(out.id);
    if (!workload_.done(conversation)) submit(conversation);
  }

 private:
  Engine& engine_;
  AgenticWorkload& workload_;
  ReplayRun& run_;
  std::unordered_map<RequestId, std::vector<int32_t>> outputs_;  // of unfinished turns
};

double per_second(int64_t tokens, double seconds) {
  return seconds > 0 ? tokens / seconds : 0;
}

// "exact" / "window" for a run with the prefix cache; "-" without (nothing replays).
const char* replay_name(const ReplayRun& r) {
  if (!r.prefix_cache) return "-";
  return r.prefix_replay == runtime::PrefixReplay::Exact ? "exact" : "window";
}

void print_row(const ReplayRun& r) {
  const double t = r.wall_s;
  std::printf(
      "| %s | %s | %s | %s | %lld | %lld | %lld | %lld | %lld | %.1f%% | %.1f%% | %.1f%% | %.1f%% "
      "| %lld | %lld / %lld / %lld | %lld | %lld | %lld | %lld | %lld | %.3f | %.2f | %.1f | %.1f "
      "| %.1f | %.1f |\n",
      r.prefix_cache ? "on" : "off", replay_name(r),
      !r.prefix_cache ? "-" : r.snapshots ? "on" : "off",
      !r.prefix_cache ? "-" : r.tiers ? "on" : "off", static_cast<long long>(r.turns),
      static_cast<long long>(r.prompt_tokens), static_cast<long long>(r.cached_tokens),
      static_cast<long long>(r.uncached_tokens()), static_cast<long long>(r.output_tokens),
      100 * r.hit_rate(), 100 * r.tier_hit_rate(0), 100 * r.tier_hit_rate(1),
      100 * r.tier_hit_rate(2), static_cast<long long>(r.snapshot_hits),
      static_cast<long long>(r.tier_snapshot_hits[0]), static_cast<long long>(r.tier_snapshot_hits[1]),
      static_cast<long long>(r.tier_snapshot_hits[2]), static_cast<long long>(r.replay_hits), static_cast<long long>(r.computed_tokens),
      static_cast<long long>(r.replay_tokens), static_cast<long long>(r.steps),
      static_cast<long long>(r.preemptions),
      r.steps ? 1e3 * r.scheduler_cpu_s / double(r.steps) : 0.0, t, per_second(r.cached_tokens, t),
      per_second(r.uncached_tokens(), t), per_second(r.output_tokens, t),
      per_second(r.prompt_tokens + r.output_tokens, t));
}

// Baseline wall ÷ each cached run's wall, when there is a baseline.
void print_wall_ratios(const std::vector<ReplayRun>& runs) {
  const ReplayRun* off = nullptr;
  for (const ReplayRun& r : runs)
    if (!r.prefix_cache) off = &r;
  if (!off) return;
  std::printf("\n");
  for (const ReplayRun& r : runs)
    if (r.prefix_cache && r.wall_s > 0)
      std::printf(
          "wall time without / with the prefix cache (%s replay, snapshots %s, tiers %s): "
          "%.2fx\n",
          replay_name(r), r.snapshots ? "on" : "off", r.tiers ? "on" : "off",
          off->wall_s / r.wall_s);
}

}  // namespace

ReplayRun run_replay(const model::BatchForward& forward, const model::TextTokenizer* tokenizer,
                     const runtime::AgenticWorkloadConfig& workload_config,
                     const EngineBenchConfig& engine_config, bool prefix_cache) {
  const bool tiers = prefix_cache && engine_config.kv_offload_bytes > 0;
  if (tiers && !engine_config.kv_disk_dir.empty()) {  // a cold disk tier for every run
    std::error_code ec;
    std::filesystem::remove_all(engine_config.kv_disk_dir, ec);
  }
  Engine engine(forward, tokenizer,
                make_engine_config(forward.shape(), engine_config, prefix_cache));
  AgenticWorkload workload(workload_config);
  ReplayRun run;
  run.prefix_cache = prefix_cache;
  run.prefix_replay = engine_config.prefix_replay;
  run.snapshots = prefix_cache && engine_config.prefix_snapshots;
  run.tiers = tiers;
  ReplayDriver driver(engine, workload, run);

  const double t0 = now_seconds();
  for (int64_t c = 0; c < workload.num_conversations(); ++c) driver.submit(c);
  while (engine.has_unfinished())
    for (const RequestOutput& out : engine.step()) driver.on_output(out);
  run.wall_s = now_seconds() - t0;
  TROUPE_CHECK(workload.all_done(), "the engine went idle with turns left");

  const runtime::EngineFigures s = engine.figures();
  run.computed_tokens = s.scheduled_tokens;
  run.replay_tokens = engine.kv_cache().stats().replay_tokens;
  for (int t = 0; t < 3; ++t) run.tier_hit_tokens[t] = engine.kv_cache().stats().tier_hit_tokens[t];
  run.snapshot_hits = engine.kv_cache().stats().snapshot_hits;
  for (int t = 0; t < 3; ++t)
    run.tier_snapshot_hits[t] = engine.kv_cache().stats().tier_snapshot_hits[t];
  run.replay_hits = engine.kv_cache().stats().replay_hits;
  run.steps = s.steps;
  run.preemptions = s.preemptions;
  run.scheduler_cpu_s = s.schedule_cpu_s + s.update_cpu_s;
  return run;
}

void print_workload_line(const runtime::AgenticWorkloadConfig& w) {
  const runtime::WorkloadTotals plan = runtime::planned_totals(w);
  std::printf(
      "workload agentic: %lld conversations x %lld turns, system %lld, user %lld, output %lld "
      "tokens per turn: %lld requests, %lld input tokens (%.1f%% seen before: the most a "
      "prefix cache can serve), %lld output tokens\n",
      static_cast<long long>(w.conversations), static_cast<long long>(w.turns),
      static_cast<long long>(w.system_len), static_cast<long long>(w.user_len),
      static_cast<long long>(w.output_len), static_cast<long long>(plan.turns),
      static_cast<long long>(plan.prompt_tokens), 100 * plan.seen_fraction(),
      static_cast<long long>(plan.output_tokens));
}

void print_replay_report(const runtime::AgenticWorkloadConfig& w,
                         const std::vector<ReplayRun>& runs) {
  print_workload_line(w);
  std::printf("\n");
  std::printf(
      "| prefix cache | replay | snapshots | tiers | turns | input tokens | cached input | uncached "
      "input | output tokens | hit rate | primary hits | host hits | disk hits | snapshot hits | snapshots from primary / host / disk | replay hits | computed tokens | SWA replay "
      "tokens | steps | preemptions | sched ms/step | wall s | cached in tok/s | uncached in "
      "tok/s | output tok/s | total tok/s |\n");
  std::printf(
      "|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
      "---:|---:|---:|---:|---:|---:|---:|\n");
  for (const ReplayRun& r : runs) print_row(r);
  print_wall_ratios(runs);
  std::fflush(stdout);
}

}  // namespace troupe::bench

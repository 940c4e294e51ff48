#include "bench/engine/step_bench.h"

#include <algorithm>
#include <cstdio>

#include "bench/common/stats.h"
#include "kernels/check.h"

namespace troupe::bench {
namespace {

using runtime::Engine;
using runtime::RequestOutput;

// One Engine::step; records its wall time and the engine's own split of it into `s`.
std::vector<RequestOutput> timed_step(Engine& e, StepSamples& s) {
  const runtime::EngineFigures before = e.figures();
  const double t0 = now_seconds();
  std::vector<RequestOutput> out = e.step();
  s.step_s.push_back(now_seconds() - t0);
  const runtime::EngineFigures after = e.figures();
  s.execute_s.push_back(after.rank_busy_seconds - before.rank_busy_seconds);
  s.scheduler_cpu_s.push_back(after.schedule_cpu_s - before.schedule_cpu_s + after.update_cpu_s -
                              before.update_cpu_s);
  return out;
}

// One prefill repeat: B requests of prefix + N fresh tokens (seeded by `seed`), run until
// each has its first and only token. Returns the seconds; adds its counts to r.
double prefill_repeat(Engine& e, const std::vector<int32_t>& prefix, const EngineBenchShape& shape,
                      int64_t vocab, uint64_t seed, int64_t& next_id, PrefillResult& r) {
  for (int64_t b = 0; b < shape.batch; ++b) {
    std::vector<int32_t> prompt = prefix;
    const auto suffix = random_tokens(shape.new_tokens, vocab, seed + uint64_t(b));
    prompt.insert(prompt.end(), suffix.begin(), suffix.end());
    r.prompt_tokens += int64_t(prompt.size());
    e.add_request(next_id++, prompt, greedy_params(1));
  }
  const int64_t tokens_before = e.figures().scheduled_tokens, steps_before = e.figures().steps;
  const double t0 = now_seconds();
  while (e.has_unfinished())
    for (const RequestOutput& out : timed_step(e, r.per_step)) {
      check_output(out);
      if (out.finished()) r.cached_tokens += out.num_cached_tokens;
    }
  r.computed_tokens += e.figures().scheduled_tokens - tokens_before;
  r.steps += e.figures().steps - steps_before;
  return now_seconds() - t0;
}

double median(const std::vector<double>& v) {
  return v.empty() ? 0 : percentile(v, 0.5);
}

}  // namespace

PrefillResult time_prefill(const model::BatchForward& forward, const EngineBenchShape& shape,
                           const EngineBenchConfig& config, bool prefix_cache) {
  Engine e(forward, nullptr, make_engine_config(forward.shape(), config, prefix_cache));
  const int64_t vocab = forward.shape().vocab_size;
  const std::vector<int32_t> prefix = random_tokens(shape.cached_prefix, vocab, shape.seed);
  int64_t next_id = 0;
  if (prefix_cache && !prefix.empty()) {  // computes the prefix once; its blocks stay cached
    e.add_request(next_id++, prefix, greedy_params(1));
    drain(e);
  }
  PrefillResult untimed, r;
  r.prefix_cache = prefix_cache;
  r.decoder = config.bounded_replay ? "tail" : config.clip_prefix ? "clip_prefix" : "full";
  // Suffix seeds: a fresh range per repeat, so only the shared prefix can hit.
  uint64_t seed = shape.seed + 1;
  prefill_repeat(e, prefix, shape, vocab, seed, next_id, untimed);
  for (int64_t k = 0; k < shape.repeats; ++k) {
    seed += uint64_t(shape.batch);
    r.seconds.push_back(prefill_repeat(e, prefix, shape, vocab, seed, next_id, r));
  }
  r.prompt_tokens /= shape.repeats;  // per repeat, as the table shows them
  r.cached_tokens /= shape.repeats;
  r.computed_tokens /= shape.repeats;
  r.steps /= shape.repeats;
  return r;
}

DecodeResult time_decode(const model::BatchForward& forward, const EngineBenchShape& shape,
                         const EngineBenchConfig& config, int64_t context) {
  Engine e(forward, nullptr, make_engine_config(forward.shape(), config, true));
  for (int64_t b = 0; b < shape.batch; ++b)
    e.add_request(b,
                  random_tokens(context, forward.shape().vocab_size,
                                shape.seed + uint64_t(context * shape.batch + b)),
                  greedy_params(shape.decode_steps + 1));
  DecodeResult r;
  r.context = context;
  StepSamples prefill;  // untimed: the steps before every request has its first token
  std::vector<bool> started(size_t(shape.batch), false);
  int64_t num_started = 0;
  while (e.has_unfinished()) {
    const bool decoding = num_started == shape.batch;
    for (const RequestOutput& out : timed_step(e, decoding ? r.samples : prefill)) {
      check_output(out);
      if (!out.new_tokens.empty() && !started[size_t(out.id)]) {
        started[size_t(out.id)] = true;
        ++num_started;
      }
    }
  }
  return r;
}

void print_prefill_table(const EngineBenchShape& s, const std::vector<PrefillResult>& rows) {
  std::printf(
      "| prefix cache | decoder | requests | prompt tokens | cached tokens | computed tokens | "
      "steps | median ms | min ms | max ms | new tokens/s | computed tokens/s | sched CPU us/step |\n");
  std::printf("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  for (const PrefillResult& r : rows) {
    const double med = median(r.seconds);
    std::printf(
        "| %s | %s | %lld | %lld | %lld | %lld | %lld | %.3f | %.3f | %.3f | %.1f | %.1f | %.1f |\n",
        r.prefix_cache ? "on" : "off", r.decoder, static_cast<long long>(s.batch),
        static_cast<long long>(r.prompt_tokens), static_cast<long long>(r.cached_tokens),
        static_cast<long long>(r.computed_tokens), static_cast<long long>(r.steps), med * 1e3,
        percentile(r.seconds, 0.0) * 1e3, percentile(r.seconds, 1.0) * 1e3,
        double(s.batch * s.new_tokens) / med, double(r.computed_tokens) / med,
        median(r.per_step.scheduler_cpu_s) * 1e6);
  }
  std::fflush(stdout);
}

void print_decode_table(const EngineBenchShape& s, const std::vector<DecodeResult>& rows) {
  std::printf(
      "| context | batch | steps | median ms | min ms | max ms | executor ms | sched CPU us | "
      "sched share | tokens/s | vs first context |\n");
  std::printf("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  const double first = rows.empty() ? 0 : median(rows[0].samples.step_s);
  for (const DecodeResult& r : rows) {
    const StepSamples& x = r.samples;
    const double med = median(x.step_s), sched = median(x.scheduler_cpu_s);
    std::printf(
        "| %lld | %lld | %zu | %.3f | %.3f | %.3f | %.3f | %.1f | %.2f%% | %.1f | %.2fx |\n",
        static_cast<long long>(r.context), static_cast<long long>(s.batch), x.step_s.size(),
        med * 1e3, x.step_s.empty() ? 0 : percentile(x.step_s, 0.0) * 1e3,
        x.step_s.empty() ? 0 : percentile(x.step_s, 1.0) * 1e3, median(x.execute_s) * 1e3,
        sched * 1e6, med > 0 ? 100 * sched / med : 0.0, med > 0 ? s.batch / med : 0.0,
        first > 0 ? med / first : 0.0);
  }
  std::fflush(stdout);
}

}  // namespace troupe::bench

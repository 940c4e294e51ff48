#include "bench/forward/forward_bench.h"

#include <algorithm>
#include <cstdio>
#include <optional>
#include <random>

#include "bench/common/stats.h"

namespace troupe::bench {
namespace {

using model::SequenceInput;
using model::SequenceState;

// [B·C] uniform token ids, sequence s at [s·C, s·C + C).
std::vector<int32_t> random_prompts(int64_t vocab, const ForwardBenchShape& s) {
  std::mt19937_64 rng(s.seed);
  std::uniform_int_distribution<int32_t> id(0, static_cast<int32_t>(vocab - 1));
  std::vector<int32_t> out(s.batch * s.context);
  for (int32_t& t : out) t = id(rng);
  return out;
}

// Each sequence's first `len` prompt tokens as one batch over fresh `states`.
std::vector<SequenceInput> prompt_batch(std::vector<SequenceState>& states,
                                        const std::vector<int32_t>& prompts, int64_t context,
                                        int64_t len) {
  std::vector<SequenceInput> in(states.size());
  for (size_t s = 0; s < states.size(); ++s)
    in[s] = {&states[s], {&prompts[s * context], static_cast<size_t>(len)}, false};
  return in;
}

int32_t argmax(const std::vector<float>& logits) {  // ties -> lowest id
  return static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

double timed_run(const model::Forward& f, std::vector<SequenceInput>& in,
                 std::vector<std::vector<float>>& logits) {
  const double t0 = now_seconds();
  logits = f.run(in);
  return now_seconds() - t0;
}

// One repeat on fresh states: the prefill step, then N decode steps (their ops timed
// into times.decode_ops when profiling).
void run_repeat(const model::Forward& f, const ForwardBenchShape& s,
                const std::vector<int32_t>& prompts, bool profile, ForwardTimes& times) {
  std::vector<SequenceState> states(s.batch, SequenceState::empty(f.config()));
  std::vector<SequenceInput> in = prompt_batch(states, prompts, s.context, s.context);
  std::vector<std::vector<float>> logits;
  times.prefill_s.push_back(timed_run(f, in, logits));
  std::vector<int32_t> next(s.batch);
  for (int64_t step = 0; step < s.new_tokens; ++step) {
    for (int64_t q = 0; q < s.batch; ++q) {
      next[q] = argmax(logits[q]);
      in[q].tokens = {&next[q], 1};
    }
    std::optional<model::ScopedOpProfile> ops;
    if (profile) ops.emplace(times.decode_ops);
    times.decode_s.push_back(timed_run(f, in, logits));
  }
}

// Mean cost of the N decode steps (positions C .. C+N-1).
StepCost mean_decode_cost(const ForwardCostModel& m, const ForwardBenchShape& s) {
  StepCost mean;
  for (int64_t k = 0; k < s.new_tokens; ++k) {
    const StepCost c = forward_step_cost(m, {s.batch, s.context + k, 1});
    mean.weight_bytes += c.weight_bytes / double(s.new_tokens);
    mean.kv_bytes += c.kv_bytes / double(s.new_tokens);
    mean.matmul_flops += c.matmul_flops / double(s.new_tokens);
    mean.attention_flops += c.attention_flops / double(s.new_tokens);
  }
  return mean;
}

void print_row(const char* step, int64_t tokens, const std::vector<double>& seconds,
               const StepCost& cost, Bound bound, const MachineLimits& limits) {
  const double med = percentile(seconds, 0.5);
  const double gbs = cost.bytes() / med / 1e9, gflops = cost.flops() / med / 1e9;
  const double limit = limit_for(limits, bound);
  char pct[32] = "";
  if (limit > 0)
    std::snprintf(pct, sizeof pct, "%.1f%% %s",
                  100 * (bound == Bound::Memory ? gbs : gflops) / limit, bound_name(bound));
  std::printf(
      "| %s | %lld | %.3f | %.3f | %.3f | %zu | %.1f | %.2f | %.3f | %.3f | %.1f | %.1f | %s |\n",
      step, static_cast<long long>(tokens), med * 1e3, percentile(seconds, 0.0) * 1e3,
      percentile(seconds, 1.0) * 1e3, seconds.size(), double(tokens) / med, cost.weight_bytes / 1e6,
      cost.kv_bytes / 1e6, cost.flops() / 1e9, gbs, gflops, pct);
}

}  // namespace

ForwardTimes time_forward(const model::Forward& f, const ForwardBenchShape& s, bool profile) {
  const std::vector<int32_t> prompts = random_prompts(f.config().vocab_size, s);
  {
    std::vector<SequenceState> states(s.batch, SequenceState::empty(f.config()));
    std::vector<SequenceInput> warm =
        prompt_batch(states, prompts, s.context, std::min<int64_t>(s.context, 16));
    f.run(warm);
  }
  ForwardTimes times;
  for (int64_t r = 0; r < s.repeats; ++r) run_repeat(f, s, prompts, profile, times);
  return times;
}

void print_forward_table(const ForwardBenchShape& s, const ForwardCostModel& cost,
                         const ForwardTimes& times, const MachineLimits& limits) {
  std::printf(
      "| step | tokens/step | median ms | min ms | max ms | samples | tokens/s | weights MB "
      "| KV MB | GFLOP | GB/s | GFLOP/s | %% of limit |\n");
  std::printf("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  print_row("prefill", s.batch * s.context, times.prefill_s,
            forward_step_cost(cost, {s.batch, 0, s.context}), Bound::Fp32, limits);
  if (s.new_tokens > 0)
    print_row("decode", s.batch, times.decode_s, mean_decode_cost(cost, s), Bound::Memory, limits);
  std::fflush(stdout);
}

void print_op_profile(const ForwardTimes& times) {
  double total = 0;
  for (double t : times.decode_s) total += t;
  print_op_table(stdout, times.decode_ops, static_cast<int64_t>(times.decode_s.size()), total);
}

void print_op_table(std::FILE* out, const model::OpProfile& ops, int64_t steps, double total_s,
                    const std::string& what) {
  if (steps == 0) return;
  const double timed = ops.timed_seconds();
  const double step_ms = total_s / static_cast<double>(steps) * 1e3;
  std::fprintf(out, "\n%s by op (mean of %lld, %.3f ms):\n\n", what.c_str(),
               static_cast<long long>(steps), step_ms);
  std::fprintf(out, "| op | ms/step | %% of step | spans/step |\n|---|---:|---:|---:|\n");
  for (int i = 0; i < model::kOpCount; ++i) {
    if (ops.calls[i] == 0) continue;  // an op this model does not have
    const double ms = ops.seconds[i] / static_cast<double>(steps) * 1e3;
    std::fprintf(out, "| %s | %.3f | %.1f%% | %.1f |\n", model::op_name(static_cast<model::Op>(i)), ms,
                 100 * ms / step_ms, static_cast<double>(ops.calls[i]) / static_cast<double>(steps));
  }
  const double other_ms = (total_s - timed) / static_cast<double>(steps) * 1e3;
  std::fprintf(out, "| other | %.3f | %.1f%% | |\n", other_ms, 100 * other_ms / step_ms);
  std::fflush(out);
}

}  // namespace troupe::bench

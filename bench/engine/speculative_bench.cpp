#include "bench/engine/speculative_bench.h"

#include <chrono>
#include <cstdio>
#include <map>

#include "kernels/check.h"
#include "runtime/speculative/oracle_drafter.h"

namespace troupe::bench {
namespace {

struct Timed {
  SpeculativeBenchRow row;
  std::map<runtime::RequestId, std::vector<int32_t>> outputs;
};

// B requests prefilled (untimed: until every request has its first token), then decoded
// to the end (timed).
Timed run_once(const model::Forward& forward, runtime::EngineConfig config,
               const runtime::Drafter* drafter, const std::vector<std::vector<int32_t>>& prompts,
               int64_t new_tokens) {
  runtime::Engine engine(forward, nullptr, config, drafter);
  for (size_t i = 0; i < prompts.size(); ++i)
    engine.add_request(static_cast<runtime::RequestId>(i), prompts[i], greedy_params(new_tokens));
  Timed t;
  t.row.batch = static_cast<int64_t>(prompts.size());
  auto collect = [&](const std::vector<runtime::RequestOutput>& outs) {
    for (const runtime::RequestOutput& o : outs) {
      check_output(o);
      auto& v = t.outputs[o.id];
      v.insert(v.end(), o.new_tokens.begin(), o.new_tokens.end());
    }
  };
  while (engine.has_unfinished() && t.outputs.size() < prompts.size()) collect(engine.step());
  int64_t first = 0;
  for (const auto& [id, v] : t.outputs) first += static_cast<int64_t>(v.size());
  const runtime::EngineFigures before = engine.figures();
  const auto t0 = std::chrono::steady_clock::now();
  while (engine.has_unfinished()) collect(engine.step());
  t.row.decode_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const runtime::EngineFigures after = engine.figures();
  t.row.decode_steps = after.steps - before.steps;
  int64_t all = 0;
  for (const auto& [id, v] : t.outputs) all += static_cast<int64_t>(v.size());
  t.row.tokens = all - first;
  const int64_t drafts = after.spec_num_drafts - before.spec_num_drafts;
  const int64_t accepted = after.spec_num_accepted_tokens - before.spec_num_accepted_tokens;
  t.row.mean_accepted_length = drafts ? 1.0 + double(accepted) / double(drafts) : 1.0;
  return t;
}

}  // namespace

std::vector<SpeculativeBenchRow> run_speculative_bench(const model::Forward& forward,
                                                       const SpeculativeBenchShape& shape,
                                                       const EngineBenchConfig& config) {
  warm_up(forward, config);
  std::vector<SpeculativeBenchRow> rows;
  const int64_t vocab = forward.config().vocab_size;
  for (int64_t B : shape.batches) {
    EngineBenchConfig c = config;
    c.max_running = std::max(c.max_running, B);
    const runtime::EngineConfig plain_config = make_engine_config(forward.config(), c, false);
    std::vector<std::vector<int32_t>> prompts;
    for (int64_t b = 0; b < B; ++b)
      prompts.push_back(random_tokens(shape.context, vocab, shape.seed + uint64_t(b)));
    const Timed plain = run_once(forward, plain_config, nullptr, prompts, shape.new_tokens);
    rows.push_back(plain.row);
    for (double p : shape.acceptance) {
      runtime::OracleDrafter oracle(p, vocab, shape.seed);
      for (size_t i = 0; i < prompts.size(); ++i) {
        std::vector<int32_t> seq = prompts[i];
        const auto& out = plain.outputs.at(static_cast<runtime::RequestId>(i));
        seq.insert(seq.end(), out.begin(), out.end());
        oracle.set_sequence(static_cast<runtime::RequestId>(i), std::move(seq));
      }
      runtime::EngineConfig spec = plain_config;
      spec.speculative = {"oracle", shape.k, p};
      Timed t = run_once(forward, spec, &oracle, prompts, shape.new_tokens);
      // Verification is exact: the oracle run must give the plain run's tokens.
      TROUPE_CHECK(t.outputs == plain.outputs, "bench forward --speculative: batch ", B,
                   ", p ", p, ": the speculative tokens differ from plain decoding");
      t.row.p = p;
      rows.push_back(t.row);
    }
  }
  return rows;
}

void print_speculative_table(const std::vector<SpeculativeBenchRow>& rows) {
  std::printf("%-6s %-14s %8s %10s %13s %14s %14s %8s\n", "batch", "mode", "steps", "tok/step",
              "accept len", "tok/s/user", "tok/s total", "speedup");
  double plain_rate = 0;
  for (const SpeculativeBenchRow& r : rows) {
    const double total = r.decode_seconds > 0 ? double(r.tokens) / r.decode_seconds : 0;
    const double per_user = total / double(r.batch);
    if (r.p < 0) plain_rate = per_user;
    char mode[32];
    if (r.p < 0)
      std::snprintf(mode, sizeof mode, "plain");
    else
      std::snprintf(mode, sizeof mode, "oracle p=%.1f", r.p);
    std::printf("%-6lld %-14s %8lld %10.3f %13.3f %14.1f %14.1f %7.2fx\n",
                static_cast<long long>(r.batch), mode, static_cast<long long>(r.decode_steps),
                r.decode_steps ? double(r.tokens) / double(r.decode_steps * r.batch) : 0.0,
                r.mean_accepted_length, per_user, total,
                plain_rate > 0 ? per_user / plain_rate : 0.0);
  }
}

}  // namespace troupe::bench

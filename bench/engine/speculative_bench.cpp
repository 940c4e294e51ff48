#include "bench/engine/speculative_bench.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <optional>
#include <string>

#include "kernels/check.h"
#include "runtime/dep/dep_engine.h"
#include "runtime/speculative/oracle_drafter.h"

namespace troupe::bench {
namespace {

struct Timed {
  SpeculativeBenchRow row;
  std::map<runtime::RequestId, std::vector<int32_t>> outputs;
  std::vector<runtime::StepTimeSample> table;  // adaptive: the measured cells at the batch
};

// The cost table's measured cells at `batch`.
std::vector<runtime::StepTimeSample> measured_cells(const runtime::DraftLengthChooser& c,
                                                    int64_t batch) {
  std::vector<runtime::StepTimeSample> out;
  for (int64_t k = 0; k <= c.table().kmax(); ++k)
    if (c.table().measured(batch, k)) out.push_back({batch, k, *c.table().estimate(batch, k)});
  return out;
}

// The cost table a run reports (DEP-R: rank 0's, each rank learns its own) and the
// batch size its cells are at: the requests that rank runs.
const runtime::DraftLengthChooser* draft_length(const runtime::Engine& e) { return e.draft_length(); }
const runtime::DraftLengthChooser* draft_length(const runtime::DepEngine& e) { return e.draft_length(0); }
int64_t table_batch(const runtime::Engine&, int64_t requests) { return requests; }
int64_t table_batch(const runtime::DepEngine& e, int64_t requests) {
  int64_t n = 0;
  for (int64_t i = 0; i < requests; ++i) n += e.rank_of(static_cast<runtime::RequestId>(i)) == 0;
  return n;
}

// B requests prefilled (untimed: until every request has its first token), then decoded
// to the end (timed).
// profile: each op of the timed steps into the row's ops / draft_ops.
template <class E>
Timed run_once(E& engine, const std::vector<std::vector<int32_t>>& prompts, int64_t new_tokens,
               bool profile) {
  for (size_t i = 0; i < prompts.size(); ++i)
    engine.add_request(static_cast<runtime::RequestId>(i), prompts[i], greedy_params(new_tokens));
  Timed t;
  t.row.batch = static_cast<int64_t>(prompts.size());
  const int64_t cells_at = table_batch(engine, t.row.batch);
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
  std::optional<model::ScopedOpProfile> ops;
  if (profile) {
    t.row.ops.draft = &t.row.draft_ops;
    ops.emplace(t.row.ops);
  }
  const auto t0 = std::chrono::steady_clock::now();
  for (; engine.has_unfinished(); ++t.row.decode_steps) collect(engine.step());
  ops.reset();
  t.row.ops.draft = nullptr;  // the row is copied: no pointer into it
  t.row.decode_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const runtime::EngineFigures after = engine.figures();
  int64_t all = 0;
  for (const auto& [id, v] : t.outputs) all += static_cast<int64_t>(v.size());
  t.row.tokens = all - first;
  const int64_t drafts = after.spec_num_drafts - before.spec_num_drafts;
  const int64_t accepted = after.spec_num_accepted_tokens - before.spec_num_accepted_tokens;
  t.row.mean_accepted_length = drafts ? 1.0 + double(accepted) / double(drafts) : 1.0;
  t.row.steps_by_k = after.spec_steps_by_k;
  for (size_t k = 0; k < before.spec_steps_by_k.size(); ++k)
    t.row.steps_by_k[k] -= before.spec_steps_by_k[k];
  if (const runtime::DraftLengthChooser* c = draft_length(engine))
    t.table = measured_cells(*c, cells_at);
  return t;
}

Timed run_once(const model::Forward& forward, runtime::EngineConfig config,
               const runtime::Drafter* drafter, const std::vector<std::vector<int32_t>>& prompts,
               const SpeculativeBenchShape& shape) {
  if (shape.ranks > 1) {
    runtime::DepConfig d;
    d.ranks = shape.ranks;
    runtime::DepEngine engine(forward, nullptr, config, d, drafter);
    return run_once(engine, prompts, shape.new_tokens, shape.profile);
  }
  runtime::Engine engine(forward, nullptr, config, drafter);
  return run_once(engine, prompts, shape.new_tokens, shape.profile);
}

runtime::SpeculativeConfig speculative(const char* method, int64_t k, double p, bool adaptive) {
  runtime::SpeculativeConfig c;
  c.method = method;
  c.num_speculative_tokens = k;
  c.acceptance_rate = p;
  c.adaptive = adaptive;
  return c;
}

// One batch size: plain, the oracle at each p (and adaptive), DSpark (and adaptive).
// Verification is exact: every run must give the plain run's tokens.
void run_batch(const model::Forward& forward, const SpeculativeBenchShape& shape,
               const runtime::EngineConfig& plain_config, const DsparkBench& dspark,
               const std::vector<std::vector<int32_t>>& prompts, SpeculativeBenchResult& out) {
  const int64_t vocab = forward.config().vocab_size;
  const Timed plain = run_once(forward, plain_config, nullptr, prompts, shape);
  out.rows.push_back(plain.row);
  out.rows.back().mode = "plain";
  std::vector<runtime::StepTimeSample> table;
  auto spec = [&](const std::string& mode, const model::Forward& f, runtime::SpeculativeConfig sc,
                  const runtime::Drafter& drafter) {
    runtime::EngineConfig c = plain_config;
    c.speculative = sc;
    Timed t = run_once(f, c, &drafter, prompts, shape);
    TROUPE_CHECK(t.outputs == plain.outputs, "bench forward --speculative: batch ",
                 prompts.size(), ", ", mode, ": the speculative tokens differ from plain decoding");
    t.row.mode = mode;
    out.rows.push_back(t.row);
    if (!t.table.empty()) table = t.table;
  };
  for (double p : shape.acceptance) {
    runtime::OracleDrafter oracle(p, vocab, shape.seed);
    for (size_t i = 0; i < prompts.size(); ++i) {
      std::vector<int32_t> seq = prompts[i];
      const auto& o = plain.outputs.at(static_cast<runtime::RequestId>(i));
      seq.insert(seq.end(), o.begin(), o.end());
      oracle.set_sequence(static_cast<runtime::RequestId>(i), std::move(seq));
    }
    char label[32];
    std::snprintf(label, sizeof label, "oracle p=%.1f", p);
    spec(label, forward, speculative("oracle", shape.k, p, false), oracle);
    if (!shape.adaptive) continue;
    std::snprintf(label, sizeof label, "adaptive p=%.1f", p);
    spec(label, forward, speculative("oracle", shape.k, p, true), oracle);
  }
  if (shape.adaptive && dspark.drafter != nullptr) {
    spec("dspark k=" + std::to_string(shape.k), *dspark.forward,
         speculative("dspark", shape.k, 1.0, false), *dspark.drafter);
    spec("dspark adaptive", *dspark.forward, speculative("dspark", shape.k, 1.0, true),
         *dspark.drafter);
  }
  out.step_seconds.insert(out.step_seconds.end(), table.begin(), table.end());
}

}  // namespace

SpeculativeBenchResult run_speculative_bench(const model::Forward& forward,
                                             const SpeculativeBenchShape& shape,
                                             const EngineBenchConfig& config,
                                             const DsparkBench& dspark) {
  warm_up(forward, config);
  SpeculativeBenchResult out;
  const int64_t vocab = forward.config().vocab_size;
  for (int64_t B : shape.batches) {
    EngineBenchConfig c = config;
    c.max_running = std::max(c.max_running, B);
    std::vector<std::vector<int32_t>> prompts;
    for (int64_t b = 0; b < B; ++b)
      prompts.push_back(random_tokens(shape.context, vocab, shape.seed + uint64_t(b)));
    run_batch(forward, shape, make_engine_config(forward.config(), c, false), dspark, prompts, out);
  }
  return out;
}

// "55/0/1/4": decode steps at k = 0, 1, ...; "-" for plain decoding.
static std::string steps_by_k_text(const std::vector<int64_t>& by_k) {
  if (by_k.empty()) return "-";
  std::string s;
  for (size_t k = 0; k < by_k.size(); ++k) s += (k ? "/" : "") + std::to_string(by_k[k]);
  return s;
}

void print_speculative_table(const std::vector<SpeculativeBenchRow>& rows) {
  std::printf("%-6s %-16s %8s %10s %13s %14s %14s %8s  %s\n", "batch", "mode", "steps",
              "tok/step", "accept len", "tok/s/user", "tok/s total", "speedup", "steps by k");
  double plain_rate = 0;
  for (const SpeculativeBenchRow& r : rows) {
    const double total = r.decode_seconds > 0 ? double(r.tokens) / r.decode_seconds : 0;
    const double per_user = total / double(r.batch);
    if (r.mode == "plain") plain_rate = per_user;
    std::printf("%-6lld %-16s %8lld %10.3f %13.3f %14.1f %14.1f %7.2fx  %s\n",
                static_cast<long long>(r.batch), r.mode.c_str(),
                static_cast<long long>(r.decode_steps),
                r.decode_steps ? double(r.tokens) / double(r.decode_steps * r.batch) : 0.0,
                r.mean_accepted_length, per_user, total,
                plain_rate > 0 ? per_user / plain_rate : 0.0,
                steps_by_k_text(r.steps_by_k).c_str());
  }
}

void print_speculative_profile(const std::vector<SpeculativeBenchRow>& rows) {
  for (size_t first = 0; first < rows.size();) {
    size_t end = first;
    while (end < rows.size() && rows[end].batch == rows[first].batch) ++end;
    const std::span<const SpeculativeBenchRow> batch(rows.data() + first, end - first);
    first = end;
    std::printf("\nbatch %lld: ms per decode step by op\n\n| op |",
                static_cast<long long>(batch[0].batch));
    for (const SpeculativeBenchRow& r : batch) std::printf(" %s |", r.mode.c_str());
    std::printf("\n|---|");
    for (size_t i = 0; i < batch.size(); ++i) std::printf("---:|");
    std::printf("\n");
    auto per_step = [](const SpeculativeBenchRow& r, double s) {
      return r.decode_steps ? s / static_cast<double>(r.decode_steps) * 1e3 : 0.0;
    };
    auto line = [&](const std::string& name, auto&& seconds) {
      std::printf("| %s |", name.c_str());
      for (const SpeculativeBenchRow& r : batch) std::printf(" %.3f |", per_step(r, seconds(r)));
      std::printf("\n");
    };
    for (bool draft : {false, true})
      for (int i = 0; i < model::kOpCount; ++i) {
        const bool seen = std::any_of(batch.begin(), batch.end(), [&](const SpeculativeBenchRow& r) {
          return (draft ? r.draft_ops : r.ops).calls[i] > 0;
        });
        if (!seen) continue;
        line(std::string(draft ? "draft: " : "") + model::op_name(static_cast<model::Op>(i)),
             [&](const SpeculativeBenchRow& r) { return (draft ? r.draft_ops : r.ops).seconds[i]; });
      }
    line("draft: other",
         [](const SpeculativeBenchRow& r) { return r.ops.draft_seconds - r.draft_ops.timed_seconds(); });
    line("draft (all)", [](const SpeculativeBenchRow& r) { return r.ops.draft_seconds; });
    line("step other", [](const SpeculativeBenchRow& r) {
      return r.decode_seconds - r.ops.timed_seconds() - r.ops.draft_seconds;
    });
    line("step", [](const SpeculativeBenchRow& r) { return r.decode_seconds; });
  }
}

}  // namespace troupe::bench

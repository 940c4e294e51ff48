// `troupe bench <benchmark> [flags]`: benchmark programs behind the CLI (figures only,
// never pass/fail): `forward`, the analogue of `vllm bench forward`, on the bare model
// (bench/forward/forward_bench.h); `engine`, the Engine's prefill over a cached prefix,
// decode steps and scheduler time (bench/engine/step_bench.h); `replay`, the multi-turn
// agentic workload on the Engine with the prefix cache (exact and window replay) and
// without it (bench/engine/replay_bench.h); `serve`, the analogue of `vllm bench serve`,
// streaming requests to a running server (bench/serve/serve_bench.h), also the multi-turn
// workload, beside the engine-only figure (bench/serve/multi_turn_bench.h); `eplb`, the
// expert-parallel load balancer's balance and planning time on flash's MoE shape with
// synthetic routing (bench/eplb/eplb_bench.h); `dp-sync`, the DP-sync all-reduce of the
// step metadata among rank threads, recursive doubling vs gather-broadcast
// (bench/dp_sync/dp_sync_bench.h); `mirror-lag`, the price of DP imbalance: the same
// requests on every rank at once vs rank r delayed by r x D (bench/dp_balance); `soak`,
// many clients for minutes with aborts and bad requests mixed in, then leaks and RSS
// (bench/soak/soak_bench.h); `ucx`, MoE dispatch + combine and the DP sync between two
// processes (bench/ucx/ucx_bench.h).
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <initializer_list>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bench/common/limits.h"
#include "bench/common/stats.h"
#include "bench/dp_balance/mirror_lag_bench.h"
#include "bench/dp_sync/dp_sync_bench.h"
#include "bench/engine/replay_bench.h"
#include "bench/engine/speculative_bench.h"
#include "bench/engine/tier_fetch_bench.h"
#include "runtime/speculative/speculative_config.h"
#include "bench/engine/step_bench.h"
#include "bench/eplb/eplb_bench.h"
#include "bench/eplb/eplb_counts_bench.h"
#include "runtime/eplb/counts_trace.h"
#include "bench/forward/dep_bench.h"
#include "bench/forward/forward_bench.h"
#include "bench/serve/engine_compare.h"
#include "bench/serve/multi_turn_bench.h"
#include "bench/serve/serve_bench.h"
#include "bench/soak/soak_bench.h"
#include "cli/args.h"
#include "cli/bench_peer.h"
#include "cli/bench_drain.h"
#include "cli/bench_handoff.h"
#include "cli/bench_ucx.h"
#include "cli/commands.h"
#include "cli/loaded_model.h"
#include "cli/served_model.h"
#include "config/load.h"
#include "kernels/check.h"
#include "kernels/parallel.h"
#include "runtime/executor/executor.h"
#include "runtime/kv_cache/kv_cache_config.h"

namespace troupe::cli {
namespace {

bench::ForwardBenchShape forward_shape(const Args& a) {
  bench::ForwardBenchShape s;
  s.batch = a.get_int("batch", s.batch);
  s.context = a.get_int("context", s.context);
  s.new_tokens = a.get_int("new-tokens", s.new_tokens);
  s.repeats = a.get_int("repeats", s.repeats);
  if (s.batch < 1) TROUPE_FAIL("--batch must be at least 1, got " << s.batch);
  if (s.context < 1) TROUPE_FAIL("--context must be at least 1, got " << s.context);
  if (s.new_tokens < 0) TROUPE_FAIL("--new-tokens must be at least 0, got " << s.new_tokens);
  if (s.repeats < 1) TROUPE_FAIL("--repeats must be at least 1, got " << s.repeats);
  return s;
}

// Every position the run reaches (C + N − 1) must exist in the model.
void check_fits(const bench::ForwardBenchShape& s, const model::ModelConfig& c) {
  const int64_t max_pos = c.max_position_embeddings;
  if (s.context > max_pos)
    TROUPE_FAIL("--context " << s.context << " is beyond max_position_embeddings " << max_pos);
  if (s.context + s.new_tokens > max_pos)
    TROUPE_FAIL("--context " << s.context << " + --new-tokens " << s.new_tokens
                             << " is beyond max_position_embeddings " << max_pos);
}

// --threads T (default 0: all hardware threads), checked before the model loads.
int threads_flag(const Args& a) {
  const int64_t threads = a.get_int("threads", 0);
  if (a.has("threads") && threads < 1) TROUPE_FAIL("--threads must be at least 1, got " << threads);
  return static_cast<int>(threads);
}

void no_positional(const Args& a) {
  if (!a.positional().empty()) TROUPE_FAIL("unexpected argument '" << a.positional()[0] << "'");
}

int64_t at_least(const Args& a, const char* flag, int64_t fallback, int64_t min) {
  const int64_t v = a.get_int(flag, fallback);
  if (v < min) TROUPE_FAIL("--" << flag << " must be at least " << min << ", got " << v);
  return v;
}

std::vector<int64_t> int_list(const Args& a, const char* flag, const char* fallback, int64_t min);
void check_positions(const model::ServingShape& m, int64_t tokens, const std::string& what);

// --dep 1,2,4: the decode step over R expert-parallel ranks, split by phase, next to the
// plain one-rank forward of the same batch (bench/forward/dep_bench.h).
int bench_forward_dep(const Args& a, const bench::ForwardBenchShape& shape) {
  const std::vector<int64_t> ranks = int_list(a, "dep", "1,2,4", 1);
  kernels::set_num_threads(threads_flag(a));
  auto m = load_model(a.get_or("model", ""), /*need_tokenizer=*/false, forward_options(a));
  check_fits(shape, m->config);
  std::printf("troupe bench forward --dep: model %s\n", m->dir.c_str());
  std::printf("batch %lld, context %lld, new tokens %lld, threads %d (shared out over the ranks)\n",
              static_cast<long long>(shape.batch), static_cast<long long>(shape.context),
              static_cast<long long>(shape.new_tokens), kernels::num_threads());
  std::vector<bench::DepStepSplit> rows{bench::time_plain_decode(*m->forward, shape)};
  for (int64_t r : ranks)
    rows.push_back(bench::time_dep_decode(*m->forward, shape, static_cast<int>(r)));
  bench::print_dep_table(shape, rows);
  return 0;
}

std::vector<double> probability_list(const Args& a, const char* flag, const char* fallback) {
  std::vector<double> out;
  std::stringstream ss(a.get_or(flag, fallback));
  for (std::string item; std::getline(ss, item, ',');) {
    char* end = nullptr;
    const double v = std::strtod(item.c_str(), &end);
    if (item.empty() || *end != '\0' || !(v >= 0 && v <= 1))
      TROUPE_FAIL("--" << flag << " expects probabilities in [0, 1] separated by commas, got '"
                       << a.get_or(flag, fallback) << "'");
    out.push_back(v);
  }
  return out;
}

// --speculative: Engine decode with the TEST/BENCH oracle draft at each --acceptance p vs
// plain decoding, per --batches size (bench/engine/speculative_bench.h).
int bench_forward_speculative(const Args& a) {
  bench::SpeculativeBenchShape s;
  s.batches = int_list(a, "batches", "1,8,16", 1);
  s.acceptance = probability_list(a, "acceptance", "0.3,0.6,0.9");
  s.k = at_least(a, "num-speculative", s.k, 1);
  s.context = at_least(a, "context", s.context, 1);
  s.new_tokens = at_least(a, "new-tokens", s.new_tokens, 2);
  s.adaptive = a.has("adaptive");
  s.profile = a.has("profile");
  s.ranks = static_cast<int>(at_least(a, "dep", 1, 1));
  if (s.ranks > 1 && s.profile)
    TROUPE_FAIL("--profile times the ops of the calling thread; with --dep the ranks run on "
                "threads of their own: leave one of them out");
  kernels::set_num_threads(threads_flag(a));
  auto m = load_model(a.get_or("model", ""), /*need_tokenizer=*/false, forward_options(a));
  std::unique_ptr<DraftModel> draft;  // --adaptive: the DSpark rows, when there is a draft
  if (s.adaptive && m->config.num_nextn_predict_layers > 0) draft = load_draft(*m);
  check_positions(m->config, s.context + s.new_tokens, "--context + --new-tokens");
  bench::EngineBenchConfig c;
  c.kv_budget_bytes = at_least(a, "kv-budget-mb", c.kv_budget_bytes >> 20, 1) << 20;
  std::printf("troupe bench forward --speculative: model %s (drafts: TEST ORACLE, the target's "
              "own greedy continuation kept with probability p)\n",
              m->dir.c_str());
  std::printf("context %lld, new tokens %lld, k %lld, threads %d; decode steps only (after "
              "every request's first token)\n",
              static_cast<long long>(s.context), static_cast<long long>(s.new_tokens),
              static_cast<long long>(s.k), kernels::num_threads());
  if (s.ranks > 1)
    std::printf("DEP-%d: the requests spread over %d ranks (attention data-parallel, the target's "
                "and the draft's MoE expert-parallel), %d kernel threads each\n",
                s.ranks, s.ranks, std::max(1, kernels::num_threads() / s.ranks));
  std::printf("\n");
  const bench::DsparkBench dspark{draft ? draft->forward.get() : nullptr,
                                  draft ? draft->drafter.get() : nullptr};
  const bench::SpeculativeBenchResult r = bench::run_speculative_bench(*m->forward, s, c, dspark);
  bench::print_speculative_table(r.rows);
  if (s.profile) bench::print_speculative_profile(r.rows);
  if (s.adaptive)
    std::printf("\nadaptive: k per step by the online cost table; its measured step times as a "
                "speculative-config seed (%s):\n\"step_seconds\": %s\n",
                draft ? "the dspark adaptive run's" : "the last adaptive run's",
                runtime::step_seconds_json(r.step_seconds, 6).c_str());
  return 0;
}

int bench_forward(const CommandArgs& argv) {
  Args a(argv,
         {"model", "expert-precision", "batch", "context", "new-tokens", "repeats", "threads", "dep", "batches",
          "acceptance", "num-speculative", "kv-budget-mb"},
         {"speculative", "adaptive", "profile"});
  no_positional(a);
  if (a.has("speculative")) return bench_forward_speculative(a);
  const bench::ForwardBenchShape shape = forward_shape(a);
  if (a.has("dep")) return bench_forward_dep(a, shape);
  const int threads = threads_flag(a);

  auto m = load_model(a.get_or("model", ""), /*need_tokenizer=*/false, forward_options(a));
  check_fits(shape, m->config);
  kernels::set_num_threads(threads);
  const bench::MachineLimits limits = bench::measure_limits(/*quick=*/true);
  kernels::set_num_threads(threads);  // the probes reset the count

  std::printf("troupe bench forward: model %s\n", m->dir.c_str());
  std::printf("batch %lld, context %lld, new tokens %lld, repeats %lld, threads %d\n\n",
              static_cast<long long>(shape.batch), static_cast<long long>(shape.context),
              static_cast<long long>(shape.new_tokens), static_cast<long long>(shape.repeats),
              kernels::num_threads());
  bench::print_limits(limits);
  const bench::ForwardTimes times = bench::time_forward(*m->forward, shape, a.has("profile"));
  bench::print_forward_table(shape, bench::make_forward_cost_model(m->config), times, limits);
  if (a.has("profile")) bench::print_op_profile(times);
  return 0;
}

// --prefix-replay exact|window, and where several runs can follow also `both` (the
// default then): the replay modes of the runs with the prefix cache.
std::vector<runtime::PrefixReplay> prefix_replay_modes(const Args& a, bool allow_both) {
  using runtime::PrefixReplay;
  const std::string v = a.get_or("prefix-replay", allow_both ? "both" : "exact");
  if (v == "exact") return {PrefixReplay::Exact};
  if (v == "window") return {PrefixReplay::Window};
  if (v == "both" && allow_both) return {PrefixReplay::Exact, PrefixReplay::Window};
  TROUPE_FAIL("--prefix-replay expects exact" << (allow_both ? ", window or both" : " or window")
                                              << ", got '" << v << "'");
}

// --kv-budget-mb, --block-size and --prefix-replay (its first mode: `both` gives exact);
// the budget must hold the reserved request state and a block per running request
// (runtime/kv_cache/kv_cache_config.h), checked here so the message names the flags.
bench::EngineBenchConfig engine_flags(const Args& a, int64_t max_running) {
  bench::EngineBenchConfig c;
  c.max_running = max_running;
  c.kv_budget_bytes = at_least(a, "kv-budget-mb", c.kv_budget_bytes >> 20, 1) << 20;
  c.block_size = at_least(a, "block-size", c.block_size, 1);
  c.prefix_replay = prefix_replay_modes(a, /*allow_both=*/true).front();
  return c;
}

// --snapshots on|off, and where several runs can follow also `both` (the default then;
// else on, the engine's default): window snapshots in the runs with the prefix cache.
std::vector<bool> snapshot_modes(const Args& a, bool allow_both) {
  const std::string v = a.get_or("snapshots", allow_both ? "both" : "on");
  if (v == "on") return {true};
  if (v == "off") return {false};
  if (v == "both" && allow_both) return {true, false};
  TROUPE_FAIL("--snapshots expects on" << (allow_both ? ", off or both" : " or off") << ", got '"
                                       << v << "'");
}

enum class DecoderMode { Tail, Full, Clip };

// --decoder tail|full|clip|all (bench engine): tail = bounded replay (the default), full =
// every layer on every token, clip = full compute with clip_prefix; all: full, clip, tail.
std::vector<DecoderMode> decoder_modes(const Args& a) {
  const std::string v = a.get_or("decoder", "tail");
  if (v == "tail") return {DecoderMode::Tail};
  if (v == "full") return {DecoderMode::Full};
  if (v == "clip") return {DecoderMode::Clip};
  if (v == "all") return {DecoderMode::Full, DecoderMode::Clip, DecoderMode::Tail};
  TROUPE_FAIL("--decoder expects tail, full, clip or all, got '" << v << "'");
}

// The --decoder modes a model runs: one without a decoder tail (the LLaMA family) computes
// every layer of every token, so its one mode is full (the default tail is that there);
// clip needs the tail.
std::vector<DecoderMode> model_decoders(const model::ServingShape& m, const Args& a,
                                        std::vector<DecoderMode> modes) {
  if (m.decoder_tail) return modes;
  if (std::find(modes.begin(), modes.end(), DecoderMode::Clip) != modes.end())
    TROUPE_FAIL("--decoder " << a.get_or("decoder", "")
                             << ": this model has no decoder tail (DeepSeek-V4.1 only); it "
                                "computes every layer of every token (--decoder full)");
  return {DecoderMode::Full};
}

void check_budget(const model::ServingShape& m, const bench::EngineBenchConfig& c) {
  try {
    runtime::EngineConfig e = bench::make_engine_config(m, c, /*prefix_cache=*/true);
    runtime::prepare_engine(m, e);  // the reservation snapshots add included
  } catch (const Error& e) {
    TROUPE_FAIL("--kv-budget-mb " << (c.kv_budget_bytes >> 20) << " with --block-size "
                                  << c.block_size << " and " << c.max_running
                                  << " running requests does not work: " << e.what());
  }
}

void check_positions(const model::ServingShape& m, int64_t tokens, const std::string& what) {
  if (tokens > m.max_positions)
    TROUPE_FAIL(what << " = " << tokens << " tokens is beyond the model's " << m.max_positions
                     << " positions");
}

// --flag "256,1024" -> {256, 1024}, each at least `min`.
std::vector<int64_t> int_list(const Args& a, const char* flag, const char* fallback, int64_t min) {
  const std::string text = a.get_or(flag, fallback);
  std::vector<int64_t> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    size_t used = 0;
    int64_t v = 0;
    try {
      v = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (item.empty() || used != item.size())
      TROUPE_FAIL("--" << flag << " expects integers separated by commas, got '" << text << "'");
    if (v < min) TROUPE_FAIL("--" << flag << " must be at least " << min << ", got " << v);
    out.push_back(v);
  }
  if (out.empty())
    TROUPE_FAIL("--" << flag << " expects integers separated by commas, got '" << text << "'");
  return out;
}

int bench_engine(const CommandArgs& argv) {
  Args a(argv,
         {"model", "expert-precision", "batch", "context", "new-tokens", "cached-prefix", "decode-steps", "repeats",
          "threads", "kv-budget-mb", "block-size", "prefix-replay", "snapshots", "decoder"},
         {});
  no_positional(a);
  bench::EngineBenchShape s;
  s.batch = at_least(a, "batch", s.batch, 1);
  s.contexts = int_list(a, "context", "256,1024", 1);
  s.new_tokens = at_least(a, "new-tokens", s.new_tokens, 1);
  s.cached_prefix = at_least(a, "cached-prefix", s.cached_prefix, 0);
  s.decode_steps = at_least(a, "decode-steps", s.decode_steps, 1);
  s.repeats = at_least(a, "repeats", s.repeats, 1);
  const int threads = threads_flag(a);
  bench::EngineBenchConfig config = engine_flags(a, s.batch);
  config.prefix_replay = prefix_replay_modes(a, /*allow_both=*/false).front();
  config.prefix_snapshots = snapshot_modes(a, /*allow_both=*/false).front();
  std::vector<DecoderMode> decoders = decoder_modes(a);

  // A V4.1 folder or a LLaMA-family model (.gguf, HF folder): the engine's paged cache,
  // scheduler and prefix cache are the same for both.
  const std::unique_ptr<ServedModel> m =
      load_served_model(a.get_or("model", ""), /*need_tokenizer=*/false, forward_options(a));
  const model::ServingShape& shape = m->forward().shape();
  decoders = model_decoders(shape, a, decoders);
  check_budget(shape, config);
  // Every request's prompt and its output tokens must have positions.
  check_positions(shape, s.cached_prefix + s.new_tokens + 1, "--cached-prefix + --new-tokens + 1");
  for (int64_t c : s.contexts)
    check_positions(shape, c + s.decode_steps + 1,
                    "--context " + std::to_string(c) + " + --decode-steps + 1");
  kernels::set_num_threads(threads);
  const bench::MachineLimits limits = bench::measure_limits(/*quick=*/true);
  kernels::set_num_threads(threads);  // the probes reset the count

  std::printf("troupe bench engine: model %s\n", m->path.c_str());
  std::printf(
      "batch %lld, new tokens %lld over a cached prefix of %lld, decode steps %lld, repeats %lld, "
      "threads %d\n",
      static_cast<long long>(s.batch), static_cast<long long>(s.new_tokens),
      static_cast<long long>(s.cached_prefix), static_cast<long long>(s.decode_steps),
      static_cast<long long>(s.repeats), kernels::num_threads());
  bench::print_limits(limits);
  bench::print_kv_summary(shape, config);
  bench::warm_up(m->forward(), config);

  std::printf("\nprefill: %lld new tokens per request over a %lld-token prefix\n",
              static_cast<long long>(s.new_tokens), static_cast<long long>(s.cached_prefix));
  // --decoder: how prefill runs the decoder (the tail, every token, clip_prefix), each a
  // row; the cold prefill's median is then the TTFT of each (docs/model-notes.md).
  std::vector<bench::PrefillResult> prefill;
  for (const DecoderMode d : decoders) {
    config.bounded_replay = d == DecoderMode::Tail;
    config.clip_prefix = d == DecoderMode::Clip;
    if (s.cached_prefix > 0) prefill.push_back(bench::time_prefill(m->forward(), s, config, true));
    prefill.push_back(bench::time_prefill(m->forward(), s, config, false));
  }
  config.bounded_replay = true;
  config.clip_prefix = false;
  bench::print_prefill_table(s, prefill);
  if (s.cached_prefix == 0 && prefill.size() > 1)
    for (size_t i = 1; i < prefill.size(); ++i)
      std::printf("cold prefill (TTFT) median, %s vs %s: %+.1f%%\n", prefill[i].decoder,
                  prefill[0].decoder,
                  100 * (bench::percentile(prefill[i].seconds, 0.5) / bench::percentile(prefill[0].seconds, 0.5) - 1));

  std::printf("\ndecode: %lld requests per step\n", static_cast<long long>(s.batch));
  std::vector<bench::DecodeResult> decode;
  for (int64_t c : s.contexts) decode.push_back(bench::time_decode(m->forward(), s, config, c));
  bench::print_decode_table(s, decode);
  return 0;
}

// The agentic workload's shape flags, shared by bench replay and bench serve
// --dataset-name agentic; the caller sets the seed and token range.
runtime::AgenticWorkloadConfig workload_shape_flags(const Args& a) {
  runtime::AgenticWorkloadConfig w;
  w.conversations = at_least(a, "conversations", w.conversations, 1);
  w.turns = at_least(a, "turns", w.turns, 1);
  w.system_len = at_least(a, "system-len", w.system_len, 0);
  w.user_len = at_least(a, "user-len", w.user_len, 1);
  w.output_len = at_least(a, "output-len", w.output_len, 1);
  return w;
}

// --tiers on|off|both (default off), --kv-offload-mb (default: --kv-budget-mb, a host
// tier as large as the pool), --kv-disk-mb (default 4x that; 0: no disk tier),
// --kv-disk-dir (default: a fresh folder under the temp dir, removed at the end).
struct TierFlags {
  std::vector<bool> modes;
  int64_t offload_bytes = 0, disk_bytes = 0;
  std::string dir;
  bool own_dir = false;
  bool any_on() const { return std::find(modes.begin(), modes.end(), true) != modes.end(); }
  void apply(bench::EngineBenchConfig& c, bool on) const {
    c.kv_offload_bytes = on ? offload_bytes : 0;
    c.kv_disk_bytes = on && disk_bytes > 0 ? disk_bytes : 0;
    c.kv_disk_dir = on && disk_bytes > 0 ? dir : "";
  }
};

TierFlags tier_flags(const Args& a, int64_t kv_budget_bytes) {
  TierFlags t;
  const std::string v = a.get_or("tiers", "off");
  if (v == "on") {
    t.modes = {true};
  } else if (v == "off") {
    t.modes = {false};
  } else if (v == "both") {
    t.modes = {false, true};
  } else {
    TROUPE_FAIL("--tiers expects on, off or both, got '" << v << "'");
  }
  t.offload_bytes = at_least(a, "kv-offload-mb", kv_budget_bytes >> 20, 1) << 20;
  t.disk_bytes = at_least(a, "kv-disk-mb", 4 * (t.offload_bytes >> 20), 0) << 20;
  t.dir = a.get_or("kv-disk-dir", "");
  if (t.dir.empty() && t.any_on() && t.disk_bytes > 0) {
    t.dir = (std::filesystem::temp_directory_path() /
             ("troupe-bench-kv-" + std::to_string(::getpid())))
                .string();
    t.own_dir = true;
  }
  return t;
}

int bench_replay(const CommandArgs& argv) {
  Args a(argv,
         {"model", "expert-precision", "conversations", "turns", "system-len", "user-len", "output-len", "max-running",
          "kv-budget-mb", "block-size", "prefix-replay", "snapshots", "seed", "threads", "tiers",
          "kv-offload-mb", "kv-disk-mb", "kv-disk-dir"},
         {});
  no_positional(a);
  runtime::AgenticWorkloadConfig w = workload_shape_flags(a);
  w.seed = static_cast<uint64_t>(at_least(a, "seed", int64_t(w.seed), 0));
  const int64_t max_running = at_least(a, "max-running", 8, 1);
  const int threads = threads_flag(a);
  bench::EngineBenchConfig config = engine_flags(a, max_running);
  std::vector<runtime::PrefixReplay> modes = prefix_replay_modes(a, /*allow_both=*/true);
  std::vector<bool> snapshots = snapshot_modes(a, /*allow_both=*/true);
  const TierFlags tiers = tier_flags(a, config.kv_budget_bytes);

  // A V4.1 folder or a LLaMA-family model (.gguf, HF folder), as bench engine.
  const std::unique_ptr<ServedModel> m =
      load_served_model(a.get_or("model", ""), /*need_tokenizer=*/false, forward_options(a));
  const model::BatchForward& forward = m->forward();
  const model::ServingShape& shape = forward.shape();
  check_budget(shape, config);
  w.max_token_id = static_cast<int32_t>(shape.vocab_size);
  check_positions(shape, w.planned_prompt_len(w.turns - 1) + w.output_len,
                  "the last turn's prompt + --output-len");
  kernels::set_num_threads(threads);

  std::printf("troupe bench replay: model %s, max running %lld, threads %d\n", m->path.c_str(),
              static_cast<long long>(max_running), kernels::num_threads());
  bench::print_kv_summary(shape, config);
  const int64_t R = shape.replay_tokens;  // 0: full compute, the anchor is B
  if (shape.window > 0) {
    std::printf(
        "a hit at B replays: exact %lld tokens before %s; window %lld before B "
        "(docs/kv-cache.md)\n",
        static_cast<long long>(runtime::exact_replay_tokens(shape, R > 0)),
        R > 0 ? ("min(B, E_prompt - " + std::to_string(R) + ")").c_str() : "B",
        static_cast<long long>(shape.window));
  } else {  // every layer's keys live in the blocks (LLaMA's full attention)
    std::printf("a hit at B replays nothing: every layer's keys are in the cached blocks\n");
    // No window to replay or snapshot: the modes are one run.
    if (!a.has("prefix-replay")) modes = {runtime::PrefixReplay::Exact};
    if (!a.has("snapshots")) snapshots = {false};
  }
  bench::warm_up(forward, config);
  std::vector<bench::ReplayRun> runs;
  for (const runtime::PrefixReplay mode : modes) {
    for (const bool snapshot : snapshots) {
      for (const bool tiered : tiers.modes) {
        config.prefix_replay = mode;
        config.prefix_snapshots = snapshot;
        tiers.apply(config, tiered);
        runs.push_back(bench::run_replay(forward, m->tokenizer(), w, config, true));
      }
    }
  }
  tiers.apply(config, false);
  runs.push_back(bench::run_replay(forward, m->tokenizer(), w, config, false));
  bench::print_replay_report(w, runs);
  if (tiers.any_on()) {
    std::printf("\ntiers: host %.1f MB, disk %.1f MB in %s\n", double(tiers.offload_bytes) / 1e6,
                double(tiers.disk_bytes) / 1e6, tiers.dir.c_str());
    std::error_code ec;
    std::filesystem::remove_all(tiers.dir, ec);
    bench::print_tier_fetch(bench::time_tier_fetch(forward, config, 1024, tiers.dir));
  }
  if (tiers.own_dir) {
    std::error_code ec;
    std::filesystem::remove_all(tiers.dir, ec);
  }
  return 0;
}

// Flags of one dataset given with another: an error naming the flag.
void reject_flags(const Args& a, std::initializer_list<const char*> flags, const char* why) {
  for (const char* f : flags)
    if (a.has(f)) TROUPE_FAIL("--" << f << " does not apply " << why);
}

// bench serve --dataset-name agentic: the workload flags of bench replay.
runtime::AgenticWorkloadConfig agentic_flags(const Args& a, const bench::ServeBenchConfig& c) {
  reject_flags(a, {"num-prompts", "request-rate", "random-input-len", "random-output-len"},
               "to --dataset-name agentic");
  runtime::AgenticWorkloadConfig w = workload_shape_flags(a);
  w.max_token_id = c.max_token_id;
  w.seed = c.seed;
  return w;
}

// The multi-turn workload against the server and, with --engine-model DIR, the same
// workload in-process on the Engine (bench replay's driver) for the serving overhead.
int bench_serve_agentic(const Args& a, const bench::ServeBenchConfig& c) {
  const runtime::AgenticWorkloadConfig w = agentic_flags(a, c);
  const bool engine = a.has("engine-model");
  if (!engine)
    reject_flags(a, {"kv-budget-mb", "block-size", "prefix-replay", "threads"},
                 "without --engine-model");
  const int threads = threads_flag(a);
  bench::EngineBenchConfig config = engine_flags(a, c.max_concurrency);
  config.prefix_replay = prefix_replay_modes(a, /*allow_both=*/false).front();
  std::unique_ptr<ServedModel> m;  // a V4.1 folder or a .gguf file
  if (engine) {
    try {
      m = load_served_model(a.get_or("engine-model", ""), /*need_tokenizer=*/false);
    } catch (const Error& e) {
      TROUPE_FAIL("--engine-model: " << e.what());
    }
    const model::ServingShape& shape = m->forward().shape();
    check_budget(shape, config);
    if (w.max_token_id > shape.vocab_size)
      TROUPE_FAIL("--max-token-id " << w.max_token_id << " is beyond the --engine-model vocab of "
                                    << shape.vocab_size);
    check_positions(shape, w.planned_prompt_len(w.turns - 1) + w.output_len,
                    "the last turn's prompt + --output-len");
  }
  bench::check_reachable(c);

  std::printf("troupe bench serve: %s:%u, max concurrency %lld\n", c.base.host.c_str(),
              unsigned(c.base.port), static_cast<long long>(c.max_concurrency));
  bench::print_workload_line(w);
  std::fflush(stdout);
  const bench::ServeBenchRun run = bench::run_multi_turn_bench(c, w);
  bench::print_serve_report(c, run);
  if (!engine) return 0;
  kernels::set_num_threads(threads);
  std::printf("\nengine-only: model %s, max running %lld, threads %d\n", m->path.c_str(),
              static_cast<long long>(config.max_running), kernels::num_threads());
  bench::print_kv_summary(m->forward().shape(), config);
  bench::warm_up(m->forward(), config);
  const bench::ReplayRun local =
      bench::run_replay(m->forward(), m->tokenizer(), w, config, /*prefix_cache=*/true);
  bench::print_engine_comparison(run, local);
  return 0;
}

int bench_serve(const CommandArgs& argv) {
  Args a(argv,
         {"base-url", "model", "num-prompts", "max-concurrency", "request-rate",
          "random-input-len", "random-output-len", "max-token-id", "seed", "dataset-name",
          "conversations", "turns", "system-len", "user-len", "output-len", "engine-model",
          "kv-budget-mb", "block-size", "prefix-replay", "threads"},
         {});
  no_positional(a);
  bench::ServeBenchConfig c;
  c.base = bench::parse_base_url(a.get_or("base-url", "http://127.0.0.1:8000"));
  c.model = a.get_or("model", "");
  c.max_concurrency = at_least(a, "max-concurrency", c.max_concurrency, 1);
  c.max_token_id = static_cast<int32_t>(at_least(a, "max-token-id", c.max_token_id, 1));
  c.seed = static_cast<uint64_t>(at_least(a, "seed", int64_t(c.seed), 0));
  const std::string dataset = a.get_or("dataset-name", "random");
  if (dataset == "agentic") return bench_serve_agentic(a, c);
  if (dataset != "random")
    TROUPE_FAIL("--dataset-name expects random or agentic, got '" << dataset << "'");
  reject_flags(a,
               {"conversations", "turns", "system-len", "user-len", "output-len", "engine-model",
                "kv-budget-mb", "block-size", "prefix-replay", "threads"},
               "to --dataset-name random");
  c.num_prompts = at_least(a, "num-prompts", c.num_prompts, 1);
  c.request_rate = a.get_double("request-rate", INFINITY);
  if (!(c.request_rate > 0))
    TROUPE_FAIL("--request-rate must be above 0 (or inf), got " << a.get_or("request-rate", ""));
  c.input_len = at_least(a, "random-input-len", c.input_len, 1);
  c.output_len = at_least(a, "random-output-len", c.output_len, 1);
  bench::check_reachable(c);

  std::printf("troupe bench serve: %s:%u, %lld prompts, max concurrency %lld, input %lld, "
              "output %lld tokens\n",
              c.base.host.c_str(), unsigned(c.base.port), static_cast<long long>(c.num_prompts),
              static_cast<long long>(c.max_concurrency), static_cast<long long>(c.input_len),
              static_cast<long long>(c.output_len));
  std::fflush(stdout);
  const bench::ServeBenchRun run = bench::run_serve_bench(c);
  bench::print_serve_report(c, run);
  return 0;
}

// --counts FILE: a recording of the engine's routing (expert-counts-file) beside a
// synthetic trace of its shape.
int bench_eplb_counts(const Args& a) {
  bench::EplbCountsBenchConfig c;
  c.gpus = int_list(a, "gpus", "2,4,8", 1);
  c.redundant = a.get_int("redundant", c.redundant);
  c.window_steps = a.get_int("window-steps", c.window_steps);
  c.eval_steps = a.get_int("eval-steps", c.eval_steps);
  c.zipf = a.get_double("zipf", c.zipf);
  c.top_k = a.get_int("top-k", c.top_k);
  c.seed = static_cast<uint64_t>(a.get_int("seed", static_cast<int64_t>(c.seed)));
  c.validate();
  const std::string path = *a.get("counts");
  std::printf("troupe bench eplb --counts %s\n", path.c_str());
  bench::print_eplb_counts_report(
      bench::run_eplb_counts_bench(runtime::eplb::read_counts_trace(path), c));
  return 0;
}

int bench_eplb(const CommandArgs& argv) {
  Args a(argv,
         {"layers", "experts", "top-k", "tokens-per-gpu", "window-steps", "eval-steps", "zipf",
          "seed", "repeats", "threads", "counts", "gpus", "redundant"},
         {});
  no_positional(a);
  if (a.has("counts")) return bench_eplb_counts(a);
  if (a.has("gpus") || a.has("redundant"))
    TROUPE_FAIL("--gpus and --redundant apply to --counts FILE only (the synthetic run's "
                "topologies are EP32 and EP64)");
  bench::EplbBenchConfig c;
  c.layers = a.get_int("layers", c.layers);
  c.experts = a.get_int("experts", c.experts);
  c.top_k = a.get_int("top-k", c.top_k);
  c.tokens_per_gpu = a.get_int("tokens-per-gpu", c.tokens_per_gpu);
  c.window_steps = a.get_int("window-steps", c.window_steps);
  c.eval_steps = a.get_int("eval-steps", c.eval_steps);
  c.zipf = a.get_double("zipf", c.zipf);
  c.seed = static_cast<uint64_t>(a.get_int("seed", static_cast<int64_t>(c.seed)));
  c.repeats = a.get_int("repeats", c.repeats);
  c.validate();
  kernels::set_num_threads(threads_flag(a));

  std::printf(
      "troupe bench eplb: %lld MoE layers, %lld experts, top-%lld, %lld tokens per GPU "
      "per step, zipf %.2f, seed %llu, threads %d\n",
      static_cast<long long>(c.layers), static_cast<long long>(c.experts),
      static_cast<long long>(c.top_k), static_cast<long long>(c.tokens_per_gpu), c.zipf,
      static_cast<unsigned long long>(c.seed), kernels::num_threads());
  std::fflush(stdout);
  bench::print_eplb_report(c, bench::run_eplb_bench(c));
  return 0;
}

int bench_dp_sync(const CommandArgs& argv) {
  Args a(argv, {"ranks", "steps", "warmup", "back-to-back-steps", "wait"}, {});
  no_positional(a);
  bench::DpSyncBenchConfig c;
  c.ranks.clear();
  for (const int64_t r : int_list(a, "ranks", "2,4,8,16,32", 1)) {
    if (r > 256) TROUPE_FAIL("--ranks: each group size must be in [1, 256], got " << r);
    c.ranks.push_back(static_cast<int32_t>(r));
  }
  c.steps = a.get_int("steps", c.steps);
  c.warmup = a.get_int("warmup", c.warmup);
  c.back_to_back_steps = a.get_int("back-to-back-steps", c.back_to_back_steps);
  const std::string wait = a.get_or("wait", "both");
  if (wait == "spin")
    c.waits = {bench::MailWait::Spin};
  else if (wait == "block")
    c.waits = {bench::MailWait::Block};
  else if (wait != "both")
    TROUPE_FAIL("--wait expects spin, block or both, got '" << wait << "'");
  c.validate();

  std::printf(
      "troupe bench dp-sync: all-reduce of the step metadata (step id, a token count per rank, "
      "flags) among R rank threads of one process\n"
      "transport: a mutex mailbox per rank (bench/dp_sync); an idle rank spins with yield or "
      "sleeps until mail comes (wait); %u hardware threads\n"
      "lockstep: %lld steps after %lld warm-up, each behind a barrier; latency = last rank's "
      "result - first rank's start\n"
      "b2b: %lld steps back to back, no barrier (step N+1's messages overtake N's); wall time "
      "per step\n\n",
      std::thread::hardware_concurrency(), static_cast<long long>(c.steps),
      static_cast<long long>(c.warmup), static_cast<long long>(c.back_to_back_steps));
  std::fflush(stdout);
  bench::print_dp_sync_report(c, bench::run_dp_sync_bench(c));
  return 0;
}

int bench_mirror_lag(const CommandArgs& argv) {
  Args a(argv,
         {"model", "expert-precision", "ranks", "requests", "prompt-len", "max-tokens", "lags", "seed", "threads",
          "kv-budget-mb", "block-size"},
         {});
  no_positional(a);
  bench::MirrorLagConfig c;
  c.ranks = static_cast<int>(at_least(a, "ranks", c.ranks, 1));
  if (c.ranks > 64) TROUPE_FAIL("--ranks must be in [1, 64], got " << c.ranks);
  c.requests = at_least(a, "requests", c.requests, 1);
  c.prompt_len = at_least(a, "prompt-len", c.prompt_len, 1);
  c.max_tokens = at_least(a, "max-tokens", c.max_tokens, 1);
  c.lags = int_list(a, "lags", "4,16", 1);
  c.seed = static_cast<uint64_t>(at_least(a, "seed", int64_t(c.seed), 0));
  c.engine = engine_flags(a, c.requests);
  const int threads = threads_flag(a);

  auto m = load_model(a.get_or("model", ""), /*need_tokenizer=*/false, forward_options(a));
  check_budget(m->config, c.engine);
  check_positions(m->config, c.prompt_len + c.max_tokens, "--prompt-len + --max-tokens");
  kernels::set_num_threads(threads);
  std::printf(
      "troupe bench mirror-lag: model %s, DEP-%d in one process (lockstep, expert-parallel MoE), "
      "%lld requests per rank (prompt %lld, %lld new tokens, greedy), threads %d shared by the "
      "ranks\nmirror: every rank gets its copy at step 0; lag D: rank r gets its copy at step "
      "r x D\n",
      m->dir.c_str(), c.ranks, static_cast<long long>(c.requests),
      static_cast<long long>(c.prompt_len), static_cast<long long>(c.max_tokens),
      kernels::num_threads());
  bench::warm_up(*m->forward, c.engine);
  std::vector<bench::MirrorLagRun> runs{bench::run_mirror_lag(*m->forward, c, 0)};
  for (const int64_t d : c.lags) runs.push_back(bench::run_mirror_lag(*m->forward, c, d));
  bench::print_mirror_lag_report(c, runs);
  return bench::copies_agree(c, runs) ? 0 : 1;
}

// bench soak's own flags; every other flag is a `troupe serve` flag for the daemon it
// starts, checked here as serve would check it (its own --host / ports are fixed).
int bench_soak(const CommandArgs& argv) {
  const std::set<std::string> own = {"minutes", "concurrency", "seed", "base-url", "server-pid"};
  std::set<std::string> values = config::serve_value_flags(), bools = config::serve_bool_flags();
  values.insert(own.begin(), own.end());
  Args a(argv, values, bools);
  no_positional(a);
  bench::SoakConfig c;
  c.minutes = a.get_double("minutes", c.minutes);
  if (!(c.minutes > 0) || std::isinf(c.minutes))
    TROUPE_FAIL("--minutes must be a number above 0, got " << a.get_or("minutes", ""));
  c.concurrency = at_least(a, "concurrency", c.concurrency, 1);
  c.seed = static_cast<uint64_t>(at_least(a, "seed", int64_t(c.seed), 0));
  std::map<std::string, std::string> serve;
  for (const auto* set : {&values, &bools})
    for (const std::string& f : *set)
      if (!own.count(f) && a.has(f)) serve[f] = *a.get(f);
  if (a.has("base-url") || a.has("server-pid")) {
    if (!a.has("base-url") || !a.has("server-pid"))
      TROUPE_FAIL("--base-url and --server-pid go together (the pid is for RSS and liveness)");
    if (!serve.empty())
      TROUPE_FAIL("--" << serve.begin()->first << " does not apply with --base-url");
    c.base = bench::parse_base_url(*a.get("base-url"));
    c.server_pid = static_cast<pid_t>(at_least(a, "server-pid", 0, 1));
    return bench::run_soak(c);
  }
  reject_flags(a, {"host", "port", "tcp-port"},
               "to bench soak: its daemon listens on 127.0.0.1, ports 0");
  config::resolve_serve_config(serve);  // a bad serve flag fails here, named
  for (const auto& [flag, value] : serve) {
    c.serve_args.push_back("--" + flag);
    if (!bools.count(flag)) c.serve_args.push_back(value);
  }
  return bench::run_soak(c);
}

struct Benchmark {
  const char* name;
  int (*run)(const CommandArgs& args);
};

const Benchmark kBenchmarks[] = {
    {"forward", bench_forward},
    {"engine", bench_engine},
    {"replay", bench_replay},
    {"serve", bench_serve},
    {"eplb", bench_eplb},
    {"dp-sync", bench_dp_sync},
    {"mirror-lag", bench_mirror_lag},
    {"soak", bench_soak},
    {"peer", bench_peer},  // cli/cmd_bench_peer.cpp
    {"ucx", bench_ucx},    // cli/cmd_bench_ucx.cpp
    {"handoff", bench_handoff},  // cli/cmd_bench_handoff.cpp
    {"drain", bench_drain},      // cli/cmd_bench_drain.cpp
};

std::string available() {
  std::string out;
  for (const Benchmark& b : kBenchmarks) out += (out.empty() ? "" : ", ") + std::string(b.name);
  return out;
}

}  // namespace

int run_bench(const CommandArgs& argv) {
  if (argv.empty()) TROUPE_FAIL("which benchmark? available: " << available());
  for (const Benchmark& b : kBenchmarks)
    if (argv[0] == b.name) return b.run(CommandArgs(argv.begin() + 1, argv.end()));
  TROUPE_FAIL("unknown benchmark '" << argv[0] << "'; available: " << available());
}

}  // namespace troupe::cli

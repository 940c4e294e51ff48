// ServeConfig: every setting of `troupe serve`, one struct. Keys are vLLM's long flag
// names where vLLM has the same knob (max-num-seqs, max-num-batched-tokens, ...), and the
// same names serve as YAML keys in a --config file, as in `vllm serve --config`.
//
//   ServeConfig cfg = resolve_serve_config(flags);   // defaults < file < flags, validated
//   runtime::Engine engine(forward, &tokenizer, cfg.to_engine_config());
//
// config/examples/single-node.yaml lists every key with its default (a test keeps the two
// equal); docs/config.md explains them.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "kernels/gemm.h"
#include "runtime/engine.h"
#include "runtime/eplb/eplb_planner.h"

namespace troupe::config {

enum class LogLevel : uint8_t { Trace, Debug, Info, Warning, Error, Critical };
enum class LogFormat : uint8_t { Text, Json };  // JSON: one object per line

struct ServeConfig {
  // --- model and network -----------------------------------------------------------
  std::string model;              // checkpoint folder; empty: the built-in tiny model
  std::string served_model_name;  // name in the API; empty: the model folder's name
  std::string host = "127.0.0.1";
  int64_t port = 8000;      // HTTP (OpenAI API); 0: the OS picks a free port
  int64_t tcp_port = 8001;  // length-prefixed msgpack API; 0: the OS picks a free port
  std::string api_key;      // empty: no authentication
  int64_t max_body_bytes = int64_t(64) << 20;  // larger request bodies get 413
  int64_t tcp_max_buffered_bytes = int64_t(256) << 20;  // partly received TCP frames, all clients
  double request_timeout = 0;                  // seconds per request; 0: no limit
  double http_header_timeout = 30;  // seconds to receive a request header; 0: no limit
  double http_body_timeout = 120;   // seconds to receive a request body; 0: no limit
  double http_idle_timeout = 60;    // seconds a kept-alive connection may idle; 0: no limit
  int64_t max_connections = 1024;   // open HTTP connections at once; 0: no cap
  // A client that does not read its output: past this much queued for its connection, or
  // a write moving no byte this long, its requests are aborted and it is closed; 0: none.
  int64_t max_queued_output_bytes = int64_t(4) << 20;
  double write_timeout = 60;  // seconds
  LogLevel log_level = LogLevel::Info;
  LogFormat log_format = LogFormat::Text;
  // runtime/faults/fault_plan.h SPEC for tests and chaos runs; empty: the
  // TROUPE_INJECT_FAULTS environment variable, else none.
  std::string inject_faults;
  // The supervisor restarts a dead scheduler + rank at most max_engine_restarts times
  // within engine_restart_window seconds; past that the instance stays down.
  int64_t max_engine_restarts = 5;
  double engine_restart_window = 60;

  // --- scheduler (runtime::SchedulerConfig) ----------------------------------------
  int64_t max_model_len = int64_t(1) << 20;             // prompt + output tokens of one request
  int64_t max_num_seqs = 256;                           // requests holding KV at once
  int64_t max_num_batched_tokens = 8192;                // new tokens per step
  int64_t max_prefill_context_read = int64_t(1) << 20;  // Σ chunk end positions per step
  int64_t max_admissions_per_step = 64;                 // new requests admitted per step
  int64_t max_kv_loads_per_step = 4;                    // KV hand-offs admitted per step (docs/pd.md)
  bool enable_chunked_prefill = true;
  runtime::SchedulePolicy scheduling_policy = runtime::SchedulePolicy::Fcfs;
  bool async_scheduling = true;  // plan step N+1 while step N runs

  // --- KV cache and executor ---------------------------------------------------------
  int64_t kv_cache_memory_bytes = int64_t(1) << 30;  // global KV blocks + per-request state
  int64_t block_size = 64;                           // tokens per KV block
  bool enable_prefix_caching = true;
  bool enable_prefix_snapshots = true;  // SWA window snapshots (docs/kv-cache.md)
  // Host and disk tiers under the primary pool (docs/kv-cache.md "Host and disk tiers").
  int64_t kv_pinned_bytes = 0;   // pool bytes saved prefixes (POST /v1/kv/save) may pin; 0: off
  int64_t kv_offload_bytes = 0;  // host memory for blocks evicted from the pool; 0: off
  std::string kv_disk_dir;       // block files, kept across restarts; empty: no disk tier
  int64_t kv_disk_bytes = 0;     // most bytes of block files in kv_disk_dir
  bool kv_check_invariants = false;  // check the KV bookkeeping after every step (debugging)
  bool bounded_replay = true;  // MODEL.md §6: prefill runs the decoder on a bounded tail
  bool clip_prefix = false;    // full compute: far prompt chunks run one decoder row
  runtime::PrefixReplay prefix_replay = runtime::PrefixReplay::Exact;  // executor.h
  int64_t threads = 0;         // kernel threads; 0: all hardware threads
  // The MoE experts' GEMMs (model::ForwardOptions): F32 is MODEL.md's numerics; Int8 runs
  // FP4 experts on int8 dot products (docs/model-notes.md has its measured tolerance).
  kernels::GemmPrecision expert_precision = kernels::GemmPrecision::F32;
  // vLLM's --speculative-config JSON ({"method": "dspark", "num_speculative_tokens": 3});
  // empty: off. Parsed by runtime::parse_speculative_config (errors name the JSON key).
  std::string speculative_config;

  // --- one instance of R ranks (DEP-R; vLLM's flag names) -----------------------------
  int64_t data_parallel_size = 1;       // ranks, each its own requests and KV (per-rank budget)
  bool enable_expert_parallel = false;  // routed experts spread over the ranks, lockstep steps
  int64_t num_redundant_experts = 0;    // extra expert slots (replicas), expert parallel only
  bool enable_eplb = false;             // live EPLB (expert parallel only)
  // vLLM's --eplb-config JSON ({"window_size", "step_interval", "num_redundant_experts"});
  // parsed by runtime::eplb::parse_eplb_config (errors name the JSON key).
  std::string eplb_config;
  // Every step's routing counts, one JSON line [[tokens per expert] per layer] each, for
  // `troupe bench eplb --counts`; empty: not written.
  std::string expert_counts_file;

  bool operator==(const ServeConfig&) const = default;

  // Rules between keys (each key's own range is checked as it is parsed). `origins` maps
  // a key to where it was set ("cfg.yaml line 3", "flag --port") for the message.
  void validate(const std::map<std::string, std::string>& origins = {}) const;

  runtime::EngineConfig to_engine_config() const;
  // Live EPLB's settings (enabled = enable-eplb) and the redundant expert slots, from
  // num-redundant-experts or eplb-config's num_redundant_experts.
  runtime::eplb::EplbConfig eplb() const;
  int64_t redundant_experts() const;
};

// Process-wide settings the serve command applies once at startup (kernel threads).
void apply_process_settings(const ServeConfig& cfg);

}  // namespace troupe::config

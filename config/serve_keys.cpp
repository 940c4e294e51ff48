#include "config/serve_keys.h"

#include <algorithm>
#include <sstream>
#include <utility>
#include <vector>

#include "config/value_parse.h"

namespace troupe::config {
namespace {

ConfigKey string_key(std::string name, std::string ServeConfig::*m, bool allow_empty,
                     std::string help) {
  return {std::move(name),
          ValueKind::String,
          std::move(help),
          allow_empty ? "a string" : "a non-empty string",
          [m, allow_empty](ServeConfig& c, const std::string& t) {
            if (t.empty() && !allow_empty) return false;
            c.*m = t;
            return true;
          },
          [m](const ServeConfig& c) { return c.*m; }};
}

ConfigKey int_key(std::string name, int64_t ServeConfig::*m, int64_t lo, int64_t hi,
                  std::string help) {
  std::string want = "an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
  if (hi == INT64_MAX) want = "an integer >= " + std::to_string(lo);
  return {std::move(name),
          ValueKind::Int,
          std::move(help),
          want,
          [=](ServeConfig& c, const std::string& t) {
            const auto v = parse_int(t);
            if (!v || *v < lo || *v > hi) return false;
            c.*m = *v;
            return true;
          },
          [m](const ServeConfig& c) { return std::to_string(c.*m); }};
}

ConfigKey bytes_key(std::string name, int64_t ServeConfig::*m, int64_t lo, std::string help) {
  const std::string want = "a size >= " + format_bytes(lo) +
                           " in bytes, or with a unit (B, KB, MB, GB, TB, KiB, MiB, GiB, TiB)";
  return {std::move(name),
          ValueKind::Bytes,
          std::move(help),
          want,
          [=](ServeConfig& c, const std::string& t) {
            const auto v = parse_bytes(t);
            if (!v || *v < lo) return false;
            c.*m = *v;
            return true;
          },
          [m](const ServeConfig& c) { return format_bytes(c.*m); }};
}

ConfigKey seconds_key(std::string name, double ServeConfig::*m, std::string help) {
  return {std::move(name),
          ValueKind::Seconds,
          std::move(help),
          "a duration >= 0 in seconds, or with a unit (ms, s, m, h)",
          [m](ServeConfig& c, const std::string& t) {
            const auto v = parse_seconds(t);
            if (!v) return false;
            c.*m = *v;
            return true;
          },
          [m](const ServeConfig& c) { return format_seconds(c.*m); }};
}

ConfigKey bool_key(std::string name, bool ServeConfig::*m, std::string help) {
  return {std::move(name),
          ValueKind::Bool,
          std::move(help),
          "true or false",
          [m](ServeConfig& c, const std::string& t) {
            const auto v = parse_bool(t);
            if (!v) return false;
            c.*m = *v;
            return true;
          },
          [m](const ServeConfig& c) { return std::string(c.*m ? "true" : "false"); }};
}

template <class E>
ConfigKey choice_key(std::string name, E ServeConfig::*m,
                     std::vector<std::pair<std::string, E>> choices, std::string help) {
  std::string want = "one of";
  for (const auto& [text, value] : choices) want += " " + text;
  return {std::move(name),
          ValueKind::Choice,
          std::move(help),
          want,
          [=](ServeConfig& c, const std::string& t) {
            for (const auto& [text, value] : choices)
              if (t == text) {
                c.*m = value;
                return true;
              }
            return false;
          },
          [=](const ServeConfig& c) {
            for (const auto& [text, value] : choices)
              if (c.*m == value) return text;
            return std::string("?");
          }};
}

constexpr int64_t kMaxPort = 65535;

std::vector<ConfigKey> make_keys() {
  using S = ServeConfig;
  using runtime::SchedulePolicy;
  using runtime::PrefixReplay;
  std::vector<ConfigKey> k;
  k.push_back(
      string_key("model", &S::model, true, "checkpoint folder; empty: the built-in tiny model"));
  k.push_back(string_key("served-model-name", &S::served_model_name, true,
                         "model name in the API; empty: the model folder's name"));
  k.push_back(string_key("host", &S::host, false, "HTTP and TCP listen address"));
  k.push_back(int_key("port", &S::port, 0, kMaxPort, "HTTP port; 0: the OS picks one"));
  k.push_back(
      int_key("tcp-port", &S::tcp_port, 0, kMaxPort, "msgpack TCP API port; 0: the OS picks one"));
  k.push_back(
      string_key("api-key", &S::api_key, true, "required Bearer token; empty: no authentication"));
  k.push_back(bytes_key("max-body-bytes", &S::max_body_bytes, 1,
                        "largest HTTP request body; larger ones get 413"));
  k.push_back(bytes_key("tcp-max-buffered-bytes", &S::tcp_max_buffered_bytes, 1,
                        "partly received TCP API frames held over all connections; a "
                        "connection needing more is refused and closed"));
  k.push_back(seconds_key("request-timeout", &S::request_timeout,
                          "fail a request running longer than this; 0: no limit"));
  k.push_back(seconds_key("http-header-timeout", &S::http_header_timeout,
                          "time to receive a request header, else 408; 0: no limit"));
  k.push_back(seconds_key("http-body-timeout", &S::http_body_timeout,
                          "time to receive a request body, else 408; 0: no limit"));
  k.push_back(seconds_key("http-idle-timeout", &S::http_idle_timeout,
                          "close a kept-alive connection idle this long; 0: no limit"));
  k.push_back(int_key("max-connections", &S::max_connections, 0, INT64_MAX,
                      "open connections per listener (HTTP, TCP); the next is refused; 0: no cap"));
  k.push_back(bytes_key("max-queued-output-bytes", &S::max_queued_output_bytes, 0,
                        "output queued for a client that does not read (HTTP, TCP); past it its "
                        "requests are aborted and it is closed; 0: no limit"));
  k.push_back(seconds_key("write-timeout", &S::write_timeout,
                          "a write to a client moving no byte this long aborts its requests and "
                          "closes it (HTTP, TCP); 0: no limit"));
  k.push_back(choice_key<LogLevel>("log-level", &S::log_level,
                                   {{"trace", LogLevel::Trace},
                                    {"debug", LogLevel::Debug},
                                    {"info", LogLevel::Info},
                                    {"warning", LogLevel::Warning},
                                    {"error", LogLevel::Error},
                                    {"critical", LogLevel::Critical}},
                                   "log verbosity"));
  k.push_back(choice_key<LogFormat>("log-format", &S::log_format,
                                    {{"text", LogFormat::Text}, {"json", LogFormat::Json}},
                                    "log lines on stderr: text, or one JSON object per line"));
  k.push_back(string_key("inject-faults", &S::inject_faults, true,
                         "faults to inject for tests (docs/serve.md); empty: none"));
  k.push_back(int_key("max-engine-restarts", &S::max_engine_restarts, 0, 1'000'000,
                      "restarts of a dead scheduler + rank within engine-restart-window; past "
                      "that the instance stays down"));
  k.push_back(seconds_key("engine-restart-window", &S::engine_restart_window,
                          "the window max-engine-restarts counts over; 0: restarts never add up"));
  k.push_back(int_key("max-model-len", &S::max_model_len, 2, INT64_MAX,
                      "prompt + output tokens of one request"));
  k.push_back(
      int_key("max-num-seqs", &S::max_num_seqs, 1, INT64_MAX, "requests holding KV at once"));
  k.push_back(int_key("max-num-batched-tokens", &S::max_num_batched_tokens, 1, INT64_MAX,
                      "new tokens scheduled per step"));
  k.push_back(int_key("max-prefill-context-read", &S::max_prefill_context_read, 1, INT64_MAX,
                      "sum of prefill chunk end positions per step"));
  k.push_back(int_key("max-admissions-per-step", &S::max_admissions_per_step, 1, INT64_MAX,
                      "new requests admitted per step"));
  k.push_back(int_key("max-kv-loads-per-step", &S::max_kv_loads_per_step, 1, INT64_MAX,
                      "requests arriving with their KV (P/D hand-offs) admitted per step"));
  k.push_back(bool_key("enable-chunked-prefill", &S::enable_chunked_prefill,
                       "split long prompts over steps"));
  k.push_back(choice_key<SchedulePolicy>(
      "scheduling-policy", &S::scheduling_policy,
      {{"fcfs", SchedulePolicy::Fcfs}, {"priority", SchedulePolicy::Priority}},
      "waiting order: arrival, or (priority, arrival)"));
  k.push_back(bool_key("async-scheduling", &S::async_scheduling,
                       "plan step N+1 while step N runs"));
  k.push_back(bytes_key("kv-cache-memory-bytes", &S::kv_cache_memory_bytes, 1,
                        "memory for KV blocks and per-request state"));
  k.push_back(int_key("block-size", &S::block_size, 1, int64_t(1) << 20,
                      "tokens per KV block; a multiple of every compress ratio"));
  k.push_back(bool_key("enable-prefix-caching", &S::enable_prefix_caching,
                       "reuse KV blocks of shared prompt prefixes"));
  k.push_back(bool_key("enable-prefix-snapshots", &S::enable_prefix_snapshots,
                       "keep SWA window snapshots so a hit at an earlier request's last block "
                       "boundary replays nothing"));
  k.push_back(bytes_key("kv-pinned-bytes", &S::kv_pinned_bytes, 0,
                        "KV pool bytes prefixes saved by POST /v1/kv/save may pin (at most half "
                        "the pool); 0: saves are refused"));
  k.push_back(bytes_key("kv-offload-bytes", &S::kv_offload_bytes, 0,
                        "host memory for KV blocks evicted from the pool (host tier); 0: off"));
  k.push_back(string_key("kv-disk-dir", &S::kv_disk_dir, true,
                         "folder of KV block files under the host tier, kept across restarts; "
                         "empty: no disk tier"));
  k.push_back(bytes_key("kv-disk-bytes", &S::kv_disk_bytes, 0,
                        "most bytes of block files in kv-disk-dir (LRU); 0: no disk tier"));
  k.push_back(bool_key("kv-check-invariants", &S::kv_check_invariants,
                       "check the KV bookkeeping after every step (a debugging aid; a broken "
                       "invariant fails the engine with the reason)"));
  k.push_back(bool_key("bounded-replay", &S::bounded_replay,
                       "prefill runs the decoder on a bounded tail (MODEL.md 6)"));
  k.push_back(bool_key("clip-prefix", &S::clip_prefix,
                       "without bounded replay: prompt chunks far from the prompt's end run the "
                       "decoder on their last row only (docs/model-notes.md)"));
  k.push_back(choice_key<PrefixReplay>(
      "prefix-replay", &S::prefix_replay,
      {{"exact", PrefixReplay::Exact}, {"window", PrefixReplay::Window}},
      "how a prefix hit rebuilds SWA windows: exact (a hit equals a cold run) or window (W tokens)"));
  k.push_back(int_key("threads", &S::threads, 0, 4096, "kernel threads; 0: all hardware threads"));
  k.push_back(choice_key<kernels::GemmPrecision>(
      "expert-precision", &S::expert_precision,
      {{"f32", kernels::GemmPrecision::F32}, {"int8", kernels::GemmPrecision::Int8}},
      "MoE expert GEMMs: f32 (MODEL.md's numerics) or int8 (FP4 experts on int8 dot products "
      "with q8_0 activations: faster decode, tolerance in docs/model-notes.md)"));
  k.push_back(string_key("speculative-config", &S::speculative_config, true,
                         "speculative decoding as JSON, e.g. {\"method\": \"dspark\", "
                         "\"num_speculative_tokens\": 3}; empty: off"));
  k.push_back(int_key("data-parallel-size", &S::data_parallel_size, 1, 256,
                      "ranks of the instance, each with its own requests and KV cache "
                      "(kv-cache-memory-bytes each); threads are split among them"));
  k.push_back(bool_key("enable-expert-parallel", &S::enable_expert_parallel,
                       "spread the routed experts over the ranks, which then step in lockstep"));
  k.push_back(int_key("num-redundant-experts", &S::num_redundant_experts, 0, 1 << 20,
                      "extra expert slots holding replicas (expert parallel only)"));
  k.push_back(bool_key("enable-eplb", &S::enable_eplb,
                       "live expert load balancing: replan the expert placement from the "
                       "routing counts while serving (expert parallel only)"));
  k.push_back(string_key("eplb-config", &S::eplb_config, true,
                         "live EPLB as JSON, e.g. {\"window_size\": 1000, \"step_interval\": "
                         "3000, \"num_redundant_experts\": 0}; empty: those defaults"));
  k.push_back(string_key("expert-counts-file", &S::expert_counts_file, true,
                         "append every step's per-layer, per-expert routing counts to this file, "
                         "one JSON line per step (troupe bench eplb --counts; expert parallel "
                         "only); empty: off"));
  return k;
}

// A double-quoted YAML scalar: escapes backslash, quote and control characters.
std::string yaml_quote(std::string_view s) {
  std::string out = "\"";
  for (const char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) < 0x20) {
      static const char* hex = "0123456789abcdef";
      out += "\\x";
      out += hex[(c >> 4) & 0xf];
      out += hex[c & 0xf];
      continue;
    }
    out += c;
  }
  return out + "\"";
}

}  // namespace

std::span<const ConfigKey> serve_config_keys() {
  static const std::vector<ConfigKey> keys = make_keys();
  return keys;
}

const ConfigKey* find_serve_config_key(std::string_view name) {
  for (const ConfigKey& k : serve_config_keys())
    if (k.name == name) return &k;
  return nullptr;
}

std::string nearest_serve_config_key(std::string_view name) {
  std::vector<std::string_view> names;
  for (const ConfigKey& k : serve_config_keys()) names.push_back(k.name);
  return nearest_name(name, names);
}

std::string to_yaml(const ServeConfig& cfg) {
  std::ostringstream os;
  for (const ConfigKey& k : serve_config_keys()) {
    const std::string v = k.get(cfg);
    // Quote strings so an empty one, or one YAML would read as a number, stays a string.
    if (k.kind == ValueKind::String)
      os << k.name << ": " << yaml_quote(v) << "\n";
    else
      os << k.name << ": " << v << "\n";
  }
  return os.str();
}

}  // namespace troupe::config

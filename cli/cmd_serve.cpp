// `troupe serve [MODEL_DIR] [--host H --port P --config cfg.yaml ...]`: the OpenAI-compatible
// HTTP daemon (docs/serve.md). It listens first and answers /health with 503 while the
// model loads, then serves through the engine actors. SIGTERM / SIGINT: stop accepting,
// let in-flight requests finish within a grace period (then end them with an error), exit 0.
#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <pthread.h>
#include <thread>

#include "actors/engine_actors.h"
#include "cli/args.h"
#include "cli/commands.h"
#include "cli/loaded_model.h"
#include "cli/logging.h"
#include "config/load.h"
#include "kernels/check.h"
#include "net/http/actor_bridge.h"
#include "net/http/server.h"
#include "net/metrics/serving_metrics.h"
#include "net/tcp/server.h"

namespace troupe::cli {
namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kShutdownGrace = std::chrono::seconds(30);  // in-flight requests may finish
constexpr auto kAbortWait = std::chrono::seconds(5);       // aborted ones to be answered

void say(const std::string& line) {
  std::printf("troupe: %s\n", line.c_str());
  std::fflush(stdout);  // tests and supervisors read these lines through a pipe
}

// SIGTERM and SIGINT are blocked in every thread (set before any is started) and taken by
// one thread with sigwait, which wakes the main thread.
class ShutdownSignal {
 public:
  ShutdownSignal() {
    sigemptyset(&set_);
    sigaddset(&set_, SIGTERM);
    sigaddset(&set_, SIGINT);
    pthread_sigmask(SIG_BLOCK, &set_, nullptr);
    std::thread([this] {
      int sig = 0;
      sigwait(&set_, &sig);
      std::lock_guard lock(mutex_);
      signal_ = sig;
      cv_.notify_all();
    }).detach();  // lives as long as the process when no signal comes
  }
  int wait() {
    std::unique_lock lock(mutex_);
    cv_.wait(lock, [&] { return signal_ != 0; });
    return signal_;
  }

 private:
  sigset_t set_;
  std::mutex mutex_;
  std::condition_variable cv_;
  int signal_ = 0;
};

config::ServeConfig read_config(const CommandArgs& argv) {
  const std::set<std::string> values = config::serve_value_flags();
  const std::set<std::string> bools = config::serve_bool_flags();
  Args a(argv, values, bools);
  std::map<std::string, std::string> flags;
  for (const auto& set : {values, bools})
    for (const std::string& f : set)
      if (a.has(f)) flags[f] = *a.get(f);
  if (a.positional().size() > 1) TROUPE_FAIL("serve takes one MODEL_DIR, got " << a.positional().size());
  if (!a.positional().empty()) flags["model"] = a.positional().front();
  config::ServeConfig cfg = config::resolve_serve_config(flags);
  if (runtime::parse_speculative_config(cfg.speculative_config).method == "oracle")
    TROUPE_FAIL("speculative-config: method \"oracle\" is a bench/test mode (troupe bench "
                "forward --speculative); troupe serve takes \"dspark\"");
  return cfg;
}

std::string served_name(const config::ServeConfig& cfg, const std::string& dir) {
  if (!cfg.served_model_name.empty()) return cfg.served_model_name;
  const std::string base = std::filesystem::path(dir).filename().string();
  return base.empty() ? "troupe" : base;
}

// Listens (HTTP or the TCP API) or stops startup with a message naming the flag and the
// port. A busy --tcp-port is an error like a busy --port: a daemon that quietly lacks its
// TCP API fails its TCP clients later, far from the cause (say a second daemon left on
// the default tcp-port 8001).
template <class Listener>
uint16_t listen_or_fail(Listener& listener, const char* flag, int64_t port) {
  try {
    return listener.listen();
  } catch (const Error& e) {
    TROUPE_FAIL("--" << flag << " " << port << ": " << e.what()
                     << " (pick a free port; 0 lets the OS choose one)");
  }
}

std::chrono::milliseconds ms(double seconds) {
  return std::chrono::milliseconds(std::llround(seconds * 1000));
}

net::http::ServerOptions http_options(const config::ServeConfig& cfg) {
  net::http::ServerOptions o{cfg.host, static_cast<uint16_t>(cfg.port), cfg.api_key,
                             static_cast<size_t>(cfg.max_body_bytes), 2};
  o.header_timeout = ms(cfg.http_header_timeout);
  o.body_timeout = ms(cfg.http_body_timeout);
  o.idle_timeout = ms(cfg.http_idle_timeout);
  o.max_connections = static_cast<size_t>(cfg.max_connections);
  o.max_queued_bytes = static_cast<size_t>(cfg.max_queued_output_bytes);
  o.write_timeout = ms(cfg.write_timeout);
  return o;
}

net::tcp::TcpServerOptions tcp_options(const config::ServeConfig& cfg) {
  net::tcp::TcpServerOptions o{cfg.host, static_cast<uint16_t>(cfg.tcp_port), cfg.api_key,
                               static_cast<size_t>(cfg.max_body_bytes), 1,
                               static_cast<size_t>(cfg.tcp_max_buffered_bytes),
                               static_cast<size_t>(cfg.max_connections)};
  o.max_queued_bytes = static_cast<size_t>(cfg.max_queued_output_bytes);
  o.write_timeout = ms(cfg.write_timeout);
  return o;
}

// Stop accepting; wait for in-flight requests, then abort the rest; stop the threads.
void shut_down(net::http::Server& server, net::tcp::TcpServer& tcp, net::http::EngineBridge* bridge) {
  server.drain();
  tcp.drain();
  const auto until = Clock::now() + kShutdownGrace;
  const auto left = [&] { return std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now()); };
  if (!(server.wait_idle(left()) && tcp.wait_idle(left())) && bridge) {
    say("grace period over: ending " + std::to_string(bridge->in_flight()) +
        " requests with an error");
    bridge->fail_all("the server shut down before the request finished (grace period over)");
    server.wait_idle(kAbortWait);
    tcp.wait_idle(kAbortWait);
  }
  server.stop();
  tcp.stop();
  if (bridge) bridge->kill_all();
}

// The faults to inject: the inject-faults key, else $TROUPE_INJECT_FAULTS (checked like
// the key: a bad spec stops start-up).
std::shared_ptr<const runtime::FaultPlan> fault_plan(const config::ServeConfig& cfg) {
  std::string spec = cfg.inject_faults;
  const char* env = std::getenv("TROUPE_INJECT_FAULTS");
  const char* from = "inject-faults";
  if (spec.empty() && env != nullptr) spec = env, from = "TROUPE_INJECT_FAULTS";
  if (spec.empty()) return nullptr;
  try {
    auto plan = std::make_shared<runtime::FaultPlan>(runtime::FaultPlan::parse(spec));
    spdlog::warn("injecting faults ({}): {}", from, spec);
    return plan;
  } catch (const Error& e) {
    TROUPE_FAIL(from << ": " << e.what());
  }
}

// Spawns the engine, or stops start-up with why its config cannot work (before any
// request could find out).
actors::scheduler_actor spawn_checked_engine(caf::actor_system& sys, const model::Forward& forward,
                                             const LoadedModel& model,
                                             const runtime::EngineConfig& engine_cfg,
                                             actors::EngineOptions options) {
  try {
    return actors::spawn_engine(sys, forward, model.tokenizer.get(), engine_cfg,
                                std::move(options));
  } catch (const Error& e) {
    TROUPE_FAIL("the engine config cannot work with this model: "
                << e.what() << " (kv-cache-memory-bytes, max-num-seqs, block-size)");
  }
}

}  // namespace

int run_serve(const CommandArgs& argv) {
  const config::ServeConfig cfg = read_config(argv);
  ShutdownSignal signal;  // before any thread starts
  config::apply_process_settings(cfg);
  setup_logging(cfg.log_level, cfg.log_format);
  const std::shared_ptr<const runtime::FaultPlan> faults = fault_plan(cfg);

  // Owned here in this order so each outlives what uses it: the actors (destroyed with
  // the actor system, first) use the bridge, metrics and model.
  std::unique_ptr<LoadedModel> model;
  std::shared_ptr<runtime::EngramHostTables> engram;  // the model's Engram tables read here
  std::unique_ptr<DraftModel> draft;  // speculative-config dspark: the ranks' drafter
  net::metrics::Registry registry;
  std::unique_ptr<net::metrics::ServingMetrics> metrics;
  std::unique_ptr<net::http::EngineBridge> bridge;
  net::http::Server server(http_options(cfg));
  net::tcp::TcpServer tcp(tcp_options(cfg));
  caf::actor_system_config caf_cfg;
  caf::actor_system sys{caf_cfg};

  const uint16_t port = listen_or_fail(server, "port", cfg.port);
  const uint16_t tcp_port = listen_or_fail(tcp, "tcp-port", cfg.tcp_port);
  say("listening on http://" + cfg.host + ":" + std::to_string(port));
  say("listening on tcp://" + cfg.host + ":" + std::to_string(tcp_port) + " (msgpack TCP API)");
  say("loading model " + (cfg.model.empty() ? std::string("(built-in tiny model)") : cfg.model));
  const auto t0 = Clock::now();
  model = load_model(cfg.model, /*need_tokenizer=*/true);
  char took[32];
  std::snprintf(took, sizeof took, "%.2f s", std::chrono::duration<double>(Clock::now() - t0).count());
  say(std::string("model loaded in ") + took);
  // One copy of the Engram tables for the node, in a shared host mapping (the owner).
  engram = runtime::EngramHostTables::adopt(model->weights, model->config);
  if (engram) {
    char mib[32];
    std::snprintf(mib, sizeof mib, "%.1f MiB", double(engram->table_bytes()) / (1 << 20));
    say("engram: " + std::to_string(engram->layers()) + " tables, " + mib +
        " in one shared host mapping on " + engram->mapping().describe());
  }

  runtime::EngineConfig engine_cfg = cfg.to_engine_config();
  const int64_t max_len = std::min<int64_t>(cfg.max_model_len, model->config.max_position_embeddings);
  engine_cfg.scheduler.max_model_len = max_len;
  auto backend = std::make_shared<net::http::Backend>();
  backend->info.model_name = served_name(cfg, model->dir);
  backend->info.max_model_len = max_len;
  backend->info.max_body_bytes = static_cast<size_t>(cfg.max_body_bytes);
  backend->info.faults = faults.get();
  metrics = std::make_unique<net::metrics::ServingMetrics>(registry, backend->info.model_name);

  actors::EngineOptions engine_opts;
  engine_opts.faults = faults;
  engine_opts.health = std::make_shared<actors::InstanceHealth>();
  engine_opts.request_timeout = cfg.request_timeout;
  engine_opts.max_restarts = static_cast<int>(cfg.max_engine_restarts);
  engine_opts.restart_window_seconds = cfg.engine_restart_window;
  engine_opts.data_parallel_size = static_cast<int>(cfg.data_parallel_size);
  engine_opts.expert_parallel = cfg.enable_expert_parallel;
  engine_opts.num_redundant_experts = cfg.redundant_experts();
  engine_opts.eplb = cfg.eplb();
  engine_opts.expert_counts_file = cfg.expert_counts_file;
  if (engram)
    engine_opts.engram_owner =
        actors::spawn_engram_owner(sys, model->config, model->weights, engram);
  if (cfg.data_parallel_size > 1 || cfg.enable_expert_parallel)
    say("instance: " + std::to_string(cfg.data_parallel_size) + " ranks, " +
        (cfg.enable_expert_parallel
             ? "expert parallel (" + std::to_string(engine_opts.num_redundant_experts) +
                   " redundant expert slots), lockstep steps with DP sync" +
                   (engine_opts.eplb.enabled
                        ? ", live EPLB every " + std::to_string(engine_opts.eplb.step_interval) +
                              " steps over the last " +
                              std::to_string(engine_opts.eplb.window_size)
                        : std::string())
             : "each holding every expert, stepping on its own"));
  if (engine_cfg.speculative.enabled()) {
    draft = load_draft(*model);
    engine_opts.drafter = draft->drafter.get();
    say("speculative decoding: " + engine_cfg.speculative.method + ", " +
        std::to_string(engine_cfg.speculative.num_speculative_tokens) + " draft tokens per step");
    // vLLM's per-position series exist from the start, at 0.
    metrics->record_spec_decode(
        0, 0, 0, std::vector<int64_t>(size_t(engine_cfg.speculative.num_speculative_tokens), 0));
  }
  auto engine = spawn_checked_engine(sys, draft ? *draft->forward : *model->forward, *model,
                                     engine_cfg, engine_opts);
  auto router = actors::spawn_router(sys, {engine});
  bridge = net::http::make_engine_bridge(sys, router, *metrics, engine_opts.health);
  backend->tokenizer = model->tokenizer.get();
  backend->engine = bridge.get();
  backend->registry = &registry;
  backend->metrics = metrics.get();
  backend->created = static_cast<int64_t>(std::time(nullptr));
  server.set_backend(backend);
  tcp.set_backend(backend);
  say("ready: serving '" + backend->info.model_name + "'");

  const int sig = signal.wait();
  say(std::string(sig == SIGINT ? "SIGINT" : "SIGTERM") + ": shutting down");
  shut_down(server, tcp, bridge.get());
  caf::anon_send_exit(router, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(engine, caf::exit_reason::user_shutdown);
  say("stopped");
  return 0;
}

}  // namespace troupe::cli

// `troupe serve [MODEL_DIR] [--host H --port P --config cfg.yaml ...]`: the OpenAI-compatible
// HTTP daemon (docs/serve.md). It listens first and answers /health with 503 while the
// model loads, then serves through the engine actors. SIGTERM / SIGINT: stop accepting,
// let in-flight requests finish within a grace period (then end them with an error), exit 0.
#include <pthread.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <caf/all.hpp>
#include <caf/io/all.hpp>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <exception>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "actors/control_plane.h"
#include "actors/engine_actors.h"
#include "cli/args.h"
#include "cli/commands.h"
#include "cli/control_plane_setup.h"
#include "cli/loaded_model.h"
#include "cli/logging.h"
#include "cli/serve_engine.h"
#include "config/cluster_config.h"
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

// What this process serves: a ServeConfig, and with a cluster file this node's part.
struct ServeSetup {
  config::ServeConfig cfg;
  std::optional<config::ClusterConfig> cluster;
  std::optional<config::NodeRun> node;
};

// `--config cluster.yaml --node NAME [--insecure]`: the node's settings come from the
// cluster file alone (the same file on every node), so other flags are refused.
void read_cluster_node(ServeSetup& setup, const Args& a, const std::string& path,
                       const std::map<std::string, std::string>& flags) {
  if (!a.positional().empty())
    TROUPE_FAIL("with a cluster file, the model is each node's 'model' key, not a MODEL_DIR");
  for (const auto& [flag, value] : flags)
    if (flag != "config")
      TROUPE_FAIL("flag --" << flag << " does not apply with a cluster file: put it in the "
                               "file's serve: section, the same for every node");
  if (!a.has("node")) TROUPE_FAIL("a cluster file needs --node NAME (which node this process is)");
  setup.cluster = config::load_cluster_config(path);
  setup.node = config::plan_node(*setup.cluster, *a.get("node"), a.has("insecure"));
  setup.cfg = setup.node->serve;
}

ServeSetup read_setup(const CommandArgs& argv) {
  std::set<std::string> values = config::serve_value_flags();
  std::set<std::string> bools = config::serve_bool_flags();
  values.insert("node");
  bools.insert("insecure");
  Args a(argv, values, bools);
  std::map<std::string, std::string> flags;
  for (const auto& set : {values, bools})
    for (const std::string& f : set)
      if (a.has(f)) flags[f] = *a.get(f);
  flags.erase("node");
  flags.erase("insecure");
  if (a.positional().size() > 1) TROUPE_FAIL("serve takes one MODEL_DIR, got " << a.positional().size());
  const auto file = flags.find("config");
  const bool cluster = file != flags.end() &&
                       config::is_cluster_config(config::read_text_file(file->second, "config file"));
  if (!cluster && (a.has("node") || a.has("insecure")))
    TROUPE_FAIL("--node and --insecure go with a cluster file (--config with a 'nodes' list)");
  ServeSetup setup;
  if (cluster) {
    read_cluster_node(setup, a, file->second, flags);
  } else {
    if (!a.positional().empty()) flags["model"] = a.positional().front();
    setup.cfg = config::resolve_serve_config(flags);
  }
  if (runtime::parse_speculative_config(setup.cfg.speculative_config).method == "oracle")
    TROUPE_FAIL("speculative-config: method \"oracle\" is a bench/test mode (troupe bench "
                "forward --speculative); troupe serve takes \"dspark\"");
  return setup;
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
  net::http::ServerOptions o;
  o.host = cfg.host;
  o.port = static_cast<uint16_t>(cfg.port);
  o.api_key = cfg.api_key;
  o.max_body_bytes = static_cast<size_t>(cfg.max_body_bytes);
  o.io_threads = 2;
  o.header_timeout = ms(cfg.http_header_timeout);
  o.body_timeout = ms(cfg.http_body_timeout);
  o.idle_timeout = ms(cfg.http_idle_timeout);
  o.max_connections = static_cast<size_t>(cfg.max_connections);
  o.max_queued_bytes = static_cast<size_t>(cfg.max_queued_output_bytes);
  o.write_timeout = ms(cfg.write_timeout);
  return o;
}

net::tcp::TcpServerOptions tcp_options(const config::ServeConfig& cfg) {
  net::tcp::TcpServerOptions o;
  o.host = cfg.host;
  o.port = static_cast<uint16_t>(cfg.tcp_port);
  o.api_key = cfg.api_key;
  o.max_frame_bytes = static_cast<size_t>(cfg.max_body_bytes);
  o.io_threads = 1;
  o.max_buffered_bytes = static_cast<size_t>(cfg.tcp_max_buffered_bytes);
  o.max_connections = static_cast<size_t>(cfg.max_connections);
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

// The engine of a cluster node that is one rank of an expert-parallel group spread over
// nodes: its rank, and where the group forms (rank 0's node).
std::optional<actors::GroupMembership> membership(const ServeSetup& setup) {
  if (!setup.node || !setup.node->engine || !setup.node->engine->group_member) return std::nullopt;
  const config::ClusterEngine& e = *setup.node->engine;
  const config::ClusterNode& leader = *setup.cluster->node(e.leader);
  return actors::GroupMembership{e.instance, e.rank, e.ranks, leader.host,
                                 static_cast<uint16_t>(leader.port)};
}

// Publishes a cluster node's engine on the node's control port, for the router (and, for a
// group's rank 0, the other ranks' joins) to dial, or stops start-up saying why it cannot.
void publish_engine(caf::actor_system& sys, const ServeSetup& setup,
                    const actors::scheduler_actor& engine) {
  const config::ClusterNode& node = *setup.node->node;
  const auto port = actors::publish_control(engine, node.host, static_cast<uint16_t>(node.port));
  if (!port)
    TROUPE_FAIL("node '" << node.name << "': cannot listen on its control port " << node.host
                         << ":" << node.port << ": " << sys.render(port.error()));
}

// Ends the actors start-up spawned (the engine, the router) when it throws after
// spawning them. The actor system's destructor waits for every actor, so an error thrown
// while the engine ran (its control port held by another process) hung the process with
// its message unsaid and SIGTERM unheard.
class StopActorsOnThrow {
 public:
  StopActorsOnThrow() = default;
  StopActorsOnThrow(const StopActorsOnThrow&) = delete;
  StopActorsOnThrow& operator=(const StopActorsOnThrow&) = delete;
  template <class Handle>
  void watch(const Handle& actor) {
    actors_.push_back(caf::actor_cast<caf::actor>(actor));
  }
  ~StopActorsOnThrow() {
    if (std::uncaught_exceptions() > uncaught_)
      for (const caf::actor& a : actors_) caf::anon_send_exit(a, caf::exit_reason::kill);
  }

 private:
  std::vector<caf::actor> actors_;
  int uncaught_ = std::uncaught_exceptions();
};

// A cluster node that runs an engine and not the router: the engine, published on the
// node's control port for the router to dial (docs/cluster.md).
int run_engine_node(const ServeSetup& setup, ShutdownSignal& signal) {
  const config::ServeConfig& cfg = setup.cfg;
  std::unique_ptr<ServedModel> model;  // outlives the actor system
  std::unique_ptr<ServingEngine> engine;
  caf::actor_system_config caf_cfg;
  actors::add_wire_types(caf_cfg);
  const auto tls = load_control_plane(caf_cfg, *setup.cluster);  // outlives the actor system
  caf::actor_system sys{caf_cfg};
  StopActorsOnThrow stop_on_throw;  // after sys: it runs first
  model = load_serving_model(cfg);
  engine = start_engine(sys, cfg, *model, fault_plan(cfg), membership(setup));
  stop_on_throw.watch(engine->engine);
  publish_engine(sys, setup, engine->engine);
  say("ready: " + setup.node->engine->describe(*setup.cluster) + ", waiting for the router '" +
      setup.cluster->router.node + "'");
  const int sig = signal.wait();
  say(std::string(sig == SIGINT ? "SIGINT" : "SIGTERM") + ": shutting down");
  caf::anon_send_exit(engine->engine, caf::exit_reason::user_shutdown);
  say("stopped");
  return 0;
}

actors::EngineRole engine_role(config::InstanceRole r) {
  switch (r) {
    case config::InstanceRole::Prefill: return actors::EngineRole::Prefill;
    case config::InstanceRole::Decode: return actors::EngineRole::Decode;
    case config::InstanceRole::Mixed: break;
  }
  return actors::EngineRole::Mixed;
}

}  // namespace

int run_serve(const CommandArgs& argv) {
  const ServeSetup setup = read_setup(argv);
  const config::ServeConfig& cfg = setup.cfg;
  ShutdownSignal signal;  // before any thread starts
  config::apply_process_settings(cfg);
  setup_logging(cfg.log_level, cfg.log_format);
  if (setup.node && !setup.node->router) return run_engine_node(setup, signal);
  // The router of a cluster with engines in other processes dials them (middleman).
  const bool cluster_router = setup.node && !setup.node->single_process();
  const std::shared_ptr<const runtime::FaultPlan> faults = fault_plan(cfg);

  // Owned here in this order so each outlives what uses it: the actors (destroyed with
  // the actor system, first) use the bridge, metrics, engine and model.
  std::unique_ptr<ServedModel> model;
  std::unique_ptr<ServingEngine> local;  // this process's engine, if it runs one
  net::metrics::Registry registry;
  std::unique_ptr<net::metrics::ServingMetrics> metrics;
  std::unique_ptr<net::http::EngineBridge> bridge;
  net::http::Server server(http_options(cfg));
  net::tcp::TcpServer tcp(tcp_options(cfg));
  caf::actor_system_config caf_cfg;
  actors::add_wire_types(caf_cfg);  // the payloads that may cross a process (actors/wire.h)
  std::unique_ptr<net::control::ClusterTls> tls;  // outlives the actor system
  if (cluster_router) tls = load_control_plane(caf_cfg, *setup.cluster);
  caf::actor_system sys{caf_cfg};
  StopActorsOnThrow stop_on_throw;  // after sys: it runs first

  const uint16_t port = listen_or_fail(server, "port", cfg.port);
  const uint16_t tcp_port = listen_or_fail(tcp, "tcp-port", cfg.tcp_port);
  say("listening on http://" + cfg.host + ":" + std::to_string(port));
  say("listening on tcp://" + cfg.host + ":" + std::to_string(tcp_port) + " (msgpack TCP API)");
  // A cluster router without an engine still needs the tokenizer and the model's limits.
  model = load_serving_model(cfg);
  const bool runs_engine = !setup.node || setup.node->engine;
  if (runs_engine) local = start_engine(sys, cfg, *model, faults, membership(setup));
  if (local) stop_on_throw.watch(local->engine);
  // The router's node holding rank 0 of a spread group: the other ranks join it here.
  if (local && membership(setup)) publish_engine(sys, setup, local->engine);
  const int64_t max_len = std::min<int64_t>(cfg.max_model_len, model->max_positions());
  auto backend = std::make_shared<net::http::Backend>();
  backend->info.model_name = served_name(cfg, model->path);
  backend->info.max_model_len = max_len;
  backend->info.max_body_bytes = static_cast<size_t>(cfg.max_body_bytes);
  backend->info.faults = faults.get();
  metrics = std::make_unique<net::metrics::ServingMetrics>(registry, backend->info.model_name);
  if (local && local->config.speculative.enabled())  // vLLM's per-position series exist from the start
    metrics->record_spec_decode(
        0, 0, 0, std::vector<int64_t>(size_t(local->config.speculative.num_speculative_tokens), 0));

  actors::router_actor router;
  std::shared_ptr<actors::InstanceHealth> health;
  if (cluster_router) {
    std::vector<actors::ClusterEngineAddress> remote;
    for (const config::ClusterEngine& e : setup.node->remote) {
      const config::ClusterNode& n = *setup.cluster->node(e.node);
      remote.push_back({e.describe(*setup.cluster), n.host, static_cast<uint16_t>(n.port),
                        e.group_member ? e.instance : std::string(), engine_role(e.role),
                        e.instance});
    }
    std::vector<actors::LocalEngine> here;
    if (local) {
      const config::ClusterEngine& e = *setup.node->engine;
      here.push_back({e.describe(*setup.cluster), local->engine,
                      e.group_member ? e.instance : std::string(), engine_role(e.role),
                      e.instance});
    }
    health = std::make_shared<actors::InstanceHealth>();
    router = actors::spawn_cluster_router(sys, std::move(remote), std::move(here), health);
    say("cluster router: " + std::to_string(setup.node->remote.size()) +
        " engine(s) on other nodes, dialed until they answer");
  } else {
    health = local->health;
    router = actors::spawn_router(sys, {local->engine});
  }
  stop_on_throw.watch(router);
  bridge = net::http::make_engine_bridge(sys, router, *metrics, health);
  backend->tokenizer = model->tokenizer();
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
  if (local) caf::anon_send_exit(local->engine, caf::exit_reason::user_shutdown);
  say("stopped");
  return 0;
}

}  // namespace troupe::cli

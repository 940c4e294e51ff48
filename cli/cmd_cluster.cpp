// `troupe cluster status --config cluster.yaml`: each node, instance and rank of a cluster
// file with its state, asked over the control plane (docs/cluster.md): an engine node is
// dialed on its control port (CAF middleman) and asked for its figures; the router is
// asked for /health on its HTTP port. Exit 0 when everything answered and is up, else 1.
#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include <chrono>
#include <cstdio>
#include <string>

#include "actors/control_plane.h"
#include "actors/engine_actors.h"
#include "cli/args.h"
#include "cli/commands.h"
#include "cli/control_plane_setup.h"
#include "cli/http_call.h"
#include "config/cluster_config.h"
#include "kernels/check.h"

namespace troupe::cli {
namespace {

// GET /health on host:port: "200" or "503: <body>", or why it could not be asked.
std::string router_health(const std::string& host, int64_t port) {
  if (port == 0) return "not probed (http-port 0: the OS picks it)";
  const HttpAnswer a = http_call(host, port, "GET", "/health");
  if (a.status == 0) return "unreachable: " + a.body;
  return a.status == 200 ? std::string("up (/health 200)")
                         : "not ready (/health " + std::to_string(a.status) + ": " + a.body + ")";
}

// Dials an engine node and asks for its figures.
std::string engine_state(caf::actor_system& sys, const config::ClusterNode& n, bool& up) {
  up = false;
  auto engine = actors::dial_control<actors::scheduler_actor>(sys, n.host, uint16_t(n.port));
  if (!engine) return "unreachable: " + sys.render(engine.error());
  std::string state;
  caf::scoped_actor self{sys};
  self->request(*engine, std::chrono::seconds(3), actors::stats_atom::value)
      .receive(
          [&](const runtime::EngineFigures& f) {
            up = true;
            // The tokens its steps computed: says what ran where (a P/D decode engine
            // computes one token a decode step, no prompt).
            char line[192];
            std::snprintf(line, sizeof line,
                          "up: %lld running, %lld waiting, KV %.1f%%, %lld tokens computed, %lld steps",
                          static_cast<long long>(f.running), static_cast<long long>(f.waiting),
                          100.0 * f.kv_usage, static_cast<long long>(f.scheduled_tokens),
                          static_cast<long long>(f.steps));
            state = line;
          },
          [&](const caf::error& e) { state = "no answer: " + sys.render(e); });
  return state;
}

int cluster_status(const CommandArgs& argv) {
  Args a(argv, {"config"}, {});
  if (!a.positional().empty()) TROUPE_FAIL("cluster status takes no positional arguments");
  if (!a.has("config")) TROUPE_FAIL("cluster status needs --config cluster.yaml");
  const config::ClusterConfig c = config::load_cluster_config(*a.get("config"));
  const std::vector<config::ClusterEngine> engines = config::cluster_engines(c);
  caf::actor_system_config cfg;
  actors::add_wire_types(cfg);
  const auto tls = load_control_plane(cfg, c, /*announce=*/false);  // outlives the system
  caf::actor_system sys{cfg};
  bool all_up = true;
  const config::ClusterNode& router = *c.node(c.router.node);
  const std::string health = router_health(router.host, c.router.http_port);
  all_up = all_up && (health.rfind("up", 0) == 0 || c.router.http_port == 0);
  std::printf("router  node %s (%s:%lld http)  %s\n", router.name.c_str(), router.host.c_str(),
              static_cast<long long>(c.router.http_port), health.c_str());
  for (const config::ClusterEngine& e : engines) {
    bool up = false;
    // The router node's own engine answers through the router's /health.
    const std::string state = e.node == c.router.node
                                  ? std::string("in the router's process (see above)")
                                  : engine_state(sys, *c.node(e.node), up);
    if (e.node != c.router.node) all_up = all_up && up;
    std::printf("engine  %s  %s\n", e.describe(c).c_str(), state.c_str());
  }
  return all_up ? 0 : 1;
}

}  // namespace

int run_cluster(const CommandArgs& argv) {
  if (argv.empty() || argv[0] != "status")
    TROUPE_FAIL("cluster: which? available: status (cluster status --config cluster.yaml)");
  return cluster_status(CommandArgs(argv.begin() + 1, argv.end()));
}

}  // namespace troupe::cli

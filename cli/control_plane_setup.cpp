#include "cli/control_plane_setup.h"

#include <caf/io/middleman.hpp>

#include "cli/serve_engine.h"

namespace troupe::cli {

std::unique_ptr<net::control::ClusterTls> load_control_plane(caf::actor_system_config& cfg,
                                                             const config::ClusterConfig& cluster,
                                                             bool announce) {
  cfg.load<caf::io::middleman>();  // before the openssl manager, which needs it
  if (cluster.secret.empty()) {
    if (announce)
      say("control plane: plain TCP, no cluster secret (anyone who reaches a control port can "
        "join; docs/cluster.md \"Security\")");
    return nullptr;
  }
  auto tls = std::make_unique<net::control::ClusterTls>(cluster.secret);
  tls->apply(cfg);
  if (announce)
    say("control plane: TLS, peers must hold the cluster secret (key fingerprint " +
      tls->fingerprint() + ")");
  return tls;
}

}  // namespace troupe::cli

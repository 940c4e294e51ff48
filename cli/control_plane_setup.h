// The control plane of a cluster process (docs/cluster.md "Security"): CAF's middleman,
// over TLS keyed by the cluster secret when the file has one, plain TCP when it has none
// (one host, or --insecure), said once on stdout.
#pragma once

#include <caf/actor_system_config.hpp>
#include <memory>

#include "config/cluster_config.h"
#include "net/control/cluster_tls.h"

namespace troupe::cli {

// Loads the middleman (and CAF's openssl manager with the cluster's credentials) into cfg.
// The returned credentials' files are read at every new connection: keep them alive until
// the actor system is gone. Null without a secret. `announce`: say which on stdout.
std::unique_ptr<net::control::ClusterTls> load_control_plane(caf::actor_system_config& cfg,
                                                             const config::ClusterConfig& cluster,
                                                             bool announce = true);

}  // namespace troupe::cli

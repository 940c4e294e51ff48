// The control plane's connections between troupe processes (docs/cluster.md): CAF's
// middleman, over TLS when the process loaded CAF's openssl manager (a cluster with a
// secret: net/control/cluster_tls.h), plain otherwise (one host without a secret, or
// --insecure). Every publish and dial goes through here, so no connection of a secured
// cluster bypasses TLS.
#pragma once

#include <caf/actor_system.hpp>
#include <caf/expected.hpp>
#include <caf/io/middleman.hpp>
#include <caf/io/middleman_actor.hpp>
#include <caf/openssl/publish.hpp>
#include <caf/openssl/remote_actor.hpp>

#include <cstdint>
#include <string>

namespace troupe::actors {

// The middleman actor to send connect_atom requests to (asynchronous dials).
caf::io::middleman_actor control_middleman(caf::actor_system& sys);

// Whether this process's control connections use TLS.
inline bool control_plane_secured(const caf::actor_system& sys) {
  return sys.has_openssl_manager();
}

// Publishes `whom` (its typed interface, which a dialer may check) on host:port, reusing
// the address, over TLS when secured.
template <class Handle>
caf::expected<uint16_t> publish_control(const Handle& whom, const std::string& host,
                                        uint16_t port) {
  caf::actor_system& sys = whom.home_system();
  if (control_plane_secured(sys)) return caf::openssl::publish(whom, port, host.c_str(), true);
  return sys.middleman().publish(whom, port, host.c_str(), true);
}

// A blocking dial for command-line tools (troupe cluster status): the actor published at
// host:port, or why not.
template <class Handle>
caf::expected<Handle> dial_control(caf::actor_system& sys, const std::string& host,
                                   uint16_t port) {
  if (control_plane_secured(sys)) return caf::openssl::remote_actor<Handle>(sys, host, port);
  return sys.middleman().remote_actor<Handle>(host, port);
}

}  // namespace troupe::actors

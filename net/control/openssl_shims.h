// The four OpenSSL calls CAF 0.17's openssl module makes for a connection (SSL_accept,
// SSL_connect, SSL_read, SSL_write), wrapped by this program: it defines those symbols, so
// libcaf_openssl's calls reach it first, and each wrapper forwards to libssl's own
// function (dlsym RTLD_NEXT). Nothing else in troupe speaks TLS. Two things are added:
//
// 1. The thread's OpenSSL error queue is cleared before each call. OpenSSL requires it
//    (SSL_get_error reads that queue) and CAF does not do it: its multiplexer thread
//    serves every connection, so the error one connection left behind (a refused or
//    closed peer) made SSL_get_error report the next healthy connection's ordinary
//    "would block" as fatal, and CAF dropped it. Seen as a second connection between two
//    nodes breaking the first (remote_link_unreachable); clearing first fixes it.
// 2. A handshake that fails for good is logged with the peer's address and why, at most
//    once per peer host every 10 s (issue 11: "a peer with a wrong secret is refused and
//    logged"; CAF drops it silently, its own log being compiled out in Debian's build),
//    and counted. Only peeks at the queue, so CAF's SSL_get_error right after sees it.
#pragma once

#include <cstdint>

namespace troupe::net::control {

// Turns the log on (ClusterTls::apply does): before, the handshake wrappers only forward.
void log_refused_handshakes();

// Handshakes that failed in this process since start: accepted connections (a peer
// refused by this node) and outgoing ones (this node refused by a peer, or a peer that
// does not speak TLS with this cluster's certificate).
uint64_t refused_accepts();
uint64_t failed_connects();

}  // namespace troupe::net::control

// The cluster's control plane over TLS (issue 11 "Security"): every node derives the same
// Ed25519 key and self-signed certificate from the cluster secret, presents it, and
// accepts only peers that present it too (CAF's openssl module: mutual authentication,
// SSL_VERIFY_PEER | FAIL_IF_NO_PEER_CERT). A stranger without the secret cannot finish the
// handshake, so it can neither join as a rank nor send a message to any actor; the
// traffic is encrypted as well. docs/cluster.md "Security" says what each port needs.
//
// The key is scrypt(secret) (deliberately slow, about 0.1 s): whoever connects receives the
// public key, and a cheap derivation would let them test guesses of a weak secret offline.
#pragma once

#include <string>

namespace caf {
class actor_system_config;
}

namespace troupe::net::control {

class ClusterTls {
 public:
  // Derives the key and certificate from `secret` (non-empty) and writes both as PEM files
  // into a fresh directory only this user can read (removed again by the destructor):
  // CAF's openssl module takes file names. Throws troupe::Error when OpenSSL or the
  // file system fails.
  explicit ClusterTls(const std::string& secret);
  ~ClusterTls();
  ClusterTls(const ClusterTls&) = delete;
  ClusterTls& operator=(const ClusterTls&) = delete;

  // Loads CAF's openssl manager with these credentials (after the middleman, which must be
  // loaded first) and turns on the log of refused handshakes (openssl_shims.h).
  void apply(caf::actor_system_config& cfg) const;

  // The first 8 bytes of SHA-256 over the public key, in hex: equal on every node of one
  // cluster, different for another secret; safe to log.
  const std::string& fingerprint() const { return fingerprint_; }
  const std::string& certificate_file() const { return cert_file_; }
  const std::string& key_file() const { return key_file_; }

 private:
  std::string dir_, cert_file_, key_file_, fingerprint_;
};

}  // namespace troupe::net::control

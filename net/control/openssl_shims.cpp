#include "net/control/openssl_shims.h"

#include <arpa/inet.h>
#include <dlfcn.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>

#include <array>
#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <unordered_map>

namespace troupe::net::control {

namespace {

std::atomic<bool> g_logging{false};
std::atomic<uint64_t> g_refused_accepts{0}, g_failed_connects{0};

// "10.0.0.2:53312" for the socket's peer, or "an unknown peer".
std::string peer_of(SSL* ssl) {
  const int fd = SSL_get_fd(ssl);
  sockaddr_storage sa{};
  socklen_t len = sizeof sa;
  if (fd < 0 || ::getpeername(fd, reinterpret_cast<sockaddr*>(&sa), &len) != 0)
    return "an unknown peer";
  std::array<char, INET6_ADDRSTRLEN> host{};
  uint16_t port = 0;
  if (sa.ss_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(&sa);
    ::inet_ntop(AF_INET, &in->sin_addr, host.data(), host.size());
    port = ntohs(in->sin_port);
  } else if (sa.ss_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&sa);
    ::inet_ntop(AF_INET6, &in6->sin6_addr, host.data(), host.size());
    port = ntohs(in6->sin6_port);
  } else {
    return "an unknown peer";
  }
  return std::string(host.data()) + ":" + std::to_string(port);
}

// Why the handshake failed, in words an operator can act on, from the verify result and
// the newest queued error. Peeks only: CAF's own SSL_get_error after us sees the same queue.
std::string reason_of(SSL* ssl, int err) {
  const long verify = SSL_get_verify_result(ssl);
  if (verify != X509_V_OK)
    return std::string("its certificate is not this cluster's (") +
           X509_verify_cert_error_string(verify) + "): a different cluster secret";
  if (err == SSL_ERROR_SYSCALL) return "the connection closed during the handshake";
  const unsigned long e = ERR_peek_last_error();
  if (e == 0) return "the handshake failed";
  std::array<char, 256> buf{};
  ERR_error_string_n(e, buf.data(), buf.size());
  const std::string what = buf.data();
  if (what.find("unknown ca") != std::string::npos ||
      what.find("certificate required") != std::string::npos)
    return "it does not accept this cluster's certificate: a different cluster secret (" + what +
           ")";
  if (what.find("wrong version number") != std::string::npos ||
      what.find("http request") != std::string::npos ||
      what.find("unexpected eof") != std::string::npos)
    return "it does not speak TLS: a node without the cluster secret, or not a troupe node (" +
           what + ")";
  return what;
}

// At most one line per peer host every 10 s (a stranger retrying must not flood the log);
// the lines left out are counted into the next one.
void log_failure(SSL* ssl, const std::string& peer, int err, bool accepted) {
  const std::string host = (accepted ? "in " : "out ") + peer.substr(0, peer.rfind(':'));
  static std::mutex mu;
  static std::unordered_map<std::string, std::pair<std::chrono::steady_clock::time_point, uint64_t>> last;
  uint64_t quiet = 0;
  {
    std::lock_guard lock(mu);
    if (last.size() > 4096) last.clear();  // bounded, whatever the number of peers
    const auto now = std::chrono::steady_clock::now();
    auto [it, fresh] = last.try_emplace(host, now, 0);
    if (!fresh && now - it->second.first < std::chrono::seconds(10)) {
      ++it->second.second;
      return;
    }
    quiet = fresh ? 0 : it->second.second;
    it->second = {now, 0};
  }
  const std::string more =
      quiet ? " (" + std::to_string(quiet) + " more from this host not logged)" : "";
  if (accepted)
    spdlog::warn("control port: refused {}: {}{}", peer, reason_of(ssl, err), more);
  else
    spdlog::warn("control plane: the TLS handshake with {} failed: {}{}", peer,
                 reason_of(ssl, err), more);
}

// The real OpenSSL function behind one of the wrappers below.
template <class Fn>
Fn next_symbol(const char* name) {
  return reinterpret_cast<Fn>(::dlsym(RTLD_NEXT, name));
}

using HandshakeFn = int (*)(SSL*);

// What this file remembers of one connection: its peer, read at the first handshake call
// (when the handshake fails the peer may already have closed, and getpeername says
// nothing), and whether its failure was counted (CAF may call the handshake again on a
// connection that already failed, which must not count twice). Freed with the SSL.
struct HandshakeNote {
  std::string peer;
  bool failed = false;
};

int note_index() {
  static const int index = SSL_get_ex_new_index(
      0, nullptr, nullptr, nullptr,
      [](void*, void* note, CRYPTO_EX_DATA*, int, long, void*) {
        delete static_cast<HandshakeNote*>(note);
      });
  return index;
}

HandshakeNote& note_of(SSL* ssl) {
  auto* note = static_cast<HandshakeNote*>(SSL_get_ex_data(ssl, note_index()));
  if (!note) {
    note = new HandshakeNote{peer_of(ssl)};
    SSL_set_ex_data(ssl, note_index(), note);
  }
  return *note;
}

int after_handshake(SSL* ssl, int ret, bool accepted) {
  if (ret == 1 || !g_logging.load(std::memory_order_relaxed)) return ret;
  HandshakeNote& note = note_of(ssl);
  const int err = SSL_get_error(ssl, ret);
  if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) return ret;  // not done yet
  if (note.failed) return ret;
  note.failed = true;
  (accepted ? g_refused_accepts : g_failed_connects).fetch_add(1, std::memory_order_relaxed);
  log_failure(ssl, note.peer, err, accepted);
  return ret;
}

}  // namespace

void log_refused_handshakes() { g_logging.store(true); }
uint64_t refused_accepts() { return g_refused_accepts.load(); }
uint64_t failed_connects() { return g_failed_connects.load(); }

}  // namespace troupe::net::control

// The wrappers (openssl_shims.h): the program's definitions come first for
// libcaf_openssl; each clears the thread's error queue, then calls libssl's own.
extern "C" int SSL_accept(SSL* ssl) {
  using troupe::net::control::HandshakeFn;
  static const auto real = troupe::net::control::next_symbol<HandshakeFn>("SSL_accept");
  ERR_clear_error();
  return troupe::net::control::after_handshake(ssl, real(ssl), /*accepted=*/true);
}

extern "C" int SSL_connect(SSL* ssl) {
  using troupe::net::control::HandshakeFn;
  static const auto real = troupe::net::control::next_symbol<HandshakeFn>("SSL_connect");
  ERR_clear_error();
  return troupe::net::control::after_handshake(ssl, real(ssl), /*accepted=*/false);
}

extern "C" int SSL_read(SSL* ssl, void* buf, int num) {
  using Fn = int (*)(SSL*, void*, int);
  static const auto real = troupe::net::control::next_symbol<Fn>("SSL_read");
  ERR_clear_error();
  return real(ssl, buf, num);
}

extern "C" int SSL_write(SSL* ssl, const void* buf, int num) {
  using Fn = int (*)(SSL*, const void*, int);
  static const auto real = troupe::net::control::next_symbol<Fn>("SSL_write");
  ERR_clear_error();
  return real(ssl, buf, num);
}

// The TCP API listener of `troupe serve` (protocol.h, docs/serve.md): length-prefixed
// msgpack frames on their own port, generation through the same EngineBridge as HTTP.
//
//   TcpServer tcp(options);
//   uint16_t port = tcp.listen();    // submits get an error frame until ...
//   tcp.set_backend(backend);        // ... the model is loaded
//   tcp.drain();                     // SIGTERM: stop accepting, refuse new submits
//   tcp.wait_idle(grace);            // in-flight requests finish (or the caller aborts them)
//   tcp.stop();
//
// Threads: Asio I/O threads; each connection runs on its own strand. Engine outputs arrive
// on CAF threads and are posted to the connection's strand. Several requests may be in
// flight on one connection; when the client disconnects they are all aborted.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "net/http/server.h"

namespace troupe::net::tcp {

struct TcpServerOptions {
  std::string host = "127.0.0.1";
  uint16_t port = 8001;               // 0: the OS picks one; listen() returns it
  std::string api_key;                // non-empty: every submit must carry it
  size_t max_frame_bytes = 64u << 20;  // a longer frame closes the connection
  int io_threads = 1;
};

class TcpServer {
 public:
  explicit TcpServer(TcpServerOptions options);
  ~TcpServer();  // stop()
  TcpServer(const TcpServer&) = delete;
  TcpServer& operator=(const TcpServer&) = delete;

  // Binds, listens and starts the I/O threads; the bound port. Throws troupe::Error
  // naming host:port when it cannot.
  uint16_t listen();
  // The same Backend as the HTTP server's (tokenizer, limits, engine bridge).
  void set_backend(std::shared_ptr<const http::Backend> backend);
  void drain();
  // Until no request is in flight; false on timeout.
  bool wait_idle(std::chrono::milliseconds timeout);
  void stop();  // idempotent

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace troupe::net::tcp

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
// Threads: Asio I/O threads; each connection runs on its own strand. Frames of 256 KiB or
// more are parsed and tokenized on a pool of 2 threads, the result posted back to the
// strand. Engine outputs arrive on CAF threads and are posted to the connection's
// strand. Several requests may be in flight on one connection; when the client
// disconnects, or stops reading its frames (max_queued_bytes, write_timeout), they are
// all aborted. A frame counts as in flight from its last byte until its answer is
// written, so draining answers it. Whatever handling one connection throws stays in that
// connection (an error frame, or it is closed); the others keep going.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "net/http/server.h"

namespace troupe::net::tcp {

// A payload buffer starts this large (or the frame's length, when smaller) and doubles as
// bytes arrive, up to the frame's length: a length header alone holds this much.
constexpr size_t kFirstReadChunk = 4096;

struct TcpServerOptions {
  std::string host = "127.0.0.1";
  uint16_t port = 8001;               // 0: the OS picks one; listen() returns it
  std::string api_key;                // non-empty: every submit must carry it
  size_t max_frame_bytes = 64u << 20;  // a longer frame: an error frame, then closed
  int io_threads = 1;
  // Bytes of partly received frames held over all connections at once (each payload
  // buffer grows as its bytes arrive). A connection whose frame would need more gets an
  // error frame and is closed; the others go on. A frame longer than this is refused
  // like one over max_frame_bytes.
  size_t max_buffered_bytes = 256u << 20;
  size_t max_connections = 0;  // open connections at most (max-connections); 0: no cap
  // A client that does not read its frames: past this many bytes queued for one
  // connection, or a write moving no byte for write_timeout, its requests are aborted and
  // it is closed (max-queued-output-bytes, write-timeout; 0: no limit).
  size_t max_queued_bytes = 4u << 20;
  std::chrono::milliseconds write_timeout{60'000};
  std::function<void()> on_offloaded_parse;  // tests: runs on the pool before each parse
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

  // Bytes of payload buffers held now over all connections, and the most ever held:
  // never above options.max_buffered_bytes.
  size_t buffered_bytes() const;
  size_t peak_buffered_bytes() const;
  // The most output bytes one connection has had queued: at most max_queued_bytes, or one
  // frame when a single frame is larger.
  size_t peak_queued_bytes() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace troupe::net::tcp

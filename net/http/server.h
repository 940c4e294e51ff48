// The HTTP server of `troupe serve` on Boost.Beast: routes (routes.h), the OpenAI bodies
// (net/openai), /metrics (net/metrics) and generation through an EngineBridge.
//
//   Server server(options);
//   uint16_t port = server.listen();   // answers at once: /health is 503 until ...
//   server.set_backend(backend);       // ... the model is loaded; then 200
//   server.drain();                    // SIGTERM: stop accepting, refuse new generations
//   server.wait_idle(grace);           // in-flight responses finish (or the caller aborts them)
//   server.stop();
//
// Threads: a few I/O threads (net/common/listener.h) run every session on its own strand.
// Bodies of at least offload_body_bytes are parsed and tokenized on a small worker pool,
// so a 40 MB prompt does not hold an I/O thread (and /health, /metrics) for seconds; the
// result is posted back to the session's strand. Engine outputs arrive on CAF threads and
// are posted to the session's strand, so neither side blocks the other.
//
// While a generation runs, its session keeps a read pending on the socket, so a client
// that disconnects (EOF or reset) aborts its request within a step. Bytes that arrive
// meanwhile (a pipelined next request) are kept up to pipeline_bytes; past that they are
// read and discarded, and the connection closes after the response.
//
// Refused before routing, each with a JSON error body and `Connection: close` (RFC 9112):
// a malformed request (400), a header over max_header_bytes (431), a body over
// max_body_bytes (413), a header or body that does not arrive in time (408), a body with
// a NUL byte (400), and a connection over max_connections (503). docs/serve.md lists them.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "net/http/engine_bridge.h"
#include "net/metrics/registry.h"
#include "net/openai/request_parse.h"

namespace troupe::model {
class TextTokenizer;
}
namespace troupe::net::metrics {
class ServingMetrics;
}

namespace troupe::net::http {

struct ServerOptions {
  using ms = std::chrono::milliseconds;
  std::string host = "127.0.0.1";
  uint16_t port = 8000;               // 0: the OS picks one; listen() returns it
  std::string api_key;                // empty: no authentication
  size_t max_body_bytes = 64u << 20;  // larger bodies get 413
  int io_threads = 2;
  size_t max_connections = 1024;  // open connections at most; the next gets 503; 0: no cap
  // Timeouts (0: none). The header one runs from the accept (or, on a kept-alive
  // connection, from the next request's first byte) to the end of the header; the body
  // one from there to the end of the body; the idle one while a kept-alive connection
  // waits for its next request. A generation in progress has none of them.
  ms header_timeout{30'000};
  ms body_timeout{120'000};
  ms idle_timeout{60'000};
  size_t max_header_bytes = 64u << 10;       // request line + fields; larger ones get 431
  size_t pipeline_bytes = 64u << 10;         // next-request bytes kept during a response
  int parse_threads = 2;                     // the worker pool parsing large bodies
  size_t offload_body_bytes = 64u << 10;     // bodies this large are parsed there; 0: all
  // A client that does not read its response (a stream it never consumes): past this many
  // bytes queued for the connection, or a write moving no byte for write_timeout, its
  // generation is aborted and the connection closed (max-queued-output-bytes,
  // write-timeout; 0: no limit). The timeout runs only while something is being written.
  size_t max_queued_bytes = 4u << 20;
  ms write_timeout{60'000};
  std::function<void()> on_offloaded_parse;  // tests: runs on the worker before each parse
};

// What the server needs once the model is loaded; every pointer outlives the server's
// threads (Server::stop).
struct Backend {
  const model::TextTokenizer* tokenizer = nullptr;
  openai::ServingInfo info;
  EngineBridge* engine = nullptr;
  const metrics::Registry* registry = nullptr;
  metrics::ServingMetrics* metrics = nullptr;  // the servers' own counts; null: none
  int64_t created = 0;  // unix seconds, for /v1/models
};

class Server {
 public:
  explicit Server(ServerOptions options);
  ~Server();  // stop()
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Binds, listens and starts the I/O threads; the bound port. Throws troupe::Error
  // naming host:port when it cannot.
  uint16_t listen();
  void set_backend(std::shared_ptr<const Backend> backend);
  // Stops accepting; new generation requests and /health get 503; responses close their
  // connection.
  void drain();
  // Until no generation is in progress (its response written, or its client gone);
  // false on timeout.
  bool wait_idle(std::chrono::milliseconds timeout);
  // Stops the I/O threads and the worker pool; pending engine outputs are dropped.
  // Idempotent.
  void stop();

  // Open connections (each counts against max_connections).
  size_t connections() const;
  // Bytes read and thrown away while responses were in progress (past pipeline_bytes).
  uint64_t discarded_bytes() const;
  // The most response bytes one connection has had queued: at most max_queued_bytes, or
  // one message when a single response is larger.
  size_t peak_queued_bytes() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace troupe::net::http

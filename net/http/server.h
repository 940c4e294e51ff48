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
// Threads: a few I/O threads run every session on its own strand. Engine outputs arrive on
// CAF threads and are posted to the session's strand, so neither side blocks the other.
// A generation's session keeps a read pending on the socket while the engine works, so a
// client that disconnects (EOF or reset) aborts its request within a step, streaming or not.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "net/http/engine_bridge.h"
#include "net/metrics/registry.h"
#include "net/openai/request_parse.h"

namespace troupe::model {
class Tokenizer;
}

namespace troupe::net::http {

struct ServerOptions {
  std::string host = "127.0.0.1";
  uint16_t port = 8000;              // 0: the OS picks one; listen() returns it
  std::string api_key;               // empty: no authentication
  size_t max_body_bytes = 64u << 20;  // larger bodies get 413
  int io_threads = 2;
};

// What the server needs once the model is loaded; every pointer outlives the server's
// threads (Server::stop).
struct Backend {
  const model::Tokenizer* tokenizer = nullptr;
  openai::ServingInfo info;
  EngineBridge* engine = nullptr;
  const metrics::Registry* registry = nullptr;
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
  // Stops the I/O threads; pending engine outputs are dropped. Idempotent.
  void stop();

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace troupe::net::http

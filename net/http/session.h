// One HTTP connection of the Server (server.h): reading requests with their timeouts
// and checks, routing, answering, streaming generations. session.cpp is the one Beast
// translation unit (Beast compiles slowly; TOOLCHAIN.md §4).
#pragma once

#include <atomic>
#include <boost/asio.hpp>
#include <cstdint>
#include <memory>
#include <mutex>

#include "net/common/listener.h"
#include "net/http/server.h"
#include "net/openai/errors.h"

namespace troupe::net::http {

// What every session of one Server shares; it outlives them (Server::Impl owns it,
// declared before the Listener whose io_context destroys the sessions).
struct ServerState {
  explicit ServerState(ServerOptions o) : opts(std::move(o)) {
    limits.max_body_bytes = opts.max_body_bytes;
  }
  std::shared_ptr<const Backend> backend() const {
    std::lock_guard lock(mutex);
    return backend_;
  }
  void hold_busy() { busy.add(1); }
  void release_busy() { busy.add(-1); }

  ServerOptions opts;
  openai::ServingInfo limits;  // body size before a backend exists
  mutable std::mutex mutex;
  std::shared_ptr<const Backend> backend_;
  std::atomic<bool> draining{false};
  std::atomic<uint64_t> next_response{1};
  std::atomic<uint64_t> discarded{0};  // Server::discarded_bytes
  std::atomic<size_t> peak_queued{0};  // Server::peak_queued_bytes
  BusyCount busy;  // generations whose response is not yet written (or abandoned)
  boost::asio::thread_pool* workers = nullptr;  // parses large bodies (server.h)
};

// Serves the connection until it closes; `slot` holds its place under the cap.
void start_session(boost::asio::ip::tcp::socket socket, ServerState& srv, ConnectionSlot slot);
// Answers `err` (whatever the client sent) and closes: a connection over the cap.
void refuse_session(boost::asio::ip::tcp::socket socket, ServerState& srv,
                    const openai::ApiError& err);

}  // namespace troupe::net::http

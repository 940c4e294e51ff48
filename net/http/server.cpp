#include "net/http/server.h"

#include <algorithm>
#include <boost/asio.hpp>

#include "net/common/listener.h"
#include "net/http/session.h"

namespace troupe::net::http {

namespace asio = boost::asio;

struct Server::Impl {
  explicit Impl(ServerOptions o)
      : state(std::move(o)),
        listener({state.opts.host, state.opts.port, "http", state.opts.io_threads,
                  state.opts.max_connections}),
        workers(size_t(std::max(1, state.opts.parse_threads))) {
    state.workers = &workers;
  }

  ServerState state;
  Listener listener;          // after `state`: sessions its io_context destroys use it
  asio::thread_pool workers;  // destroyed first: its jobs hold sessions
};

Server::Server(ServerOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {}

Server::~Server() {
  stop();
}

uint16_t Server::listen() {
  ServerState& s = impl_->state;
  return impl_->listener.listen(
      [&s](asio::ip::tcp::socket socket, ConnectionSlot slot) {
        start_session(std::move(socket), s, std::move(slot));
      },
      [&s](asio::ip::tcp::socket socket) {
        refuse_session(std::move(socket), s,
                       {openai::ErrorKind::Unavailable,
                        "too many connections: the server is at its limit of " +
                            std::to_string(s.opts.max_connections) +
                            " open connections (max-connections); retry later",
                        ""});
      });
}

void Server::set_backend(std::shared_ptr<const Backend> backend) {
  std::lock_guard lock(impl_->state.mutex);
  impl_->state.backend_ = std::move(backend);
}

void Server::drain() {
  impl_->state.draining = true;
  impl_->listener.drain();
}

bool Server::wait_idle(std::chrono::milliseconds timeout) {
  return impl_->state.busy.wait_idle(timeout);
}

void Server::stop() {
  impl_->listener.stop();
  impl_->workers.stop();
  impl_->workers.join();
}

size_t Server::connections() const {
  return impl_->listener.connections();
}

uint64_t Server::discarded_bytes() const {
  return impl_->state.discarded.load();
}

size_t Server::peak_queued_bytes() const {
  return impl_->state.peak_queued.load();
}

}  // namespace troupe::net::http

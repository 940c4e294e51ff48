#include "net/common/listener.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "net/common/open_acceptor.h"

namespace troupe::net {

namespace asio = boost::asio;

namespace {

// Frees one place under the cap when the session holding it is destroyed.
ConnectionSlot take_slot(const std::shared_ptr<std::atomic<size_t>>& open) {
  open->fetch_add(1);
  return ConnectionSlot(static_cast<void*>(open.get()), [open](void*) { open->fetch_sub(1); });
}

}  // namespace

Listener::Listener(ListenerOptions options) : opts_(std::move(options)) {}

Listener::~Listener() {
  stop();
}

uint16_t Listener::listen(Accept on_accept, Refuse on_refuse) {
  on_accept_ = std::move(on_accept);
  on_refuse_ = std::move(on_refuse);
  const uint16_t port = open_acceptor(ioc_, acceptor_, opts_.host, opts_.port, opts_.what.c_str());
  work_.emplace(ioc_.get_executor());
  accept_next();
  for (int i = 0; i < std::max(1, opts_.io_threads); ++i) threads_.emplace_back([this] { run(); });
  return port;
}

// An I/O thread. Connections keep what they throw; should anything still escape a
// handler, it is logged and the loop goes on: one client never stops the server.
void Listener::run() {
  for (;;) {
    try {
      ioc_.run();
      return;
    } catch (const std::exception& e) {
      spdlog::error("{}: an I/O handler threw: {}", opts_.what, e.what());
    } catch (...) {
      spdlog::error("{}: an I/O handler threw an unknown exception", opts_.what);
    }
  }
}

void Listener::accept_next() {
  acceptor_.async_accept(
      asio::make_strand(ioc_),
      [this](const boost::system::error_code& ec, Socket s) { on_accepted(ec, std::move(s)); });
}

// Runs on the acceptor's strand, one accept at a time: the count a connection sees is
// exact, so with a cap of N the (N+1)th open connection is refused.
void Listener::on_accepted(const boost::system::error_code& ec, Socket socket) {
  if (!acceptor_.is_open()) return;
  if (ec) {
    // Out of file descriptors (or another transient failure): accepting again at once
    // would fail again at once and spin a core.
    pause_.expires_after(std::chrono::milliseconds(50));
    pause_.async_wait([this](const boost::system::error_code&) {
      if (acceptor_.is_open()) accept_next();
    });
    return;
  }
  const auto ex = socket.get_executor();
  if (opts_.max_connections > 0 && open_->load() >= opts_.max_connections) {
    asio::post(ex, [this, s = std::make_shared<Socket>(std::move(socket))]() mutable {
      if (on_refuse_) return on_refuse_(std::move(*s));
      boost::system::error_code ignored;
      s->close(ignored);
    });
  } else {
    asio::post(ex, [this, slot = take_slot(open_),
                    s = std::make_shared<Socket>(std::move(socket))]() mutable {
      on_accept_(std::move(*s), std::move(slot));
    });
  }
  accept_next();
}

void Listener::drain() {
  asio::post(acceptor_.get_executor(), [this] {
    boost::system::error_code ignored;
    acceptor_.close(ignored);
    pause_.cancel();
  });
}

void Listener::stop() {
  work_.reset();
  ioc_.stop();
  for (std::thread& t : threads_) t.join();
  threads_.clear();
}

}  // namespace troupe::net

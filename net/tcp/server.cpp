#include "net/tcp/server.h"

#include <boost/asio.hpp>

#include <array>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>
#include <vector>

#include "kernels/check.h"
#include "net/http/acceptor.h"
#include "net/tcp/frame.h"
#include "net/tcp/protocol.h"

namespace troupe::net::tcp {

namespace asio = boost::asio;
using asio::ip::tcp;
using boost::system::error_code;

struct TcpServer::Impl {
  explicit Impl(TcpServerOptions o) : opts(std::move(o)) {}

  std::shared_ptr<const http::Backend> backend() const {
    std::lock_guard lock(mutex);
    return backend_;
  }
  void add_busy(int64_t d) {
    std::lock_guard lock(busy_mutex);
    busy += d;
    busy_cv.notify_all();
  }
  void do_accept();

  // Declared before the io_context: connections it destroys still update `busy`.
  TcpServerOptions opts;
  mutable std::mutex mutex;
  std::shared_ptr<const http::Backend> backend_;
  std::atomic<bool> draining{false};
  std::mutex busy_mutex;
  std::condition_variable busy_cv;
  int64_t busy = 0;  // requests in flight over all connections
  asio::io_context ioc;
  tcp::acceptor acceptor{asio::make_strand(ioc)};
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work;
  std::vector<std::thread> threads;
};

namespace {

// One client connection: reads frames one after another, writes frames in order, keeps
// the requests in flight by the client's id. Everything runs on the socket's strand.
class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(tcp::socket socket, TcpServer::Impl& srv) : socket_(std::move(socket)), srv_(srv) {}

  void start() { read_header(); }

 private:
  struct InFlight {
    json id;
    std::shared_ptr<http::Generation> gen;
    int64_t prompt_tokens = 0;
    int64_t completion_tokens = 0;
  };

  void read_header() {
    asio::async_read(socket_, asio::buffer(header_),
                     [self = shared_from_this()](error_code ec, size_t) {
                       if (ec) return self->close();
                       const uint32_t n = frame_length(self->header_.data());
                       if (n > self->srv_.opts.max_frame_bytes) return self->close();
                       self->read_payload(n);
                     });
  }

  void read_payload(uint32_t n) {
    payload_.resize(n);
    asio::async_read(socket_, asio::buffer(payload_), [self = shared_from_this()](error_code ec, size_t) {
      if (ec) return self->close();
      self->on_frame();
      self->read_header();
    });
  }

  void on_frame() {
    FrameDecode d = decode_payload(payload_);
    if (!d.message) return send(error_message(nullptr, d.error));
    const auto backend = srv_.backend();
    if (!backend) return send(error_message(d.message->value("id", json()), "the model is still loading"));
    Command c = parse_command(*d.message, backend->info, *backend->tokenizer, srv_.opts.api_key);
    if (auto* err = std::get_if<CommandError>(&c)) return send(error_message(err->id, err->message));
    if (auto* abort = std::get_if<AbortCommand>(&c)) return on_abort(abort->id);
    on_submit(std::get<SubmitCommand>(c), *backend);
  }

  void on_submit(SubmitCommand& s, const http::Backend& backend) {
    const std::string key = id_key(s.id);
    if (srv_.draining) return send(error_message(s.id, "the server is shutting down"));
    if (live_.count(key)) return send(error_message(s.id, "a request with this id is already in flight"));
    InFlight& f = live_[key];
    f.id = s.id;
    f.prompt_tokens = static_cast<int64_t>(s.request.prompt_tokens.size());
    srv_.add_busy(1);
    auto ex = socket_.get_executor();
    f.gen = backend.engine->generate(
        s.request, [self = shared_from_this(), ex, key](int32_t, runtime::RequestOutput out) {
          asio::post(ex, [self, key, out = std::move(out)] { self->on_output(key, out); });
        });
  }

  void on_abort(const json& id) {
    const auto it = live_.find(id_key(id));
    if (it == live_.end()) return send(error_message(id, "no request with this id is in flight"));
    it->second.gen->abort();  // its done frame (finish_reason abort) follows
  }

  void on_output(const std::string& key, const runtime::RequestOutput& out) {
    const auto it = live_.find(key);
    if (it == live_.end()) return;
    InFlight& f = it->second;
    f.completion_tokens += static_cast<int64_t>(out.new_tokens.size());
    if (!out.new_tokens.empty() || !out.new_text.empty()) send(tokens_message(f.id, out));
    if (!out.finished()) return;
    // Busy until the done frame is written: a draining server stops its threads once
    // nothing is busy, and must not cut the frame off.
    ++unwritten_done_;
    send(done_message(f.id, out, f.prompt_tokens, f.completion_tokens));
    live_.erase(it);  // f dies here
    if (!writing_ || closed_) release_done();
  }

  void release_done() {
    srv_.add_busy(-unwritten_done_);
    unwritten_done_ = 0;
  }

  void send(const json& message) {
    if (closed_) return;
    queue_.push_back(encode_frame(message));
    if (!writing_) write_next();
  }

  void write_next() {
    if (queue_.empty() || closed_) {
      writing_ = false;
      release_done();
      return;
    }
    writing_ = true;
    // The frame stays in queue_ until its write completes: close() may run meanwhile (a
    // read error) and must neither free the buffer nor let this handler pop a cleared queue.
    asio::async_write(socket_, asio::buffer(queue_.front()), [self = shared_from_this()](error_code ec, size_t) {
      self->writing_ = false;
      if (ec || self->closed_) {
        self->close();
        return self->release_done();
      }
      self->queue_.pop_front();
      self->write_next();
    });
  }

  // The client is gone (or broke the framing): its requests are aborted; their last
  // outputs still arrive and release `busy`, but nothing more is written.
  void close() {
    if (closed_) return;
    closed_ = true;  // queue_ is kept: a write in flight still points into its front
    error_code ignored;
    socket_.shutdown(tcp::socket::shutdown_both, ignored);
    socket_.close(ignored);
    for (auto& [key, f] : live_) f.gen->abort();
    release_done();  // their frames will not be written
  }

  tcp::socket socket_;
  TcpServer::Impl& srv_;
  std::array<unsigned char, kFrameHeaderBytes> header_{};
  std::string payload_;
  std::deque<std::string> queue_;  // encoded frames to write, in order
  bool writing_ = false;
  bool closed_ = false;
  int64_t unwritten_done_ = 0;  // requests whose done frame is queued, not yet written
  std::unordered_map<std::string, InFlight> live_;  // by id_key of the client's id
};

}  // namespace

void TcpServer::Impl::do_accept() {
  acceptor.async_accept(asio::make_strand(ioc), [this](error_code ec, tcp::socket s) {
    if (!acceptor.is_open()) return;
    if (!ec) std::make_shared<Connection>(std::move(s), *this)->start();
    do_accept();
  });
}

TcpServer::TcpServer(TcpServerOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {}

TcpServer::~TcpServer() { stop(); }

uint16_t TcpServer::listen() {
  Impl& s = *impl_;
  const uint16_t port = open_acceptor(s.ioc, s.acceptor, s.opts.host, s.opts.port, "tcp");
  s.work.emplace(s.ioc.get_executor());
  s.do_accept();
  for (int i = 0; i < std::max(1, s.opts.io_threads); ++i) s.threads.emplace_back([&s] { s.ioc.run(); });
  return port;
}

void TcpServer::set_backend(std::shared_ptr<const http::Backend> backend) {
  std::lock_guard lock(impl_->mutex);
  impl_->backend_ = std::move(backend);
}

void TcpServer::drain() {
  impl_->draining = true;
  asio::post(impl_->acceptor.get_executor(), [s = impl_.get()] {
    error_code ignored;
    s->acceptor.close(ignored);
  });
}

bool TcpServer::wait_idle(std::chrono::milliseconds timeout) {
  std::unique_lock lock(impl_->busy_mutex);
  return impl_->busy_cv.wait_for(lock, timeout, [&] { return impl_->busy <= 0; });
}

void TcpServer::stop() {
  Impl& s = *impl_;
  s.work.reset();
  s.ioc.stop();
  for (std::thread& t : s.threads) t.join();
  s.threads.clear();
}

}  // namespace troupe::net::tcp

// The one Beast translation unit (Beast compiles slowly; TOOLCHAIN.md §4).
#include "net/http/server.h"

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <array>
#include <atomic>
#include <condition_variable>
#include <ctime>
#include <deque>
#include <mutex>
#include <optional>
#include <sstream>
#include <thread>
#include <variant>
#include <vector>

#include "kernels/check.h"
#include "net/http/acceptor.h"
#include "net/http/routes.h"
#include "net/openai/responses.h"
#include "net/openai/stream.h"
#include "net/openai/tokenize.h"

namespace troupe::net::http {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using tcp = asio::ip::tcp;
using openai::ApiError;
using openai::ErrorKind;

struct Server::Impl {
  explicit Impl(ServerOptions o) : opts(std::move(o)) { limits.max_body_bytes = opts.max_body_bytes; }

  std::shared_ptr<const Backend> backend() const {
    std::lock_guard lock(mutex);
    return backend_;
  }
  void hold_busy() {
    std::lock_guard lock(busy_mutex);
    busy += 1;
  }
  void release_busy() {
    std::lock_guard lock(busy_mutex);
    busy -= 1;
    busy_cv.notify_all();
  }
  void do_accept();

  // Declared before the io_context: sessions it destroys still release `busy`.
  ServerOptions opts;
  openai::ServingInfo limits;  // body size before a backend exists
  mutable std::mutex mutex;
  std::shared_ptr<const Backend> backend_;
  std::atomic<bool> draining{false};
  std::atomic<uint64_t> next_response{1};
  std::mutex busy_mutex;
  std::condition_variable busy_cv;
  int64_t busy = 0;  // generations whose response is not yet written (or abandoned)
  asio::io_context ioc;
  tcp::acceptor acceptor{asio::make_strand(ioc)};
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work;
  std::vector<std::thread> threads;
};

namespace {

int64_t unix_now() { return static_cast<int64_t>(std::time(nullptr)); }

std::string sse_header(bool chunked, bool keep_alive) {
  std::string h =
      "HTTP/1.1 200 OK\r\nServer: troupe\r\nContent-Type: text/event-stream\r\n"
      "Cache-Control: no-cache\r\n";
  if (chunked) h += "Transfer-Encoding: chunked\r\n";
  h += keep_alive ? "Connection: keep-alive\r\n\r\n" : "Connection: close\r\n\r\n";
  return h;
}

std::string http_chunk(std::string_view data) {
  std::ostringstream os;
  os << std::hex << data.size() << "\r\n" << data << "\r\n";
  return os.str();
}

// One connection: reads a request, answers it, and (keep-alive) reads the next.
class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, Server::Impl& srv) : socket_(std::move(socket)), srv_(srv) {}
  ~Session() {
    if (busy_) srv_.release_busy();
  }
  void start() { do_read(); }

 private:
  // --- reading ------------------------------------------------------------------------
  void do_read() {
    parser_.emplace();
    parser_->header_limit(64 * 1024);
    parser_->body_limit(srv_.opts.max_body_bytes);
    bhttp::async_read_header(socket_, buffer_, *parser_,
                             [self = shared_from_this()](beast::error_code ec, size_t) {
                               self->on_header(ec);
                             });
  }

  void on_header(beast::error_code ec) {
    // The parser itself refuses a Content-Length over body_limit, before any body byte.
    if (ec == bhttp::error::body_limit) return refuse_body();
    if (ec) return close();
    const auto& req = parser_->get();
    version_ = req.version();
    keep_alive_ = req.keep_alive() && !srv_.draining;
    if (beast::iequals(req[bhttp::field::expect], "100-continue"))
      send("HTTP/1.1 100 Continue\r\n\r\n");
    bhttp::async_read(socket_, buffer_, *parser_,
                      [self = shared_from_this()](beast::error_code ec, size_t) {
                        self->on_body(ec);
                      });
  }

  void on_body(beast::error_code ec) {
    if (ec == bhttp::error::body_limit) return refuse_body();  // a chunked upload over it
    if (ec) return close();
    handle(parser_->release());
  }

  // 413; the connection closes after it (the rest of the body stays unread).
  void refuse_body() {
    const auto len = parser_->content_length();
    keep_alive_ = false;
    version_ = parser_->get().version();
    reply_error(*openai::check_body_size(len ? size_t(*len) : srv_.opts.max_body_bytes + 1, srv_.limits));
  }

  // --- routing ------------------------------------------------------------------------
  void handle(const bhttp::request<bhttp::string_body>& req) {
    const RouteMatch m = match_route(std::string(req.method_string()), std::string(req.target()));
    if (m.error) return reply_error(*m.error, m.allow);
    const Route route = *m.route;
    auto backend = srv_.backend();
    if (route == Route::Health) {
      const auto unhealthy = backend && !srv_.draining ? backend->engine->unhealthy_reason()
                                                       : std::nullopt;
      if (unhealthy) return reply_error({ErrorKind::Unavailable, "engine " + *unhealthy, ""});
      if (backend && !srv_.draining) return reply(bhttp::status::ok, "{}", "application/json");
      return reply_error({ErrorKind::Unavailable, backend ? "shutting down" : "loading the model", ""});
    }
    if (needs_api_key(route)) {
      const auto auth = req[bhttp::field::authorization];
      if (auto err = openai::check_api_key({auth.data(), auth.size()}, srv_.opts.api_key))
        return reply_error(*err);
    }
    if (!backend) return reply_error({ErrorKind::Unavailable, "the model is still loading", ""});
    const Backend& b = *backend;
    switch (route) {
      case Route::Models:
        return reply_json(bhttp::status::ok, openai::models_response(b.info, b.created));
      case Route::Tokenize:
        return reply_result(openai::tokenize(req.body(), b.info, *b.tokenizer));
      case Route::Detokenize:
        return reply_result(openai::detokenize(req.body(), b.info, *b.tokenizer));
      case Route::Metrics:
        return reply_metrics(backend);
      case Route::Completions:
        return start_generation(openai::Endpoint::Completions, req.body(), backend);
      case Route::ChatCompletions:
        return start_generation(openai::Endpoint::ChatCompletions, req.body(), backend);
      case Route::Health:
        break;
    }
  }

  void reply_metrics(std::shared_ptr<const Backend> backend) {
    auto ex = socket_.get_executor();
    backend->engine->engine_state([self = shared_from_this(), ex, backend](auto) {
      asio::post(ex, [self, backend] {
        if (self->closed_) return;
        self->reply(bhttp::status::ok, backend->registry->render(),
                    "text/plain; version=0.0.4; charset=utf-8");
      });
    });
  }

  // --- generation -----------------------------------------------------------------------
  void start_generation(openai::Endpoint ep, std::string_view body,
                        std::shared_ptr<const Backend> backend) {
    openai::ParseResult parsed =
        openai::parse_generation_request(ep, body, backend->info, *backend->tokenizer);
    if (auto* err = std::get_if<ApiError>(&parsed)) return reply_error(*err);
    if (srv_.draining) return reply_error({ErrorKind::Unavailable, "the server is shutting down", ""});
    const auto& req = std::get<openai::GenerationRequest>(parsed);
    const openai::ResponseMeta meta{openai::make_response_id(ep, srv_.next_response++), unix_now(),
                                    req.model};
    srv_.hold_busy();
    busy_ = true;
    open_choices_ = req.n;
    if (req.stream) {
      chunked_ = version_ >= 11;
      keep_alive_ = keep_alive_ && chunked_;  // HTTP/1.0: the body ends with the connection
      encoder_.emplace(req, meta, backend->tokenizer);
      send(sse_header(chunked_, keep_alive_));
      if (std::string s = encoder_->start(); !s.empty()) send_event(s);
    } else {
      collector_.emplace(req, meta, backend->tokenizer);
    }
    auto ex = socket_.get_executor();
    gen_ = backend->engine->generate(req, [self = shared_from_this(), ex](int32_t i, runtime::RequestOutput out) {
      asio::post(ex, [self, i, out = std::move(out)]() mutable { self->on_output(i, std::move(out)); });
    });
    start_watch();
  }

  void on_output(int32_t index, runtime::RequestOutput out) {
    if (out.finished()) open_choices_ -= 1;
    if (closed_ || (!encoder_ && !collector_)) return maybe_release();
    if (out.status == runtime::RequestStatus::FinishedError) return fail_generation(out.error);
    if (encoder_) {
      if (std::string s = encoder_->on_output(index, out); !s.empty()) send_event(s);
      if (encoder_->done()) {
        send_event(encoder_->finish());
        end_response();
      }
    } else {
      collector_->on_output(index, out);
      if (collector_->done()) reply_json(bhttp::status::ok, collector_->response());
    }
  }

  // The engine failed a choice: the others are aborted and the connection closes after
  // the answer (their last outputs must not reach a next request).
  void fail_generation(const std::string& message) {
    if (gen_) gen_->abort();
    keep_alive_ = false;
    const ApiError err{ErrorKind::Internal, message.empty() ? "the engine failed the request" : message, ""};
    if (encoder_) {
      send_event(encoder_->error(err));
      end_response();
    } else {
      reply_error(err);
    }
    encoder_.reset();
    collector_.reset();
  }

  void maybe_release() {
    if (busy_ && open_choices_ <= 0 && (closed_ || !response_pending_)) {
      busy_ = false;
      gen_.reset();
      srv_.release_busy();
    }
  }

  // A read kept pending while the engine works: EOF or an error means the client left.
  void start_watch() {
    watching_ = true;
    socket_.async_read_some(buffer_.prepare(4096),
                            [self = shared_from_this()](beast::error_code ec, size_t n) {
                              self->on_watch(ec, n);
                            });
  }

  void on_watch(beast::error_code ec, size_t n) {
    watching_ = false;
    if (!ec) buffer_.commit(n);  // a pipelined request: kept for the next read
    if (read_after_watch_) {
      read_after_watch_ = false;
      if (!closed_) do_read();
      return;
    }
    if (ec == asio::error::operation_aborted || closed_) return;
    if (ec) return close();
    start_watch();
  }

  // --- writing --------------------------------------------------------------------------
  void reply(bhttp::status status, std::string body, std::string_view content_type,
             const std::string& allow = {}) {
    bhttp::response<bhttp::string_body> res{status, version_};
    res.set(bhttp::field::server, "troupe");
    res.set(bhttp::field::content_type, beast::string_view(content_type.data(), content_type.size()));
    if (!allow.empty()) res.set(bhttp::field::allow, allow);
    res.keep_alive(keep_alive_);
    res.body() = std::move(body);
    res.prepare_payload();
    std::ostringstream os;
    os << res;
    send(os.str());
    end_response();
  }
  void reply_json(bhttp::status status, const nlohmann::json& j) {
    reply(status, openai::dump_json(j), "application/json");
  }
  void reply_error(const ApiError& err, const std::string& allow = {}) {
    reply(static_cast<bhttp::status>(err.status()), openai::dump_json(err.body()),
          "application/json", allow);
  }
  void reply_result(const openai::JsonResult& r) {
    if (auto* err = std::get_if<ApiError>(&r)) return reply_error(*err);
    reply_json(bhttp::status::ok, std::get<nlohmann::json>(r));
  }

  void send_event(std::string_view sse) { send(chunked_ ? http_chunk(sse) : std::string(sse)); }

  // Everything of the response is queued; the last chunk ends a chunked stream.
  void end_response() {
    if (encoder_ && chunked_) send("0\r\n\r\n");
    encoder_.reset();
    collector_.reset();
    response_pending_ = true;
    if (!writing_) finish_response();
  }

  void send(std::string bytes) {
    if (closed_) return;
    queue_.push_back(std::move(bytes));
    if (!writing_) write_next();
  }

  void write_next() {
    writing_ = true;
    asio::async_write(socket_, asio::buffer(queue_.front()),
                      [self = shared_from_this()](beast::error_code ec, size_t) {
                        self->on_write(ec);
                      });
  }

  void on_write(beast::error_code ec) {
    writing_ = false;
    if (ec || closed_) return close();  // closed meanwhile: queue_ may not be popped
    queue_.pop_front();
    if (!queue_.empty()) return write_next();
    if (response_pending_) finish_response();
  }

  void finish_response() {
    response_pending_ = false;
    maybe_release();
    if (!keep_alive_) return watching_ ? close() : linger_close();
    if (watching_) {  // the next read starts once the watch read is cancelled
      read_after_watch_ = true;
      socket_.cancel();
      return;
    }
    do_read();
  }

  // Closing with unread request bytes (a refused body) would reset the connection and
  // could destroy the response in flight: half-close, read what is left, then close.
  void linger_close() {
    beast::error_code ignored;
    socket_.shutdown(tcp::socket::shutdown_send, ignored);
    linger_timer_.expires_after(std::chrono::seconds(2));
    linger_timer_.async_wait([self = shared_from_this()](beast::error_code) { self->close(); });
    drain_read(0);
  }

  void drain_read(size_t drained) {
    socket_.async_read_some(asio::buffer(scratch_),
                            [self = shared_from_this(), drained](beast::error_code ec, size_t n) {
                              if (ec || self->closed_ || drained + n > (size_t(64) << 20))
                                return self->close();
                              self->drain_read(drained + n);
                            });
  }

  void close() {
    if (closed_) return;
    closed_ = true;
    linger_timer_.cancel();
    if (gen_ && open_choices_ > 0) gen_->abort();
    if (!writing_) queue_.clear();  // a write in flight still points into queue_.front()
    beast::error_code ignored;
    socket_.shutdown(tcp::socket::shutdown_both, ignored);
    socket_.close(ignored);
    maybe_release();
  }

  tcp::socket socket_;
  asio::steady_timer linger_timer_{socket_.get_executor()};
  std::array<char, 16384> scratch_;  // discarded bytes of a lingering close
  Server::Impl& srv_;
  beast::flat_buffer buffer_;
  std::optional<bhttp::request_parser<bhttp::string_body>> parser_;
  unsigned version_ = 11;
  bool keep_alive_ = true;
  bool chunked_ = true;
  bool closed_ = false;
  std::deque<std::string> queue_;  // bytes to write, in order
  bool writing_ = false;
  bool response_pending_ = false;  // the response is queued; finish once written
  bool watching_ = false;
  bool read_after_watch_ = false;
  // The generation in progress.
  std::shared_ptr<Generation> gen_;
  std::optional<openai::StreamEncoder> encoder_;
  std::optional<openai::ResponseCollector> collector_;
  int32_t open_choices_ = 0;
  bool busy_ = false;
};

}  // namespace

void Server::Impl::do_accept() {
  acceptor.async_accept(asio::make_strand(ioc), [this](beast::error_code ec, tcp::socket s) {
    if (!acceptor.is_open()) return;
    if (!ec) std::make_shared<Session>(std::move(s), *this)->start();
    do_accept();
  });
}

Server::Server(ServerOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {}

Server::~Server() { stop(); }

uint16_t Server::listen() {
  Impl& s = *impl_;
  const uint16_t port = open_acceptor(s.ioc, s.acceptor, s.opts.host, s.opts.port, "http");
  s.work.emplace(s.ioc.get_executor());
  s.do_accept();
  for (int i = 0; i < std::max(1, s.opts.io_threads); ++i) s.threads.emplace_back([&s] { s.ioc.run(); });
  return port;
}

void Server::set_backend(std::shared_ptr<const Backend> backend) {
  std::lock_guard lock(impl_->mutex);
  impl_->backend_ = std::move(backend);
}

void Server::drain() {
  impl_->draining = true;
  asio::post(impl_->acceptor.get_executor(), [s = impl_.get()] {
    beast::error_code ignored;
    s->acceptor.close(ignored);
  });
}

bool Server::wait_idle(std::chrono::milliseconds timeout) {
  std::unique_lock lock(impl_->busy_mutex);
  return impl_->busy_cv.wait_for(lock, timeout, [&] { return impl_->busy == 0; });
}

void Server::stop() {
  Impl& s = *impl_;
  s.work.reset();
  s.ioc.stop();
  for (std::thread& t : s.threads) t.join();
  s.threads.clear();
}

}  // namespace troupe::net::http

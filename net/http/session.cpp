// The one Beast translation unit (Beast compiles slowly; TOOLCHAIN.md §4).
#include "net/http/session.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <ctime>
#include <deque>
#include <exception>
#include <mutex>
#include <optional>
#include <variant>

#include "net/common/output_queue.h"
#include "net/http/phase_timer.h"
#include "net/http/request_checks.h"
#include "net/http/routes.h"
#include "net/http/wire.h"
#include "net/metrics/serving_metrics.h"
#include "net/openai/admin_requests.h"
#include "net/openai/kv_requests.h"
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

namespace {

int64_t unix_now() {
  return static_cast<int64_t>(std::time(nullptr));
}

constexpr size_t kReadChunk = 4096;
constexpr auto kLingerTime = std::chrono::seconds(2);
constexpr size_t kLingerBytes = size_t(64) << 20;

// What follows once the read kept pending during a response is cancelled.
enum class AfterWatch { Nothing, NextRequest, Linger };

// "30 s" for a timeout in a message.
std::string seconds_text(std::chrono::milliseconds d) {
  char s[32];
  std::snprintf(s, sizeof s, "%g s", double(d.count()) / 1000.0);
  return s;
}

// The work of a route, run where off_io() puts it; a throw becomes a 500 (nothing thrown
// while handling outside input leaves its handler).
template <class Result, class Work>
Result guarded(const Work& work, std::string_view body) {
  try {
    return work(body);
  } catch (const std::exception& e) {
    return ApiError{ErrorKind::Internal, std::string("the request failed: ") + e.what(), ""};
  }
}

// One connection: reads a request, answers it, and (keep-alive) reads the next.
class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, ServerState& srv, ConnectionSlot slot)
      : socket_(std::move(socket)),
        srv_(srv),
        opts_(srv.opts),
        slot_(std::move(slot)),
        out_(socket_, {opts_.max_queued_bytes, opts_.write_timeout, &srv.peak_queued}) {}
  ~Session() {
    if (busy_) srv_.release_busy();
  }
  // A fresh connection: the header timeout runs from now.
  void start() {
    arm(Phase::Header);
    wait_request();
  }
  // Answers `err` to whatever the client sends and closes (a connection over the cap).
  void refuse(const ApiError& err) {
    keep_alive_ = false;
    reply_error(err);
  }

 private:
  // --- timeouts -----------------------------------------------------------------------
  std::chrono::milliseconds timeout_of(Phase p) const {
    switch (p) {
      case Phase::Idle:
        return opts_.idle_timeout;
      case Phase::Header:
        return opts_.header_timeout;
      case Phase::Body:
        return opts_.body_timeout;
      case Phase::Linger:
        return kLingerTime;
      case Phase::None:
        break;
    }
    return {};
  }

  void arm(Phase p) {
    timer_.arm(p, timeout_of(p), [self = shared_from_this()] {
      if (self->closed_) return;
      if (self->timer_.phase() == Phase::Linger) return self->close();
      self->socket_.cancel();  // the pending read ends with operation_aborted
    });
  }

  // A request under way gets 408; a connection that sent no request yet is closed
  // quietly (an idle kept-alive one, or a browser's unused preconnect).
  void on_timed_out() {
    const Phase p = timer_.phase();
    if (p != Phase::Body && !(p == Phase::Header && reading_header_)) return close();
    const bool header = p == Phase::Header;
    refuse_request({ErrorKind::RequestTimeout,
                    std::string(header ? "the request header" : "the request body") +
                        " did not arrive within " +
                        seconds_text(header ? opts_.header_timeout : opts_.body_timeout),
                    ""});
  }

  // --- reading ------------------------------------------------------------------------
  // Skips empty lines before a request line (RFC 9112 2.2); a kept-alive connection's
  // header timeout starts with the first byte of the next request.
  void wait_request() {
    const auto* data = static_cast<const char*>(buffer_.data().data());
    buffer_.consume(leading_empty_lines({data, buffer_.size()}));
    if (buffer_.size() > 0) {
      if (timer_.phase() == Phase::Idle) arm(Phase::Header);
      return read_header();
    }
    socket_.async_read_some(buffer_.prepare(kReadChunk),
                            [self = shared_from_this()](beast::error_code ec, size_t n) {
                              if (ec) return self->on_read_error(ec);
                              self->buffer_.commit(n);
                              self->wait_request();
                            });
  }

  void read_header() {
    version_ = 11;
    head_ = false;
    reading_header_ = true;
    parser_.emplace();
    parser_->header_limit(static_cast<uint32_t>(opts_.max_header_bytes));
    parser_->body_limit(opts_.max_body_bytes);
    bhttp::async_read_header(
        socket_, buffer_, *parser_,
        [self = shared_from_this()](beast::error_code ec, size_t) { self->on_header(ec); });
  }

  void on_header(beast::error_code ec) {
    // The parser itself refuses a Content-Length over body_limit, before any body byte.
    if (ec == bhttp::error::body_limit) return refuse_body();
    if (ec) return on_read_error(ec);
    reading_header_ = false;
    const auto& req = parser_->get();
    version_ = req.version();
    head_ = req.method() == bhttp::verb::head;
    keep_alive_ = req.keep_alive() && !srv_.draining;
    const HeaderFacts facts{version_, req.count(bhttp::field::content_length),
                            req.count(bhttp::field::transfer_encoding),
                            req.count(bhttp::field::host), parser_->chunked()};
    if (auto err = check_header(facts)) return refuse_request(*err);
    arm(Phase::Body);
    if (beast::iequals(req[bhttp::field::expect], "100-continue"))
      send("HTTP/1.1 100 Continue\r\n\r\n");
    bhttp::async_read(
        socket_, buffer_, *parser_,
        [self = shared_from_this()](beast::error_code ec, size_t) { self->on_body(ec); });
  }

  void on_body(beast::error_code ec) {
    if (ec == bhttp::error::body_limit) return refuse_body();  // a chunked upload over it
    if (ec) return on_read_error(ec);
    arm(Phase::None);  // the request is in: no timeout while it is answered
    handle(parser_->release());
  }

  void on_read_error(beast::error_code ec) {
    if (timer_.timed_out()) return on_timed_out();
    const auto err = read_error(ec, opts_.max_header_bytes);
    if (!err || closed_) return close();
    refuse_request(*err);
  }

  // After a refused request the next one's start is unknown: answer, then close.
  void refuse_request(const ApiError& err) {
    arm(Phase::None);
    refuse(err);
  }

  // 413; the connection closes after it (the rest of the body stays unread).
  void refuse_body() {
    const auto len = parser_->content_length();
    version_ = parser_->get().version();
    refuse_request(
        *openai::check_body_size(len ? size_t(*len) : opts_.max_body_bytes + 1, srv_.limits));
  }

  // --- routing ------------------------------------------------------------------------
  void handle(bhttp::request<bhttp::string_body> req) {
    guard([&] { route(req); });
  }

  // Runs a step of answering a request; a throw ends the request with a 500 (or, once a
  // response has begun, by closing), never the I/O thread.
  template <class Step>
  void guard(const Step& step) {
    try {
      step();
    } catch (const std::exception& e) {
      keep_alive_ = false;
      if (gen_ || encoder_ || !out_.empty() || response_pending_) return close();
      reply_error({ErrorKind::Internal, std::string("the request failed: ") + e.what(), ""});
    }
  }

  void route(bhttp::request<bhttp::string_body>& req) {
    const RouteMatch m = match_route(std::string(req.method_string()), std::string(req.target()));
    if (m.error) return reply_error(*m.error, m.allow);
    const Route route = *m.route;
    auto backend = srv_.backend();
    if (route == Route::Health) {
      const auto unhealthy =
          backend && !srv_.draining ? backend->engine->unhealthy_reason() : std::nullopt;
      if (unhealthy) return reply_error({ErrorKind::Unavailable, "engine " + *unhealthy, ""});
      if (backend && !srv_.draining) return reply(200, "{}", "application/json");
      return reply_error(
          {ErrorKind::Unavailable, backend ? "shutting down" : "loading the model", ""});
    }
    if (needs_api_key(route)) {
      const auto auth = req[bhttp::field::authorization];
      if (auto err = openai::check_api_key({auth.data(), auth.size()}, srv_.opts.api_key))
        return reply_error(*err);
    }
    if (!backend) return reply_error({ErrorKind::Unavailable, "the model is still loading", ""});
    if (req.method() == bhttp::verb::post)
      if (auto err = check_json_body(req.body())) return reply_error(*err);
    const Backend& b = *backend;
    switch (route) {
      case Route::Models:
        return reply_json(200, openai::models_response(b.info, b.created));
      case Route::Tokenize:
      case Route::Detokenize:
        return tokenizer_route(route == Route::Tokenize, std::move(req.body()), backend);
      case Route::Metrics:
        return reply_metrics(backend);
      case Route::Completions:
        return prepare_generation(openai::Endpoint::Completions, std::move(req.body()), backend);
      case Route::ChatCompletions:
        return prepare_generation(openai::Endpoint::ChatCompletions, std::move(req.body()),
                                  backend);
      case Route::KvSave:
      case Route::KvDelete:
        return prepare_kv(route, m.kv_id, std::move(req.body()), backend);
      case Route::AdminDrain:
        return admin_drain(req.body(), backend);
      case Route::Health:
        break;
    }
  }

  // Parsing and tokenizing a large body takes long (40 MB: seconds): it runs on the
  // worker pool so the I/O threads keep answering /health and /metrics, and `then` runs
  // back on this session's strand. No read is pending meanwhile, so TCP flow control
  // holds whatever the client sends next.
  template <class Result, class Work, class Then>
  void off_io(std::string body, Work work, Then then) {
    if (body.size() < opts_.offload_body_bytes) return then(guarded<Result>(work, body));
    asio::post(*srv_.workers, [self = shared_from_this(), ex = socket_.get_executor(),
                               body = std::move(body), work, then]() mutable {
      if (self->opts_.on_offloaded_parse) self->opts_.on_offloaded_parse();
      Result r = guarded<Result>(work, body);
      asio::post(ex, [self, then, r = std::move(r)]() mutable {
        if (!self->closed_) self->guard([&] { then(std::move(r)); });
      });
    });
  }

  void tokenizer_route(bool encode, std::string body, std::shared_ptr<const Backend> backend) {
    off_io<openai::JsonResult>(
        std::move(body),
        [encode, backend](std::string_view b) {
          return encode ? openai::tokenize(b, backend->info, *backend->tokenizer)
                        : openai::detokenize(b, backend->info, *backend->tokenizer);
        },
        [self = shared_from_this()](openai::JsonResult r) { self->reply_result(r); });
  }

  void reply_metrics(std::shared_ptr<const Backend> backend) {
    auto ex = socket_.get_executor();
    backend->engine->engine_state([self = shared_from_this(), ex, backend](auto) {
      asio::post(ex, [self, backend] {
        if (self->closed_) return;
        self->reply(200, backend->registry->render(), "text/plain; version=0.0.4; charset=utf-8");
      });
    });
  }

  // POST /admin/drain (admin_requests.h): a small body, parsed here; the router answers.
  void admin_drain(const std::string& body, std::shared_ptr<const Backend> backend) {
    auto parsed = openai::parse_drain_request(body, backend->info);
    if (auto* err = std::get_if<ApiError>(&parsed)) return reply_error(*err);
    const std::string instance = std::get<openai::DrainRequest>(parsed).instance;
    auto ex = socket_.get_executor();
    backend->engine->drain(instance, [self = shared_from_this(), ex, instance](EngineBridge::DrainResult r) {
      asio::post(ex, [self, instance, r = std::move(r)] {
        if (self->closed_) return;
        if (!r.error.empty()) return self->reply_error({ErrorKind::InvalidRequest, r.error, "instance"});
        self->reply_json(200, openai::drain_response(instance, r.requests));
      });
    });
  }

  // --- generation -----------------------------------------------------------------------
  void prepare_generation(openai::Endpoint ep, std::string body,
                          std::shared_ptr<const Backend> backend) {
    srv_.hold_busy();  // from the parse on: a draining server waits for it too
    busy_ = true;
    kv_route_.reset();
    off_io<openai::ParseResult>(
        std::move(body),
        [ep, backend](std::string_view b) {
          return openai::parse_generation_request(ep, b, backend->info, *backend->tokenizer);
        },
        [self = shared_from_this(), ep, backend](openai::ParseResult r) {
          self->start_generation(ep, std::move(r), backend);
        });
  }

  // KV save by name (kv_requests.h): a save is a 1-token completion answered with what
  // was saved; a delete runs nothing and is answered once the scheduler unpinned it.
  void prepare_kv(Route route, std::string path_id, std::string body,
                  std::shared_ptr<const Backend> backend) {
    srv_.hold_busy();
    busy_ = true;
    kv_route_ = route;
    off_io<openai::ParseResult>(
        std::move(body),
        [route, path_id, backend](std::string_view b) {
          return route == Route::KvSave
                     ? openai::parse_kv_save(b, backend->info, *backend->tokenizer)
                     : openai::parse_kv_delete(b, path_id, backend->info);
        },
        [self = shared_from_this(), backend](openai::ParseResult r) {
          if (auto* req = std::get_if<openai::GenerationRequest>(&r)) self->kv_request_ = *req;
          self->start_generation(openai::Endpoint::Completions, std::move(r), backend);
        });
  }

  void start_generation(openai::Endpoint ep, openai::ParseResult parsed,
                        std::shared_ptr<const Backend> backend) {
    if (auto* err = std::get_if<ApiError>(&parsed)) return reply_error(*err);
    if (srv_.draining)
      return reply_error({ErrorKind::Unavailable, "the server is shutting down", ""});
    const auto& req = std::get<openai::GenerationRequest>(parsed);
    const openai::ResponseMeta meta{openai::make_response_id(ep, srv_.next_response++), unix_now(),
                                    req.model};
    open_choices_ = req.n;
    if (req.stream) {
      chunked_ = version_ >= 11;
      keep_alive_ = keep_alive_ && chunked_;  // HTTP/1.0: the body ends with the connection
      encoder_.emplace(req, meta, backend->tokenizer);
      send(sse_head(chunked_, keep_alive_));
      if (std::string s = encoder_->start(); !s.empty()) send_event(s);
    } else {
      collector_.emplace(req, meta, backend->tokenizer);
    }
    auto ex = socket_.get_executor();
    gen_ = backend->engine->generate(
        req, [self = shared_from_this(), ex](int32_t i, runtime::RequestOutput out) {
          asio::post(ex, [self, i, out = std::move(out)]() mutable {
            self->on_output(i, std::move(out));
          });
        });
    start_watch();
  }

  void on_output(int32_t index, runtime::RequestOutput out) {
    if (out.finished()) open_choices_ -= 1;
    if (closed_ || (!encoder_ && !collector_)) return maybe_release();
    if (out.status == runtime::RequestStatus::FinishedError)
      return fail_generation(out.error, out.error_cause);
    if (encoder_) {
      if (std::string s = encoder_->on_output(index, out); !s.empty()) send_event(s);
      if (encoder_->done()) {
        send_event(encoder_->finish());
        end_response();
      }
    } else {
      collector_->on_output(index, out);
      if (!collector_->done()) return;
      if (kv_route_ == Route::KvSave)
        return reply_json(200, openai::kv_saved_response(kv_request_, collector_->response()));
      if (kv_route_ == Route::KvDelete) return reply_json(200, openai::kv_deleted_response(kv_request_));
      reply_json(200, collector_->response());
    }
  }

  // The engine failed a choice: the others are aborted and the connection closes after
  // the answer (their last outputs must not reach a next request). An engine that died
  // (its actors, or in a cluster its process) is a 503: the service is unavailable and a
  // retry may find it back; anything else a 500.
  void fail_generation(const std::string& message,
                       runtime::ErrorCause cause = runtime::ErrorCause::None) {
    if (gen_) gen_->abort();
    keep_alive_ = false;
    const ApiError err{error_kind(cause), message.empty() ? "the engine failed the request" : message,
                       ""};
    if (encoder_) {
      send_event(encoder_->error(err));
      end_response();
    } else {
      reply_error(err);
    }
    encoder_.reset();
    collector_.reset();
  }

  static ErrorKind error_kind(runtime::ErrorCause cause) {
    switch (cause) {
      case runtime::ErrorCause::BadRequest: return ErrorKind::InvalidRequest;  // refused when added
      case runtime::ErrorCause::EngineDied: return ErrorKind::Unavailable;
      case runtime::ErrorCause::NotFound: return ErrorKind::NotFound;         // kv_restore, kv delete
      case runtime::ErrorCause::NoRoom: return ErrorKind::InsufficientStorage;  // kv save
      default: return ErrorKind::Internal;
    }
  }

  void maybe_release() {
    if (busy_ && open_choices_ <= 0 && (closed_ || !response_pending_)) {
      busy_ = false;
      gen_.reset();
      srv_.release_busy();
    }
  }

  // A read kept pending while the engine works: EOF or an error means the client left.
  // A next request's bytes are kept up to pipeline_bytes; past that they are discarded
  // (so a client pouring bytes costs no memory) and the connection ends with this response.
  void start_watch() {
    watching_ = true;
    const size_t kept = buffer_.size();
    if (kept >= opts_.pipeline_bytes) {
      keep_alive_ = false;
      socket_.async_read_some(asio::buffer(scratch_),
                              [self = shared_from_this()](beast::error_code ec, size_t n) {
                                if (!ec) self->srv_.discarded += n;
                                self->on_watch(ec);
                              });
      return;
    }
    const size_t room = std::min(kReadChunk, opts_.pipeline_bytes - kept);
    socket_.async_read_some(buffer_.prepare(room),
                            [self = shared_from_this()](beast::error_code ec, size_t n) {
                              if (!ec) self->buffer_.commit(n);  // kept for the next read
                              self->on_watch(ec);
                            });
  }

  void on_watch(beast::error_code ec) {
    watching_ = false;
    if (after_watch_ != AfterWatch::Nothing) {
      const AfterWatch next = std::exchange(after_watch_, AfterWatch::Nothing);
      if (closed_) return;
      if (next == AfterWatch::Linger) return linger_close();
      arm(Phase::Idle);
      return wait_request();
    }
    if (ec == asio::error::operation_aborted || closed_) return;
    if (ec) return close();
    start_watch();
  }

  // --- writing --------------------------------------------------------------------------
  // A HEAD request gets the head a GET would get, with its Content-Length, and no body.
  void reply(int status, std::string body, std::string_view content_type,
             std::string_view allow = {}) {
    std::string bytes = response_head({status, content_type, body.size(), keep_alive_, allow});
    if (!head_) bytes += body;
    send(std::move(bytes));
    end_response();
  }
  void reply_json(int status, const nlohmann::json& j) {
    reply(status, openai::dump_json(j), "application/json");
  }
  void reply_error(const ApiError& err, std::string_view allow = {}) {
    log_error(err);
    reply(err.status(), openai::dump_json(err.body()), "application/json", allow);
  }
  void reply_result(const openai::JsonResult& r) {
    if (auto* err = std::get_if<ApiError>(&r)) return reply_error(*err);
    reply_json(200, std::get<nlohmann::json>(r));
  }

  void send_event(std::string_view sse) { send(chunked_ ? http_chunk(sse) : std::string(sse)); }

  // Everything of the response is queued; the last chunk ends a chunked stream.
  void end_response() {
    if (encoder_ && chunked_) send("0\r\n\r\n");
    encoder_.reset();
    collector_.reset();
    if (closed_) return maybe_release();  // the client did not read (too_slow)
    response_pending_ = true;
    if (!out_.writing()) finish_response();
  }

  // Bytes the queue cannot take (the client does not read) close the connection.
  void send(std::string bytes) {
    if (closed_) return;
    if (!out_.push(std::move(bytes))) return too_slow(kOutputLimit);
    if (!out_.writing()) write_next();
  }

  void write_next() {
    out_.write_front([self = shared_from_this()](beast::error_code ec) { self->on_write(ec); },
                     [self = shared_from_this()] { self->too_slow(kWriteTimeout); });
  }

  void on_write(beast::error_code ec) {
    if (ec || closed_) return close();
    if (!out_.empty()) return write_next();
    if (response_pending_) finish_response();
  }

  // The client does not read its response (too much queued, or a write stalled): its
  // generation is aborted, which frees its KV blocks, and the connection is closed
  // before it holds more. Logged with the request id and counted by reason.
  void too_slow(const char* reason) {
    if (closed_) return;
    spdlog::warn("http: {} does not read: {}; aborting request {}, closing", peer(),
                 slow_client_text(reason, out_), gen_ ? gen_->request_id() : -1);
    if (const auto b = srv_.backend(); b && b->metrics)
      b->metrics->slow_client_disconnects("http", reason).inc();
    close();
  }

  void finish_response() {
    response_pending_ = false;
    maybe_release();
    const AfterWatch next = keep_alive_ ? AfterWatch::NextRequest : AfterWatch::Linger;
    if (watching_) {  // the next step starts once the watch read is cancelled
      after_watch_ = next;
      socket_.cancel();
      return;
    }
    if (next == AfterWatch::Linger) return linger_close();
    arm(Phase::Idle);
    wait_request();
  }

  // Closing with unread request bytes (a refused body, a client still sending) would
  // reset the connection and could destroy the response in flight: half-close, read
  // and drop what is left (for a while, up to a limit), then close.
  void linger_close() {
    beast::error_code ignored;
    socket_.shutdown(tcp::socket::shutdown_send, ignored);
    arm(Phase::Linger);
    drain_read(0);
  }

  void drain_read(size_t drained) {
    socket_.async_read_some(asio::buffer(scratch_),
                            [self = shared_from_this(), drained](beast::error_code ec, size_t n) {
                              if (ec || self->closed_ || drained + n > kLingerBytes)
                                return self->close();
                              self->drain_read(drained + n);
                            });
  }

  // Every error answer, with the peer: 5xx at error (the server's fault), 4xx at warn.
  void log_error(const ApiError& err) {
    spdlog::log(err.status() >= 500 ? spdlog::level::err : spdlog::level::warn,
                "http {} from {}: {}", err.status(), peer(), err.message);
  }
  std::string peer() const {
    beast::error_code ec;
    const auto p = socket_.remote_endpoint(ec);
    return ec ? "?" : p.address().to_string() + ":" + std::to_string(p.port());
  }

  void close() {
    if (closed_) return;
    closed_ = true;
    timer_.cancel();
    if (gen_ && open_choices_ > 0) gen_->abort();
    out_.clear();  // but a message being written: the write still points into it
    out_.cancel_timer();
    beast::error_code ignored;
    socket_.shutdown(tcp::socket::shutdown_both, ignored);
    socket_.close(ignored);
    slot_.reset();  // now, not when the last handler (or an engine sink) lets go of us
    maybe_release();
  }

  tcp::socket socket_;
  ServerState& srv_;
  const ServerOptions& opts_;
  ConnectionSlot slot_;  // this connection's place under max_connections, until close()
  PhaseTimer timer_{socket_.get_executor()};
  bool reading_header_ = false;      // a request's first byte is in, its header not yet
  std::array<char, 16384> scratch_;  // discarded bytes
  beast::flat_buffer buffer_;
  std::optional<bhttp::request_parser<bhttp::string_body>> parser_;
  unsigned version_ = 11;
  bool head_ = false;  // a HEAD request: the response has no body
  bool keep_alive_ = true;
  bool chunked_ = true;
  bool closed_ = false;
  OutputQueue out_;  // bytes to write, in order, within the output limits
  bool response_pending_ = false;  // the response is queued; finish once written
  bool watching_ = false;
  AfterWatch after_watch_ = AfterWatch::Nothing;
  // The generation in progress.
  std::shared_ptr<Generation> gen_;
  std::optional<openai::StreamEncoder> encoder_;
  std::optional<openai::ResponseCollector> collector_;
  std::optional<Route> kv_route_;        // a KV save or delete: its own answer
  openai::GenerationRequest kv_request_;  // what it asked for
  int32_t open_choices_ = 0;
  bool busy_ = false;
};

}  // namespace

void start_session(tcp::socket socket, ServerState& srv, ConnectionSlot slot) {
  std::make_shared<Session>(std::move(socket), srv, std::move(slot))->start();
}

void refuse_session(tcp::socket socket, ServerState& srv, const openai::ApiError& err) {
  std::make_shared<Session>(std::move(socket), srv, nullptr)->refuse(err);
}

}  // namespace troupe::net::http

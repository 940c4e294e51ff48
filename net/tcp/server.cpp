#include "net/tcp/server.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <boost/asio.hpp>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <deque>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>
#include <vector>

#include "kernels/check.h"
#include "net/common/listener.h"
#include "net/common/output_queue.h"
#include "net/metrics/serving_metrics.h"
#include "net/tcp/frame.h"
#include "net/tcp/protocol.h"

namespace troupe::net::tcp {

namespace asio = boost::asio;
using asio::ip::tcp;
using boost::system::error_code;

struct TcpServer::Impl {
  explicit Impl(TcpServerOptions o)
      : opts(std::move(o)),
        listener({opts.host, opts.port, "tcp", opts.io_threads, opts.max_connections}) {}

  std::shared_ptr<const http::Backend> backend() const {
    std::lock_guard lock(mutex);
    return backend_;
  }
  void add_busy(int64_t d) { busy.add(d); }
  // Takes `n` bytes of the budget for partly received frames; false (nothing taken) when
  // that would pass opts.max_buffered_bytes.
  bool reserve(size_t n) {
    const size_t cap = opts.max_buffered_bytes;
    size_t cur = buffered.load();
    do {
      if (n > cap || cur > cap - n) return false;
    } while (!buffered.compare_exchange_weak(cur, cur + n));
    size_t peak = peak_buffered.load();
    while (cur + n > peak && !peak_buffered.compare_exchange_weak(peak, cur + n)) {
    }
    return true;
  }
  void release(size_t n) { buffered.fetch_sub(n); }

  // Declared before the listener (and its io_context): connections it destroys still
  // update `busy` and `buffered`.
  TcpServerOptions opts;
  mutable std::mutex mutex;
  std::shared_ptr<const http::Backend> backend_;
  std::atomic<bool> draining{false};
  BusyCount busy;                        // requests in flight over all connections
  std::atomic<size_t> buffered{0};       // bytes of payload buffers, all connections
  std::atomic<size_t> peak_buffered{0};  // the most `buffered` has been
  std::atomic<size_t> peak_queued{0};    // the most output one connection has had queued
  Listener listener;                     // the io_context, its threads, the accept loop and the cap
  // Parses (and tokenizes) large frames off the I/O threads. After the listener: it goes
  // first, and what its tasks post back is dropped with the io_context.
  asio::thread_pool parse_pool{2};
};

namespace {

// A frame at least this long is parsed (and its prompt tokenized) on the parse pool.
constexpr size_t kParseElsewhereBytes = 256u << 10;
// A refused connection is closed once its error frame is written and the client has
// stopped sending, or after this long.
constexpr auto kLinger = std::chrono::seconds(5);

// One line on stderr for what must not happen (a handler threw); the server goes on.
void report(const char* what, const char* why) noexcept {
  try {
    spdlog::error("tcp: {}: {}", what, why);
  } catch (...) {  // logging must not throw out of a handler
  }
}

// A payload buffer on its way through the parse pool; gives its bytes back to the
// budget when it goes.
struct HeldBuffer {
  HeldBuffer(std::unique_ptr<char[]> b, size_t n, TcpServer::Impl& s)
      : bytes(std::move(b)), size(n), srv(s) {}
  ~HeldBuffer() { srv.release(size); }
  HeldBuffer(const HeldBuffer&) = delete;
  HeldBuffer& operator=(const HeldBuffer&) = delete;
  std::unique_ptr<char[]> bytes;
  size_t size;
  TcpServer::Impl& srv;
};

// One client connection: reads frames one after another, writes frames in order, keeps
// the requests in flight by the client's id. Everything runs on the socket's strand.
//
// Nothing a handler throws leaves it: a frame whose handling throws gets an error frame
// (the connection goes on), a failure of the connection's own machinery or of a stream of
// outputs closes it (its requests are aborted); other connections never notice.
class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(tcp::socket socket, TcpServer::Impl& srv, ConnectionSlot slot)
      : socket_(std::move(socket)),
        srv_(srv),
        linger_(socket_.get_executor()),
        slot_(std::move(slot)),
        out_(socket_, {srv.opts.max_queued_bytes, srv.opts.write_timeout, &srv.peak_queued}) {}
  ~Connection() { drop_buffer(); }

  void start() { read_header(); }

 private:
  struct InFlight {
    json id;
    std::shared_ptr<http::Generation> gen;
    int64_t prompt_tokens = 0;
    int64_t completion_tokens = 0;
  };

  // Runs one step of the connection's machinery; what it throws closes the connection.
  template <class F>
  void guard(F&& step) noexcept {
    try {
      step();
    } catch (const std::exception& e) {
      fail(e.what());
    } catch (...) {
      fail("unknown exception");
    }
  }
  void fail(const char* why) noexcept {
    report("a connection is closed after an internal error", why);
    close();
  }

  // --- reading ------------------------------------------------------------------------

  void read_header() {
    asio::async_read(socket_, asio::buffer(header_),
                     [self = shared_from_this()](error_code ec, size_t) {
                       self->guard([&] {
                         if (ec || self->closed_) return self->close();
                         self->on_header(frame_length(self->header_.data()));
                       });
                     });
  }

  void on_header(uint32_t n) {
    // A frame the whole budget could not hold is refused at once, not half-way.
    const size_t limit = std::min(srv_.opts.max_frame_bytes, srv_.opts.max_buffered_bytes);
    if (n > limit)
      return refuse("a frame of " + std::to_string(n) + " bytes is over the limit of " +
                    std::to_string(limit) + " bytes; the connection is closed");
    need_ = n;
    have_ = 0;
    read_payload();
  }

  // Reads the payload into a buffer that grows as bytes arrive (a length alone holds
  // nothing big); each growth is taken from the server-wide budget first.
  void read_payload() {
    if (have_ == need_) return on_payload();
    if (have_ == size_ && !grow(std::min(need_, std::max(kFirstReadChunk, 2 * size_)))) {
      return refuse(
          "the server holds too many partly received frames: this one needs more buffer "
          "and all connections together may hold " +
          std::to_string(srv_.opts.max_buffered_bytes) +
          " bytes (tcp-max-buffered-bytes); the connection is closed");
    }
    socket_.async_read_some(asio::buffer(buffer_.get() + have_, size_ - have_),
                            [self = shared_from_this()](error_code ec, size_t n) {
                              self->guard([&] {
                                // Closed meanwhile (a write failed): the buffer is gone.
                                if (ec || self->closed_) return self->close();
                                self->have_ += n;
                                self->read_payload();
                              });
                            });
  }

  // The buffer at `want` bytes, its `have_` bytes kept; false when the budget is spent.
  bool grow(size_t want) {
    const size_t more = want - size_;
    if (!srv_.reserve(more)) return false;
    std::unique_ptr<char[]> bigger;
    try {
      bigger = std::make_unique_for_overwrite<char[]>(want);
    } catch (...) {
      srv_.release(more);
      throw;
    }
    if (have_ > 0) std::memcpy(bigger.get(), buffer_.get(), have_);
    buffer_ = std::move(bigger);
    size_ = want;
    return true;
  }

  // Frees the payload buffer and gives its bytes back to the budget.
  void drop_buffer() noexcept {
    if (size_ > 0) srv_.release(size_);
    buffer_.reset();
    size_ = have_ = need_ = 0;
  }

  // A whole frame. A small one is parsed here; a large one (a long prompt to tokenize)
  // on the parse pool, so that this I/O thread goes on serving the other connections.
  // Either way this connection reads its next frame only once the frame is handled:
  // frames act in order. From here until its answer is written the frame counts as busy
  // (answer()), so a server draining on SIGTERM waits for it instead of dropping it.
  void on_payload() {
    srv_.add_busy(1);
    if (need_ < kParseElsewhereBytes) {
      Parsed p = parse_frame(std::string_view(buffer_.get(), need_));
      drop_buffer();  // an idle connection holds no buffer
      return answer(p);
    }
    // The buffer (and its share of the budget) goes with the task and is given back
    // when the parse is done.
    auto held = std::make_shared<HeldBuffer>(std::move(buffer_), size_, srv_);
    const size_t n = need_;
    size_ = have_ = need_ = 0;
    asio::post(srv_.parse_pool, [self = shared_from_this(), held, n]() mutable {
      if (self->srv_.opts.on_offloaded_parse) self->srv_.opts.on_offloaded_parse();
      try {
        auto p =
            std::make_shared<Parsed>(self->parse_frame(std::string_view(held->bytes.get(), n)));
        held.reset();
        asio::post(self->socket_.get_executor(), [self, p] { self->answer(*p); });
      } catch (const std::exception& e) {
        // Out of memory even for the answer: this connection gives up.
        report("a frame could not be handled", e.what());
        try {
          asio::post(self->socket_.get_executor(), [self] {
            ++self->unwritten_done_;  // on_payload's busy, released by close()
            self->close();
          });
        } catch (...) {
        }
      }
    });
  }

  // --- frames -------------------------------------------------------------------------

  // What a frame asks for, or the error frame it gets. Reads no connection state: it may
  // run on the parse pool.
  struct Parsed {
    json id;  // echoed once known to be one the client can read back
    std::shared_ptr<const http::Backend> backend;
    std::optional<Command> command;
    json error;  // the error frame, when command is not set
  };
  Parsed parse_frame(std::string_view payload) const {
    Parsed p;
    try {
      FrameDecode d = decode_payload(payload);
      if (!d.message) {
        p.error = error_message(nullptr, d.error);
        return p;
      }
      p.id = usable_id(*d.message);
      p.backend = srv_.backend();
      if (!p.backend) {
        p.error = error_message(p.id, "the model is still loading");
        return p;
      }
      p.command =
          parse_command(*d.message, p.backend->info, *p.backend->tokenizer, srv_.opts.api_key);
    } catch (const std::exception& e) {
      p.command.reset();
      p.error = internal_error(p.id, e.what());
    }
    return p;
  }
  static json internal_error(const json& id, const char* what) {
    return error_message(id, std::string("internal error while handling the frame: ") + what);
  }

  // Acts on the frame; on_payload's busy is released once what it queued is written
  // (release_done, as for a done frame), or at once when nothing is being written.
  void answer(Parsed& p) {
    ++unwritten_done_;
    guard([&] { act(p); });
    if (!out_.writing() || closed_) release_done();
  }

  // On the strand: the frame's answer or effect, then the next frame.
  void act(Parsed& p) {
    if (closed_) return;
    try {
      if (!p.command) {
        send(p.error);
      } else if (auto* err = std::get_if<CommandError>(&*p.command)) {
        spdlog::warn("tcp: frame refused: {}", err->message);
        send(error_message(err->id, err->message));
      } else if (auto* abort = std::get_if<AbortCommand>(&*p.command)) {
        on_abort(abort->id);
      } else {
        on_submit(std::get<SubmitCommand>(*p.command), *p.backend);
      }
    } catch (const std::exception& e) {
      // Nothing of the frame was kept (on_submit records a request only once it runs):
      // the frame is refused and the connection goes on. If even this throws, the
      // caller's guard closes the connection.
      send(internal_error(p.id, e.what()));
    }
    if (!closing_ && !closed_) read_header();
  }

  void on_submit(SubmitCommand& s, const http::Backend& backend) {
    const std::string key = id_key(s.id);
    if (srv_.draining) return send(error_message(s.id, "the server is shutting down"));
    if (live_.count(key))
      return send(error_message(s.id, "a request with this id is already in flight"));
    auto ex = socket_.get_executor();
    std::shared_ptr<http::Generation> gen = backend.engine->generate(
        s.request, [self = shared_from_this(), ex, key](int32_t, runtime::RequestOutput out) {
          // On a CAF thread: nothing may be thrown back into the engine.
          try {
            asio::post(ex, [self, key, out = std::move(out)] {
              try {
                self->on_output(key, out);
              } catch (const std::exception& e) {
                self->output_failed(key, out.finished(), e.what());
              } catch (...) {
                self->output_failed(key, out.finished(), "unknown exception");
              }
            });
          } catch (const std::exception& e) {
            report("an engine output was dropped", e.what());
          }
        });
    // Outputs reach on_output through the strand, after this returns.
    try {
      InFlight& f = live_[key];
      f.id = s.id;
      f.prompt_tokens = static_cast<int64_t>(s.request.prompt_tokens.size());
      f.gen = gen;
      srv_.add_busy(1);
    } catch (...) {
      live_.erase(key);
      gen->abort();
      throw;
    }
  }

  void on_abort(const json& id) {
    const auto it = live_.find(id_key(id));
    if (it == live_.end()) return send(error_message(id, "no request with this id is in flight"));
    it->second.gen->abort();  // its done frame (finish_reason abort) follows
  }

  // Frames are built before the request's state changes, so a throw (a failed
  // allocation) leaves it consistent for output_failed.
  void on_output(const std::string& key, const runtime::RequestOutput& out) {
    const auto it = live_.find(key);
    if (it == live_.end()) return;
    InFlight& f = it->second;
    f.completion_tokens += static_cast<int64_t>(out.new_tokens.size());
    const bool writes = !closed_ && !closing_;
    if (writes && (!out.new_tokens.empty() || !out.new_text.empty()))
      send(tokens_message(f.id, out));
    if (!out.finished()) return;
    std::string done;
    if (writes) done = encode_frame(done_message(f.id, out, f.prompt_tokens, f.completion_tokens));
    live_.erase(it);  // f dies here
    // Busy until the done frame is written: a draining server stops its threads once
    // nothing is busy, and must not cut the frame off.
    ++unwritten_done_;
    if (writes) enqueue(std::move(done));
    if (!out_.writing() || closed_) release_done();
  }

  // A stream of outputs broke (a failed allocation): the connection is closed, which
  // aborts its requests; a request whose last output this was is accounted for here.
  void output_failed(const std::string& key, bool finished, const char* why) noexcept {
    try {
      if (finished && live_.erase(key) > 0) srv_.add_busy(-1);
    } catch (...) {
    }
    fail(why);
  }

  void release_done() noexcept {
    try {
      srv_.add_busy(-unwritten_done_);
      unwritten_done_ = 0;
    } catch (...) {
    }
  }

  // --- writing ------------------------------------------------------------------------

  void send(const json& message) {
    if (closed_ || closing_) return;
    enqueue(encode_frame(message));
  }

  // A frame the queue cannot take (the client does not read) closes the connection.
  void enqueue(std::string frame) {
    if (closed_) return;
    if (!out_.push(std::move(frame))) return too_slow(kOutputLimit);
    if (!out_.writing()) write_next();
  }

  void write_next() {
    if (out_.empty() || closed_) {
      release_done();
      if (closing_) finish_closing();
      return;
    }
    // The frame stays queued until its write completes: close() may run meanwhile (a
    // read error) and must not free the buffer the write reads.
    out_.write_front(
        [self = shared_from_this()](error_code ec) {
          self->guard([&] {
            if (ec || self->closed_) {
              self->close();
              return self->release_done();
            }
            self->write_next();
          });
        },
        [self = shared_from_this()] { self->too_slow(kWriteTimeout); });
  }

  // The client does not read its output (too much queued, or a write stalled): its
  // requests are aborted, which frees their KV blocks, and the connection is closed
  // before it holds more. Logged with the request ids and counted by reason.
  void too_slow(const char* reason) noexcept {
    if (closed_) return;
    try {
      std::string ids;
      for (const auto& [key, f] : live_)
        ids += (ids.empty() ? "" : ",") + std::to_string(f.gen->request_id());
      spdlog::warn("tcp: the client does not read: {}; aborting requests [{}], closing",
                   slow_client_text(reason, out_), ids);
      if (const auto b = srv_.backend(); b && b->metrics)
        b->metrics->slow_client_disconnects("tcp", reason).inc();
    } catch (...) {  // the connection closes all the same
    }
    close();
  }

  // --- closing ------------------------------------------------------------------------

  // The framing cannot go on (a frame too long, or no buffer for it): an error frame,
  // then the connection closes. Its requests are aborted now; its buffer is given back.
  void refuse(const std::string& message) {
    drop_buffer();
    abort_all();
    send(error_message(nullptr, message));
    closing_ = true;
    linger_.expires_after(kLinger);
    linger_.async_wait([self = shared_from_this()](error_code ec) {
      if (!ec) self->close();
    });
    if (!out_.writing()) finish_closing();
  }

  // The error frame is written: stop sending, and read (and drop) what the client still
  // sends until it closes, so the frame is not lost to a reset.
  void finish_closing() {
    if (closed_ || lingering_) return;
    lingering_ = true;
    error_code ignored;
    socket_.shutdown(tcp::socket::shutdown_send, ignored);
    discard();
  }
  void discard() {
    socket_.async_read_some(asio::buffer(discard_),
                            [self = shared_from_this()](error_code ec, size_t) {
                              self->guard([&] {
                                if (ec) return self->close();
                                self->discard();
                              });
                            });
  }

  void abort_all() noexcept {
    for (auto& [key, f] : live_) {
      try {
        f.gen->abort();
      } catch (const std::exception& e) {
        report("an abort failed", e.what());
      }
    }
  }

  // The client is gone (or broke the framing): its requests are aborted; their last
  // outputs still arrive and release `busy`, but nothing more is written.
  void close() noexcept {
    if (closed_) return;
    closed_ = true;
    out_.clear();  // but a frame being written: the write still points into it
    error_code ignored;
    socket_.shutdown(tcp::socket::shutdown_both, ignored);
    socket_.close(ignored);
    try {
      linger_.cancel();
      out_.cancel_timer();
    } catch (...) {
    }
    drop_buffer();
    abort_all();
    release_done();  // their frames will not be written
    slot_.reset();   // its place under the cap is free now, not when the last sink goes
  }

  tcp::socket socket_;
  TcpServer::Impl& srv_;
  asio::steady_timer linger_;
  ConnectionSlot slot_;  // counts against max_connections until closed
  std::array<unsigned char, kFrameHeaderBytes> header_{};
  // The payload being read: size_ bytes allocated (and reserved from the budget), have_
  // of the need_ the header announced received.
  std::unique_ptr<char[]> buffer_;
  size_t size_ = 0, have_ = 0, need_ = 0;
  std::array<char, 512> discard_{};
  OutputQueue out_;  // encoded frames to write, in order, within the output limits
  bool closing_ = false;    // refused: the error frame is the last thing written
  bool lingering_ = false;  // refused, the frame written: reading until the client closes
  bool closed_ = false;
  // Requests whose done frame, and frames whose answer, is queued and not yet written:
  // each holds one `busy`.
  int64_t unwritten_done_ = 0;
  std::unordered_map<std::string, InFlight> live_;  // by id_key of the client's id
};

}  // namespace

TcpServer::TcpServer(TcpServerOptions options)
    : impl_(std::make_unique<Impl>(std::move(options))) {}

TcpServer::~TcpServer() {
  stop();
}

uint16_t TcpServer::listen() {
  Impl& s = *impl_;
  auto accept = [&s](tcp::socket sock, ConnectionSlot slot) {
    try {
      std::make_shared<Connection>(std::move(sock), s, std::move(slot))->start();
    } catch (const std::exception& e) {
      report("a connection could not start", e.what());  // its socket closes
    }
  };
  // Over max_connections: one error frame (a few bytes into a new socket's empty send
  // buffer, so the write does not wait), then the socket closes.
  auto refuse = [](tcp::socket sock) {
    try {
      const std::string frame = encode_frame(
          error_message(nullptr, "too many connections (max-connections); try again later"));
      error_code ignored;
      asio::write(sock, asio::buffer(frame), ignored);
      sock.shutdown(tcp::socket::shutdown_both, ignored);
    } catch (const std::exception& e) {
      report("a refusal could not be written", e.what());
    }
  };
  return s.listener.listen(accept, refuse);
}

void TcpServer::set_backend(std::shared_ptr<const http::Backend> backend) {
  std::lock_guard lock(impl_->mutex);
  impl_->backend_ = std::move(backend);
}

void TcpServer::drain() {
  impl_->draining = true;
  impl_->listener.drain();
}

bool TcpServer::wait_idle(std::chrono::milliseconds timeout) {
  return impl_->busy.wait_idle(timeout);
}

size_t TcpServer::buffered_bytes() const {
  return impl_->buffered.load();
}

size_t TcpServer::peak_buffered_bytes() const {
  return impl_->peak_buffered.load();
}

size_t TcpServer::peak_queued_bytes() const {
  return impl_->peak_queued.load();
}

void TcpServer::stop() {
  Impl& s = *impl_;
  s.listener.stop();
  s.parse_pool.stop();
  s.parse_pool.join();
}

}  // namespace troupe::net::tcp

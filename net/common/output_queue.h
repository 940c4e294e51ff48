// What one connection has to write, in order, with the two limits that keep a client
// which does not read from holding server memory, or its request's KV blocks, for ever
// (docs/serve.md "Clients that do not read"). Both servers (HTTP, TCP API) use it.
//
//   max_bytes  bytes queued at most (the message being written included). push() refuses
//              a message that would pass it, unless the queue is empty: one large
//              response still goes out, and memory stays under max(max_bytes, one message).
//   timeout    a write that moves no byte for this long calls `stalled`; 0: none.
//
//   if (!out_.push(std::move(frame))) return too_slow(kOutputLimit);
//   if (!out_.writing())
//     out_.write_front([self](error_code ec) { self->on_written(ec); },
//                      [self] { self->too_slow(kWriteTimeout); });
//
// Runs on the connection's strand, like everything of a connection. The handlers it is
// given hold the connection (and so this queue) alive until they run.
#pragma once

#include <atomic>
#include <boost/asio.hpp>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <string>
#include <string_view>
#include <utility>

namespace troupe::net {

struct OutputLimits {
  size_t max_bytes = 0;                 // 0: no cap
  std::chrono::milliseconds timeout{0};  // 0: no write timeout
  // Server-wide: the most bytes any one connection has had queued (tests read it).
  std::atomic<size_t>* peak = nullptr;
};

// Why a connection was closed for not reading (metrics label, log text).
constexpr const char* kOutputLimit = "output_limit";
constexpr const char* kWriteTimeout = "write_timeout";

class OutputQueue {
 public:
  using Socket = boost::asio::ip::tcp::socket;
  using error_code = boost::system::error_code;

  OutputQueue(Socket& socket, OutputLimits limits)
      : socket_(socket), limits_(limits), timer_(socket.get_executor()) {}

  // Queues `bytes` after what is queued; false (nothing queued) when that would pass
  // max_bytes and the queue is not empty.
  bool push(std::string bytes) {
    if (limits_.max_bytes > 0 && !queue_.empty() && bytes_ + bytes.size() > limits_.max_bytes)
      return false;
    bytes_ += bytes.size();
    queue_.push_back(std::move(bytes));
    if (limits_.peak != nullptr) {
      size_t peak = limits_.peak->load();
      while (bytes_ > peak && !limits_.peak->compare_exchange_weak(peak, bytes_)) {
      }
    }
    return true;
  }

  bool empty() const { return queue_.empty(); }
  bool writing() const { return writing_; }
  size_t bytes() const { return bytes_; }
  const OutputLimits& limits() const { return limits_; }

  // Writes the front message. `done(ec)` runs once it is all written (and popped) or the
  // write failed (then it stays queued). `stalled()` runs instead if no byte moves for
  // limits.timeout meanwhile; the caller then closes the socket, which ends the write
  // with an error, so `done` still runs.
  template <class Done, class Stalled>
  void write_front(Done done, Stalled stalled) {
    writing_ = true;
    offset_ = 0;
    write_some(std::move(done), std::move(stalled));
  }

  // Drops what is queued, except a message being written: its write still reads it.
  void clear() {
    const size_t keep = writing_ ? 1 : 0;
    while (queue_.size() > keep) {
      bytes_ -= queue_.back().size();
      queue_.pop_back();
    }
  }

  void cancel_timer() {
    ++deadline_;  // an expiry already queued is stale
    timer_.cancel();
  }

 private:
  // One async_write_some per call, so the deadline restarts whenever bytes move: a slow
  // reader that keeps reading is not cut off, one that stopped is.
  template <class Done, class Stalled>
  void write_some(Done done, Stalled stalled) {
    arm(stalled);
    const std::string& m = queue_.front();
    socket_.async_write_some(
        boost::asio::buffer(m.data() + offset_, m.size() - offset_),
        [this, done = std::move(done), stalled = std::move(stalled)](const error_code& ec,
                                                                     size_t n) mutable {
          offset_ += n;
          if (!ec && offset_ < queue_.front().size())
            return write_some(std::move(done), std::move(stalled));
          cancel_timer();
          writing_ = false;
          if (!ec) {
            bytes_ -= queue_.front().size();
            queue_.pop_front();
          }
          done(ec);
        });
  }

  template <class Stalled>
  void arm(const Stalled& stalled) {
    if (limits_.timeout.count() <= 0) return;
    const uint64_t id = ++deadline_;
    timer_.expires_after(limits_.timeout);
    timer_.async_wait([this, id, stalled](const error_code& ec) {
      if (!ec && id == deadline_ && writing_) stalled();
    });
  }

  Socket& socket_;
  OutputLimits limits_;
  boost::asio::steady_timer timer_;
  std::deque<std::string> queue_;  // messages to write, in order
  size_t bytes_ = 0;               // their sum
  size_t offset_ = 0;              // bytes of the front already written
  bool writing_ = false;
  uint64_t deadline_ = 0;  // which arm() the pending expiry belongs to
};

// Why a connection is closed for not reading, for the log line.
inline std::string slow_client_text(const char* reason, const OutputQueue& q) {
  char s[160];
  if (std::string_view(reason) == kWriteTimeout)
    std::snprintf(s, sizeof s, "no byte written for %g s (write-timeout), %zu bytes queued",
                  double(q.limits().timeout.count()) / 1000.0, q.bytes());
  else
    std::snprintf(s, sizeof s, "%zu bytes queued, more would pass %zu (max-queued-output-bytes)",
                  q.bytes(), q.limits().max_bytes);
  return s;
}

}  // namespace troupe::net

// The one timer of an HTTP session: which phase the session is in (waiting for a
// request, reading a header or body, lingering before close) and that phase's timeout.
// Re-arming replaces the previous phase; an epoch tells a stale expiry from the current
// one, so a handler already queued when the phase changed does nothing. Use it on the
// session's strand only.
#pragma once

#include <boost/asio.hpp>
#include <chrono>
#include <cstdint>
#include <memory>

namespace troupe::net::http {

enum class Phase { None, Idle, Header, Body, Linger };

class PhaseTimer {
 public:
  explicit PhaseTimer(const boost::asio::any_io_executor& ex) : timer_(ex) {}

  // Enters `p`; after `d` (none when d <= 0) `expired()` runs, unless arm() or cancel()
  // came first. `expired` should hold what it needs alive (the session's shared_ptr).
  template <class Expired>
  void arm(Phase p, std::chrono::milliseconds d, Expired expired) {
    phase_ = p;
    timed_out_ = false;
    const uint64_t epoch = ++epoch_;
    if (d.count() <= 0) {
      timer_.cancel();
      return;
    }
    timer_.expires_after(d);
    timer_.async_wait([this, epoch, expired](const boost::system::error_code& ec) {
      if (ec || epoch != epoch_) return;
      timed_out_ = true;
      expired();
    });
  }
  void cancel() {
    ++epoch_;
    timer_.cancel();
  }
  Phase phase() const { return phase_; }
  bool timed_out() const { return timed_out_; }  // the current phase's timeout fired

 private:
  boost::asio::steady_timer timer_;
  Phase phase_ = Phase::None;
  uint64_t epoch_ = 0;
  bool timed_out_ = false;
};

}  // namespace troupe::net::http

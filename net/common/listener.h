// The listening half every troupe server shares (HTTP, TCP API): open the socket, run
// the I/O threads, accept each connection onto its own strand, hold a connection cap,
// stop accepting on drain, stop the threads. What a connection does is the server's.
//
//   Listener l({host, port, "http", io_threads, max_connections});
//   uint16_t port = l.listen(
//       [&](tcp::socket s, ConnectionSlot slot) { make_shared<Session>(move(s),
//       move(slot))->start(); },
//       [&](tcp::socket s) { refuse_with_503(move(s)); });   // over the cap (optional)
//   l.drain();   // SIGTERM: nothing new is accepted
//   l.stop();    // the I/O threads end; handlers not yet run are dropped
//
// A connection counts against the cap from its accept until its ConnectionSlot is
// destroyed (the session keeps it as a member). A refused connection does not count.
// Accept errors such as EMFILE pause accepting briefly instead of spinning.
#pragma once

#include <atomic>
#include <boost/asio.hpp>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace troupe::net {

struct ListenerOptions {
  std::string host = "127.0.0.1";
  uint16_t port = 0;          // 0: the OS picks one; listen() returns it
  std::string what = "http";  // names the server in errors ("cannot listen on http ...")
  int io_threads = 1;
  size_t max_connections = 0;  // open connections at most; 0: no cap
};

// A connection's place under the cap; destroying the last copy frees it.
using ConnectionSlot = std::shared_ptr<void>;

class Listener {
 public:
  using Socket = boost::asio::ip::tcp::socket;
  using Accept = std::function<void(Socket socket, ConnectionSlot slot)>;
  using Refuse = std::function<void(Socket socket)>;  // empty: the socket is closed

  explicit Listener(ListenerOptions options);
  ~Listener();  // stop()
  Listener(const Listener&) = delete;
  Listener& operator=(const Listener&) = delete;

  // Binds, listens, starts accepting and the I/O threads; the bound port. Throws
  // troupe::Error naming host:port when it cannot. The callbacks run on the new socket's
  // strand (the socket's executor).
  uint16_t listen(Accept on_accept, Refuse on_refuse = {});
  void drain();  // closes the listening socket; open connections go on
  void stop();   // idempotent
  size_t connections() const { return open_->load(); }
  boost::asio::io_context& context() { return ioc_; }

 private:
  void run();  // an I/O thread
  void accept_next();
  void on_accepted(const boost::system::error_code& ec, Socket socket);

  ListenerOptions opts_;
  Accept on_accept_;
  Refuse on_refuse_;
  // Shared with the slots: a session may outlive the listener's other members.
  std::shared_ptr<std::atomic<size_t>> open_ = std::make_shared<std::atomic<size_t>>(0);
  boost::asio::io_context ioc_;
  boost::asio::ip::tcp::acceptor acceptor_{boost::asio::make_strand(ioc_)};
  boost::asio::steady_timer pause_{acceptor_.get_executor()};  // after an accept error
  std::optional<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> work_;
  std::vector<std::thread> threads_;
};

// Work in flight (generations, TCP requests) that a draining server waits for.
class BusyCount {
 public:
  void add(int64_t delta) {
    std::lock_guard lock(mutex_);
    busy_ += delta;
    cv_.notify_all();
  }
  // Until nothing is busy; false on timeout.
  bool wait_idle(std::chrono::milliseconds timeout) {
    std::unique_lock lock(mutex_);
    return cv_.wait_for(lock, timeout, [&] { return busy_ <= 0; });
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  int64_t busy_ = 0;
};

}  // namespace troupe::net

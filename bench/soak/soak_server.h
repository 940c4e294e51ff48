// The server a soak runs against: a `troupe serve` child the bench starts itself (on
// 127.0.0.1 with --port 0 --tcp-port 0, its port read from the "listening on
// http://HOST:PORT" line), or a running one named by --base-url and --server-pid. Either
// way the bench reads its RSS from /proc/PID/status, whether it is still alive, and its
// /metrics gauges.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "bench/serve/sse_client.h"

namespace troupe::bench {

class SoakServer {
 public:
  // Starts `<this binary> serve --host 127.0.0.1 --port 0 --tcp-port 0 <serve_args>` and
  // waits until /health answers 200; throws troupe::Error with the child's output when
  // it exits or does not get ready within the deadline.
  static std::unique_ptr<SoakServer> start(const std::vector<std::string>& serve_args);
  // A server this bench did not start (it is never signalled).
  static std::unique_ptr<SoakServer> attach(const BaseUrl& base, pid_t pid);
  ~SoakServer();  // kills a child still running

  const BaseUrl& base() const { return base_; }
  pid_t pid() const { return pid_; }
  bool own() const { return own_; }
  const std::string& command() const { return command_; }  // the child's command line
  bool alive();
  // VmRSS in KiB, or -1 when the process is gone.
  int64_t rss_kib() const;
  // The child: SIGTERM, then its exit code (-1: killed by a signal or still running after
  // the deadline). A server not started here: 0, nothing done.
  int stop();
  // The last bytes the child wrote (stdout and stderr), for failure messages.
  std::string output_tail();

 private:
  SoakServer() = default;
  uint16_t wait_for_port(double deadline_s);
  bool reap(bool block);  // true when the child has exited (exit_code_ set)

  BaseUrl base_;
  pid_t pid_ = -1;
  bool own_ = false;
  std::string command_;
  std::mutex mutex_;  // guards the fields below
  bool exited_ = false;
  int exit_code_ = -1;
  std::string head_, tail_;  // the child's first and most recent output
  std::thread reader_;
};

// The value of the first sample of `name` (exactly that metric, any labels) in a
// Prometheus text exposition; nullopt when absent.
std::optional<double> metric_value(const std::string& text, const std::string& name);

// The scheduler's state after a soak, from /metrics.
struct ServerIdleState {
  bool answered = false;  // /metrics answered with the gauges
  double running = -1, waiting = -1, used_blocks = -1;
};
// Polls /metrics until nothing runs or waits and no KV block is in use, or the deadline;
// the last state seen.
ServerIdleState wait_idle(const BaseUrl& base, double deadline_s);

}  // namespace troupe::bench

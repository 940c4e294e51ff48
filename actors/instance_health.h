// Whether an engine instance can serve, written by its supervisor and read by /health
// (through the EngineBridge) on other threads. No CAF types, so net/ can hold it. How
// often it restarted is runtime::EngineFigures::restarts (the one count; /metrics reads it).
//
//   starting     the rank is setting up (KV storage)       /health 503 "starting: ..."
//   ready        serving                                   /health 200
//   restarting   scheduler or rank died; both restart      /health 503 "restarting: ..."
//   down         restarted too often; requests get errors   /health 503 "down: ..."
//   unavailable  a cluster router: engines not up            /health 503 "1 of 2 engines ..."
#pragma once

#include <mutex>
#include <optional>
#include <string>

namespace troupe::actors {

class InstanceHealth {
 public:
  void set_starting() {
    std::lock_guard lock(mutex_);
    problem_ = "starting: the rank is setting up its KV cache";
  }
  void set_ready() {
    std::lock_guard lock(mutex_);
    problem_.reset();
  }
  void set_restarting(const std::string& why) {
    std::lock_guard lock(mutex_);
    problem_ = "restarting: " + why;
  }
  void set_down(const std::string& why) {
    std::lock_guard lock(mutex_);
    problem_ = "down: " + why;
  }
  // A cluster's router: which engines are not up (docs/cluster.md).
  void set_unavailable(const std::string& why) {
    std::lock_guard lock(mutex_);
    problem_ = why;
  }
  // nullopt while ready; else why the instance cannot serve now.
  std::optional<std::string> problem() const {
    std::lock_guard lock(mutex_);
    return problem_;
  }

 private:
  mutable std::mutex mutex_;
  // Not ready until its writer says so: /health may be asked before the supervisor or
  // the router has run at all (their actors start on a worker thread, after the HTTP
  // server listens), and a 200 then sent requests to a router with no engine dialed yet.
  std::optional<std::string> problem_ = "starting: the engine has not set up yet";
};

}  // namespace troupe::actors

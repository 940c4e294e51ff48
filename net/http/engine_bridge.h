// The bridge from HTTP sessions to the engine actors, with no CAF types in its interface
// (the Beast translation unit stays free of CAF headers).
//
// Each generation gets its own small event-based actor: it sends the request's n choices
// to the router as (generate, GenerateRequest, itself), receives their TokenEvents and
// hands each output to the session's Sink. The sink is called on a CAF worker thread and
// must not block: the HTTP server posts the output to the session's strand. So HTTP
// threads never wait on actors and CAF workers never wait on sockets.
//
//   auto bridge = make_engine_bridge(sys, router, metrics);      // actor_bridge.h
//   auto gen = bridge->generate(req, [](int32_t index, runtime::RequestOutput out) {...});
//   gen->abort();   // client gone: the choices are aborted, their KV blocks freed
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "net/openai/request_parse.h"
#include "runtime/scheduler/step_plan.h"
#include "runtime/step/engine_figures.h"

namespace troupe::net::http {

// A running generation; abort() is safe from any thread, any number of times, also after
// it finished.
class Generation {
 public:
  virtual ~Generation() = default;
  virtual void abort() = 0;
  // The engine id of its first choice, as the request's log lines name it.
  virtual int64_t request_id() const = 0;
};

// The engine as the HTTP server sees it. make_engine_bridge (actor_bridge.h) gives the
// one implementation, on the actors; the interface keeps CAF out of the server.
class EngineBridge {
 public:
  // Called once per output of choice `index`; the last output of each choice is finished().
  using Sink = std::function<void(int32_t index, runtime::RequestOutput out)>;

  virtual ~EngineBridge() = default;

  // Starts the request's n choices (choice i gets seed + i, as vLLM's parallel sampling;
  // a request without a seed gets a random one).
  virtual std::shared_ptr<Generation> generate(const openai::GenerationRequest& req, Sink sink) = 0;

  // Asks the scheduler for its state; `done` runs on a CAF thread (nullopt on timeout).
  // The implementation also copies the state into its metrics.
  virtual void engine_state(std::function<void(std::optional<runtime::EngineFigures>)> done) = 0;

  // nullopt while the engine can serve; else why not ("restarting: rank died: ..."),
  // for /health's 503.
  virtual std::optional<std::string> unhealthy_reason() const = 0;

  // Drain (docs/pd.md): the cluster router moves every request of `instance` to another
  // decode instance; `done` (on a CAF thread) gets why not, or "" and how many requests
  // the instance held. Only a cluster router drains: the default says so.
  struct DrainResult {
    std::string error;
    int64_t requests = 0;
  };
  virtual void drain(const std::string& instance, std::function<void(DrainResult)> done) {
    (void)instance;
    done({"drain needs a cluster router (troupe serve --config FILE --node NAME)", 0});
  }

  virtual int64_t in_flight() const = 0;  // generations not yet finished
  // Ends every generation with an error (FinishedError, cause shutdown) saying `why`:
  // the server stops before they finished, which the clients did not ask for.
  virtual void fail_all(const std::string& why) = 0;
  // Ends every generation actor (at shutdown, once the engine no longer answers).
  virtual void kill_all() = 0;
};

}  // namespace troupe::net::http

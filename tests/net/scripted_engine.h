// An EngineBridge with no model behind it, for the in-process server tests over real
// sockets (http_hostile_test, tcp_hostile_test, output_limits_test). Its script:
//   - every generation answers "hello" then " world" (finish_reason "length");
//   - hold(): the second output waits for release(); an abort ends a held choice at once;
//   - a prompt of the one token 666 makes generate() throw std::bad_alloc, as an engine
//     out of memory would;
//   - flood_next(text, pause): the next generation streams `text` again and again, from
//     a thread of its own, until it is aborted (a long generation whose client never
//     reads); after kFloodBytes it ends with "length" instead, so a server that never
//     aborts it fails the test rather than filling the machine.
// Call stop() before the server goes: flood threads hold its connections in their sinks.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "net/http/engine_bridge.h"
#include "net/http/server.h"
#include "support/golden.h"

namespace troupe::testing {

class ScriptedEngine : public net::http::EngineBridge {
 public:
  static constexpr size_t kFloodBytes = size_t(64) << 20;

  ~ScriptedEngine() override { stop(); }

  std::shared_ptr<net::http::Generation> generate(const net::openai::GenerationRequest& req,
                                                  Sink sink) override {
    if (req.prompt_tokens == std::vector<int32_t>{666}) throw std::bad_alloc();
    prompt_tokens_ = int64_t(req.prompt_tokens.size());
    auto g = std::make_shared<Gen>(*this, next_id_++);
    std::lock_guard lock(mutex_);
    if (!flood_text_.empty()) {
      flood(g, std::move(sink), std::exchange(flood_text_, {}), flood_pause_);
      return g;
    }
    sink(0, output("hello", runtime::RequestStatus::Running));
    if (!hold_) {
      sink(0, output(" world", runtime::RequestStatus::FinishedLength));
    } else {
      g->sink = std::move(sink);
      held_.push_back(g);
    }
    return g;
  }
  void engine_state(std::function<void(std::optional<runtime::EngineFigures>)> done) override {
    done(runtime::EngineFigures{});
  }
  int64_t in_flight() const override { return 0; }
  void fail_all(const std::string&) override {}
  std::optional<std::string> unhealthy_reason() const override { return std::nullopt; }
  void kill_all() override {}

  void hold() {
    std::lock_guard lock(mutex_);
    hold_ = true;
  }
  void release() {
    std::vector<std::shared_ptr<Gen>> held;
    {
      std::lock_guard lock(mutex_);
      hold_ = false;
      held.swap(held_);
    }
    for (auto& g : held) {
      std::lock_guard lock(g->mutex);
      if (g->sink) g->sink(0, output(" world", runtime::RequestStatus::FinishedLength));
      g->sink = nullptr;
    }
  }
  void flood_next(std::string text, std::chrono::microseconds pause = {}) {
    std::lock_guard lock(mutex_);
    flood_text_ = std::move(text);
    flood_pause_ = pause;
  }
  // Ends every flood (as if aborted) and joins its thread.
  void stop() {
    stopping_ = true;
    std::vector<std::thread> threads;
    {
      std::lock_guard lock(mutex_);
      threads.swap(threads_);
    }
    for (std::thread& t : threads) t.join();
  }

  int64_t last_prompt_tokens() const { return prompt_tokens_; }
  int64_t aborts() const { return aborts_; }  // generations aborted (held or flooding)

 private:
  struct Gen : net::http::Generation {
    Gen(ScriptedEngine& e, int64_t i) : engine(e), id(i) {}
    void abort() override {
      if (!aborted.exchange(true)) engine.aborts_ += 1;
      std::lock_guard lock(mutex);
      if (!sink) return;
      runtime::RequestOutput out;
      out.status = runtime::RequestStatus::FinishedAborted;
      auto s = std::move(sink);
      sink = nullptr;
      s(0, out);
    }
    int64_t request_id() const override { return id; }
    ScriptedEngine& engine;
    const int64_t id;
    std::atomic<bool> aborted{false};
    std::mutex mutex;
    Sink sink;  // set while held
  };

  // Under mutex_.
  void flood(std::shared_ptr<Gen> g, Sink sink, std::string text,
             std::chrono::microseconds pause) {
    threads_.emplace_back([this, g, sink = std::move(sink), text, pause] {
      size_t sent = 0;
      while (!g->aborted && !stopping_ && sent < kFloodBytes) {
        sink(0, output(text, runtime::RequestStatus::Running));
        sent += text.size();
        if (pause.count() > 0) std::this_thread::sleep_for(pause);
      }
      runtime::RequestOutput last;
      last.status = g->aborted || stopping_ ? runtime::RequestStatus::FinishedAborted
                                            : runtime::RequestStatus::FinishedLength;
      sink(0, last);
    });
  }

  static runtime::RequestOutput output(std::string text, runtime::RequestStatus status) {
    runtime::RequestOutput out;
    out.new_tokens = {7};
    out.new_text = std::move(text);
    out.status = status;
    return out;
  }

  std::mutex mutex_;
  bool hold_ = false;
  std::vector<std::shared_ptr<Gen>> held_;
  std::string flood_text_;
  std::chrono::microseconds flood_pause_{0};
  std::vector<std::thread> threads_;
  std::atomic<bool> stopping_{false};
  std::atomic<int64_t> next_id_{1};
  std::atomic<int64_t> aborts_{0};
  std::atomic<int64_t> prompt_tokens_{0};
};

// What a server gets once "the model is loaded": the golden tokenizer in front of
// `engine`, serving "tiny"; the caller sets more fields (limits, registry, metrics).
inline std::shared_ptr<net::http::Backend> scripted_backend(ScriptedEngine& engine,
                                                            int64_t max_model_len) {
  auto b = std::make_shared<net::http::Backend>();
  b->tokenizer = &golden_tokenizer();
  b->info.model_name = "tiny";
  b->info.max_model_len = max_model_len;
  b->engine = &engine;
  return b;
}

}  // namespace troupe::testing

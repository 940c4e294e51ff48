#include "bench/serve/multi_turn_bench.h"

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

#include "bench/common/stats.h"

namespace troupe::bench {
namespace {

using runtime::AgenticWorkload;

// The shared state of the workers: the workload (histories grow as turns finish), the
// queue of conversations whose next turn may be sent, and the results.
class TurnQueue {
 public:
  TurnQueue(const runtime::AgenticWorkloadConfig& w, ServeBenchRun& run)
      : workload_(w), run_(run), active_(w.conversations) {
    run_.requests.resize(size_t(w.conversations * w.turns));
    for (int64_t c = 0; c < w.conversations; ++c) ready_.push_back(c);
  }

  // The next turn to send: its conversation, turn and prompt; false when none is left.
  bool take(int64_t& conversation, int64_t& turn, std::vector<int32_t>& prompt) {
    std::unique_lock lock(mutex_);
    cv_.wait(lock, [&] { return !ready_.empty() || active_ == 0; });
    if (ready_.empty()) return false;
    conversation = ready_.front();
    ready_.pop_front();
    turn = workload_.turns_done(conversation);
    prompt = workload_.next_prompt(conversation);
    return true;
  }

  // Records the turn and queues the conversation's next one, or ends the conversation.
  void finish(int64_t conversation, int64_t turn, RequestResult r) {
    std::lock_guard lock(mutex_);
    if (r.ok && int64_t(r.token_ids.size()) != r.output_tokens) {
      r.ok = false;
      r.error = "the stream carried " + std::to_string(r.token_ids.size()) +
                " output token ids for " + std::to_string(r.output_tokens) +
                " tokens; the multi-turn workload needs the server to honour vLLM's "
                "\"return_token_ids\": true";
    }
    const int64_t turns = workload_.config().turns;
    if (r.ok) workload_.finish_turn(conversation, r.token_ids);
    if (r.ok && !workload_.done(conversation)) {
      ready_.push_back(conversation);
    } else {
      --active_;
      for (int64_t k = turn + 1; k < turns; ++k, ++done_)  // never sent: done for the bar
        run_.requests[size_t(conversation * turns + k)].error =
            "not sent: turn " + std::to_string(turn) + " of its conversation failed";
    }
    run_.requests[size_t(conversation * turns + turn)] = std::move(r);
    print_progress(++done_, int64_t(run_.requests.size()));
    cv_.notify_all();
  }

 private:
  AgenticWorkload workload_;
  ServeBenchRun& run_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<int64_t> ready_;  // conversations whose next turn can be sent, in order
  int64_t active_;             // conversations not finished (nor abandoned)
  int64_t done_ = 0;           // turns finished
};

}  // namespace

ServeBenchRun run_multi_turn_bench(const ServeBenchConfig& c,
                                   const runtime::AgenticWorkloadConfig& w) {
  ServeBenchRun run;
  TurnQueue queue(w, run);
  auto worker = [&] {
    int64_t conversation = 0, turn = 0;
    std::vector<int32_t> prompt;
    while (queue.take(conversation, turn, prompt)) {
      const std::string body =
          completion_body(c.model, prompt, w.output_len, /*return_token_ids=*/true);
      queue.finish(conversation, turn, send_completion(c.base, body));
    }
  };
  const double start = now_seconds();
  std::vector<std::thread> workers;
  for (int64_t i = 0; i < std::min(c.max_concurrency, w.conversations); ++i)
    workers.emplace_back(worker);
  for (std::thread& t : workers) t.join();
  run.duration_s = now_seconds() - start;
  return run;
}

}  // namespace troupe::bench

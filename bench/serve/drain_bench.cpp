#include "bench/serve/drain_bench.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <numeric>
#include <thread>

#include "bench/common/stats.h"
#include "runtime/workload/random_tokens.h"

namespace troupe::bench {
namespace {

// One stream's gaps around the ask: the largest gap that ended after it (index of its
// end in chunk_at_s; 0 when the stream does not run across the ask).
struct AcrossAsk {
  size_t first_after = 0;  // first chunk after the ask
  size_t widest = 0;       // end of the widest gap after it
};

AcrossAsk across(const RequestResult& r, double drain_at_s) {
  const std::vector<double>& t = r.chunk_at_s;
  AcrossAsk a;
  a.first_after = size_t(std::upper_bound(t.begin(), t.end(), drain_at_s) - t.begin());
  if (a.first_after == 0 || a.first_after == t.size()) return {};
  a.widest = a.first_after;
  for (size_t i = a.first_after; i < t.size(); ++i)
    if (t[i] - t[i - 1] > t[a.widest] - t[a.widest - 1]) a.widest = i;
  return a;
}

// Counts the streams that have had `after` chunks or ended, and wakes whoever waits for
// all of them.
struct Progress {
  std::mutex m;
  std::condition_variable cv;
  size_t ready = 0;
  void one_ready() {
    std::lock_guard lock(m);
    ++ready;
    cv.notify_all();
  }
};

// Every stream at once; the results in order. With `progress`, each stream counts itself
// ready at its `after`th chunk (or its end, if sooner).
std::vector<RequestResult> stream_all(const BaseUrl& base, const std::vector<std::string>& bodies,
                                      int64_t after = 0, Progress* progress = nullptr) {
  std::vector<RequestResult> out(bodies.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < bodies.size(); ++i)
    threads.emplace_back([&, i] {
      int64_t chunks = 0;
      out[i] = send_completion(base, bodies[i], [&] {
        if (progress && ++chunks == after) progress->one_ready();
      });
      if (progress && chunks < after) progress->one_ready();
    });
  for (std::thread& t : threads) t.join();
  return out;
}

// POST /admin/drain {"instance": NAME}, with the API key when there is one.
HttpResult ask_drain(const DrainBenchConfig& c) {
  std::string req = request_text(c.base, "POST", "/admin/drain",
                                 nlohmann::json{{"instance", c.instance}}.dump());
  if (!c.api_key.empty())
    req.insert(req.find("\r\n") + 2, "Authorization: Bearer " + c.api_key + "\r\n");
  return http_exchange(c.base, req, {}, /*recv_timeout_s=*/30);
}

void print_ms(const char* what, const std::vector<double>& s) {
  if (s.empty()) return (void)std::printf("%-44s none\n", what);
  std::vector<double> ms(s.size());
  std::transform(s.begin(), s.end(), ms.begin(), [](double x) { return x * 1e3; });
  std::printf("%-44s %6zu  %9.2f  %9.2f  %9.2f  %9.2f\n", what, ms.size(), percentile(ms, 0.5),
              percentile(ms, 0.99), percentile(ms, 0), percentile(ms, 1));
}

}  // namespace

DrainGaps drain_gaps(const std::vector<RequestResult>& streams, double drain_at_s, int64_t moved) {
  DrainGaps g;
  std::vector<std::pair<double, double>> after;  // (widest gap, ask to its end) per stream
  for (const RequestResult& r : streams) {
    const std::vector<double>& t = r.chunk_at_s;
    for (size_t i = 1; i < t.size() && t[i] <= drain_at_s; ++i) g.tpot_s.push_back(t[i] - t[i - 1]);
    const AcrossAsk a = across(r, drain_at_s);
    if (a.widest == 0) {
      ++g.not_across;
      continue;
    }
    after.emplace_back(t[a.widest] - t[a.widest - 1], t[a.widest] - drain_at_s);
  }
  std::sort(after.begin(), after.end(), std::greater<>());
  for (size_t i = 0; i < after.size(); ++i) {
    if (int64_t(i) < moved) {
      g.move_gap_s.push_back(after[i].first);
      g.next_token_s.push_back(after[i].second);
    } else {
      g.unmoved_gap_s.push_back(after[i].first);
    }
  }
  return g;
}

DrainBenchRun run_drain_bench(const DrainBenchConfig& c) {
  std::vector<std::string> bodies;
  uint64_t state = c.seed;
  for (int64_t i = 0; i < c.num_prompts; ++i)
    bodies.push_back(completion_body({}, runtime::draw_tokens(state, c.input_len, 0, c.max_token_id),
                                     c.output_len, /*return_token_ids=*/true));
  DrainBenchRun run;
  Progress progress;
  std::thread drainer([&] {
    {
      std::unique_lock lock(progress.m);
      progress.cv.wait(lock, [&] { return progress.ready == bodies.size(); });
    }
    run.drain_at_s = now_seconds();
    const HttpResult h = ask_drain(c);
    run.drain_status = h.status;
    run.drain_answer = h.status ? h.body : h.error;
    const auto j = nlohmann::json::parse(h.body, nullptr, /*allow_exceptions=*/false);
    if (h.status == 200 && j.is_object()) run.moved = j.value("requests", int64_t(0));
  });
  run.streams = stream_all(c.base, bodies, c.drain_after, &progress);
  drainer.join();
  if (c.check) run.undisturbed = stream_all(c.base, bodies);
  return run;
}

void print_drain_report(const DrainBenchConfig& c, const DrainBenchRun& run) {
  std::printf("drain asked %.2f s after the first send: HTTP %d %s\n",
              run.drain_at_s - run.streams.front().sent_at_s, run.drain_status, run.drain_answer.c_str());
  int64_t ok = 0;
  for (const RequestResult& r : run.streams) ok += r.ok && r.output_tokens == c.output_len;
  std::printf("streams finished whole: %lld of %lld\n", static_cast<long long>(ok),
              static_cast<long long>(run.streams.size()));
  std::vector<double> first, last;  // seconds after each stream's send
  for (const RequestResult& r : run.streams)
    if (!r.chunk_at_s.empty()) {
      first.push_back(r.chunk_at_s.front() - r.sent_at_s);
      last.push_back(r.chunk_at_s.back() - r.sent_at_s);
    }
  if (!first.empty())
    std::printf("first token %.3f s, last %.3f s after the send (medians; %zu chunks in the first stream)\n",
                percentile(first, 0.5), percentile(last, 0.5), run.streams.front().chunk_at_s.size());
  const DrainGaps g = drain_gaps(run.streams, run.drain_at_s, run.moved);
  std::printf("streams not decoding across the ask: %lld\n\n", static_cast<long long>(g.not_across));
  std::printf("%-44s %6s  %9s  %9s  %9s  %9s\n", "ms", "n", "median", "p99", "min", "max");
  print_ms("TPOT before the drain (reference, all gaps)", g.tpot_s);
  print_ms("gap across the move (moved streams)", g.move_gap_s);
  print_ms("drain asked -> first token after the move", g.next_token_s);
  print_ms("widest gap after the ask (unmoved streams)", g.unmoved_gap_s);
  if (run.undisturbed.empty()) return;
  int64_t same = 0;
  for (size_t i = 0; i < run.streams.size(); ++i)
    same += !run.streams[i].token_ids.empty() && run.streams[i].token_ids == run.undisturbed[i].token_ids;
  std::printf("\ntokens equal to the same prompts run again undisturbed: %lld of %zu streams\n",
              static_cast<long long>(same), run.streams.size());
}

}  // namespace troupe::bench

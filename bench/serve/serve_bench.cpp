#include "bench/serve/serve_bench.h"

#include <atomic>
#include <cmath>
#include <cstdio>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "bench/common/stats.h"
#include "kernels/check.h"
#include "runtime/workload/random_tokens.h"

namespace troupe::bench {
namespace {

using nlohmann::json;

// The request bodies and their send times (seconds after the start), fixed by the seed
// before anything is sent so a run is reproducible whatever the server does.
struct Plan {
  std::vector<std::string> bodies;
  std::vector<double> send_at;
};

Plan make_plan(const ServeBenchConfig& c) {
  Plan p;
  uint64_t state = c.seed;
  double t = 0;
  const bool burst = !(c.request_rate > 0) || std::isinf(c.request_rate);
  for (int64_t i = 0; i < c.num_prompts; ++i) {
    p.bodies.push_back(completion_body(
        c.model, runtime::draw_tokens(state, c.input_len, 0, c.max_token_id), c.output_len,
        /*return_token_ids=*/false));
    if (!burst) {  // exponential gaps: -ln(U) / rate, U in (0, 1]
      const double u = double((runtime::splitmix64(state) >> 11) + 1) / double(1ull << 53);
      t += -std::log(u) / c.request_rate;
    }
    p.send_at.push_back(t);
  }
  return p;
}

// Reads one event payload into the result: usage counts, an error, or a chunk with text
// or token ids (its arrival time is the TTFT or one ITL sample).
void on_event(const std::string& payload, double t0, double& last, RequestResult& r) {
  if (payload == "[DONE]") return;
  const json e = json::parse(payload, nullptr, /*allow_exceptions=*/false);
  if (e.is_discarded() || e.contains("error")) {
    r.error = e.is_discarded() ? "bad event: " + payload : e["error"].dump();
    return;
  }
  if (e.contains("usage") && e["usage"].is_object()) {
    const json& u = e["usage"];
    r.prompt_tokens = u.value("prompt_tokens", int64_t(0));
    r.output_tokens = u.value("completion_tokens", int64_t(0));
    if (u.contains("prompt_tokens_details") && u["prompt_tokens_details"].is_object())
      r.cached_tokens = u["prompt_tokens_details"].value("cached_tokens", int64_t(0));
  }
  const json& choices = e.value("choices", json::array());
  if (choices.empty()) return;
  const json& ids = choices[0].value("token_ids", json::array());
  for (const json& id : ids) r.token_ids.push_back(id.get<int32_t>());
  if (choices[0].value("text", std::string()).empty() && ids.empty()) return;
  const double now = now_seconds();
  r.chunk_at_s.push_back(now);
  if (r.ttft_s == 0)
    r.ttft_s = now - t0;
  else
    r.itl_s.push_back(now - last);
  last = now;
}

}  // namespace

std::string completion_body(const std::string& model, const std::vector<int32_t>& prompt,
                            int64_t max_tokens, bool return_token_ids) {
  json body = {{"prompt", prompt},
               {"max_tokens", max_tokens},
               {"ignore_eos", true},
               {"temperature", 0},
               {"stream", true},
               {"stream_options", {{"include_usage", true}}}};
  if (!model.empty()) body["model"] = model;
  if (return_token_ids) body["return_token_ids"] = true;
  return body.dump();
}

RequestResult send_completion(const BaseUrl& base, const std::string& body,
                              const std::function<void()>& on_chunk) {
  RequestResult r;
  const double t0 = now_seconds();
  r.sent_at_s = t0;
  double last = t0;
  const HttpResult h = http_request(base, "POST", "/v1/completions", body,
                                    [&](const std::string& p) {
                                      const size_t chunks = r.chunk_at_s.size();
                                      on_event(p, t0, last, r);
                                      if (on_chunk && r.chunk_at_s.size() > chunks) on_chunk();
                                    });
  r.latency_s = now_seconds() - t0;
  if (h.status != 200 && r.error.empty())
    r.error = h.status ? "HTTP " + std::to_string(h.status) + ": " + h.body : h.error;
  r.ok = r.error.empty() && r.output_tokens > 0;
  if (r.ok && r.ttft_s == 0) r.ttft_s = r.latency_s;  // no text at all: first byte = end
  if (!r.ok && r.error.empty()) r.error = "no usage in the stream";
  return r;
}

void print_progress(int64_t done, int64_t total) {
  const int width = 30;
  const int64_t filled = total ? done * width / total : width;
  std::fprintf(stderr, "\r[%s%s] %lld/%lld", std::string(size_t(filled), '#').c_str(),
               std::string(size_t(width - filled), ' ').c_str(), static_cast<long long>(done),
               static_cast<long long>(total));
  if (done == total) std::fprintf(stderr, "\n");
  std::fflush(stderr);
}

ServeTotals serve_totals(const ServeBenchRun& run) {
  ServeTotals t;
  for (const RequestResult& r : run.requests) {
    if (!r.ok) {
      ++t.failed;
      continue;
    }
    ++t.ok;
    t.input += r.prompt_tokens;
    t.cached += r.cached_tokens;
    t.output += r.output_tokens;
  }
  return t;
}

void check_reachable(const ServeBenchConfig& c) {
  const HttpResult h = http_request(c.base, "GET", "/v1/models", "");
  if (h.status == 0)
    TROUPE_FAIL("--base-url http://" << c.base.host << ":" << c.base.port << c.base.path_prefix
                                     << " is unreachable: " << h.error);
  if (h.status != 200)
    TROUPE_FAIL("--base-url: GET /v1/models answered HTTP " << h.status << ": " << h.body);
}

ServeBenchRun run_serve_bench(const ServeBenchConfig& c) {
  const Plan plan = make_plan(c);
  ServeBenchRun run;
  run.requests.resize(size_t(c.num_prompts));
  std::atomic<int64_t> next{0}, done{0};
  std::mutex print_mutex;
  const double start = now_seconds();
  // C workers take requests in order; each waits for its request's arrival time, so at
  // most C are in flight and later arrivals queue on the client as in vllm's semaphore.
  auto worker = [&] {
    for (int64_t i; (i = next++) < c.num_prompts;) {
      const double wait = start + plan.send_at[size_t(i)] - now_seconds();
      if (wait > 0) std::this_thread::sleep_for(std::chrono::duration<double>(wait));
      run.requests[size_t(i)] = send_completion(c.base, plan.bodies[size_t(i)]);
      std::lock_guard lock(print_mutex);
      print_progress(++done, c.num_prompts);
    }
  };
  std::vector<std::thread> workers;
  for (int64_t w = 0; w < std::min(c.max_concurrency, c.num_prompts); ++w) workers.emplace_back(worker);
  for (std::thread& t : workers) t.join();
  run.duration_s = now_seconds() - start;
  return run;
}

}  // namespace troupe::bench

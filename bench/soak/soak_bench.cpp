#include "bench/soak/soak_bench.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <thread>

#include "bench/common/stats.h"

namespace troupe::bench {
namespace {

constexpr int kWarmUpRequests = 4;     // before anything is timed or RSS read
constexpr double kIdleDeadlineS = 60;  // for the server to finish what the clients left

// The single-client reference: 10% of the soak's length, within [0.5 s, 10 s].
double reference_seconds(double soak_s) {
  return std::clamp(soak_s * 0.1, 0.5, 10.0);
}

void pause_ms(int ms) {
  std::this_thread::sleep_for(std::chrono::milliseconds(ms));
}

// Whether the server renders chat for its model: one chat request, refused (400) only
// where the model has no chat template troupe can render (a base model's .gguf), as the
// server's error says; every other answer counts as yes (and the soak judges it).
bool serves_chat(const BaseUrl& base) {
  uint64_t state = 0x63686174ull;
  const SoakOutcome o = run_soak_action(base, draw_good_action_of(SoakKind::Chat, state, base));
  return !(o.answer == "400" && o.detail.find("no chat template") != std::string::npos);
}

// One client sending good requests only: first the warm-up (not timed), then `seconds`
// of requests back to back. Unexpected outcomes are kept in `tally`.
SoakPhase run_reference(const BaseUrl& base, uint64_t seed, double seconds, bool chat,
                        SoakTally& tally) {
  uint64_t state = seed ^ 0x5eed5eed5eedull;
  for (int i = 0; i < kWarmUpRequests; ++i)
    tally.add(run_soak_action(base, draw_good_action(state, base, chat)));
  SoakPhase p;
  p.clients = 1;
  const double start = now_seconds();
  while (now_seconds() - start < seconds) {
    const SoakOutcome o = run_soak_action(base, draw_good_action(state, base, chat));
    tally.add(o);
    ++p.all_requests;
    if (o.cls != SoakClass::Served) continue;
    ++p.good_requests;
    p.output_tokens += o.output_tokens;
  }
  p.seconds = now_seconds() - start;
  return p;
}

// Shared by the clients and the watcher: progress, and a stop flag the watcher raises when
// the server dies (clients would otherwise spin on refused connections).
struct SoakProgress {
  std::atomic<int64_t> done{0}, unexpected{0};
  std::atomic<bool> stop{false}, clients_done{false};
};

// C clients, each with its own seeded sequence, until the deadline (a client finishes
// the action it is in).
void run_clients(const BaseUrl& base, const SoakConfig& c, bool chat, SoakProgress& progress,
                 SoakTallies& tallies) {
  const double until = now_seconds() + c.minutes * 60;
  std::mutex mutex;
  auto client = [&](int64_t index) {
    uint64_t state = c.seed * 0x9e3779b97f4a7c15ull + uint64_t(index) + 1;
    SoakTallies mine;
    while (!progress.stop && now_seconds() < until) {
      const SoakAction a = draw_soak_action(state, base, chat);
      const SoakOutcome o = run_soak_action(base, a);
      mine[size_t(a.kind)].add(o);
      ++progress.done;
      if (o.cls == SoakClass::Unexpected) ++progress.unexpected;
    }
    std::lock_guard lock(mutex);
    for (int k = 0; k < kSoakKinds; ++k) tallies[size_t(k)].merge(mine[size_t(k)]);
  };
  std::vector<std::thread> clients;
  for (int64_t i = 0; i < c.concurrency; ++i) clients.emplace_back(client, i);
  for (std::thread& t : clients) t.join();
}

// While the clients run: the server's RSS peak, whether it lives, a progress line.
void watch(SoakServer& server, const SoakConfig& c, SoakProgress& progress, SoakResult& r) {
  const double start = now_seconds();
  while (!progress.clients_done) {
    const int64_t rss = server.rss_kib();
    r.rss_peak_kib = std::max(r.rss_peak_kib, rss);
    const double quarter = c.minutes * 60 / 4;
    if (r.rss_quarters_kib.size() < 4 &&
        now_seconds() - start >= quarter * double(r.rss_quarters_kib.size() + 1))
      r.rss_quarters_kib.push_back(rss);
    if (!server.alive()) progress.stop = true;
    std::fprintf(stderr, "\rsoak %.1f/%.1f s: %lld requests, %lld unexpected",
                 now_seconds() - start, c.minutes * 60,
                 static_cast<long long>(progress.done.load()),
                 static_cast<long long>(progress.unexpected.load()));
    std::fflush(stderr);
    pause_ms(250);
  }
  std::fprintf(stderr, "\n");
}

SoakPhase soak_phase(const SoakConfig& c, const SoakTallies& tallies, double seconds) {
  SoakPhase p;
  p.clients = c.concurrency;
  p.seconds = seconds;
  for (int k = 0; k < kSoakKinds; ++k) {
    const SoakTally& t = tallies[size_t(k)];
    p.all_requests += t.sent;
    if (!soak_counts_tokens(SoakKind(k))) continue;
    p.good_requests += t.served;
    p.output_tokens += t.output_tokens;
  }
  return p;
}

// Why the soak failed; empty when it passed.
std::vector<std::string> judge(const SoakResult& r, const SoakTally& reference, bool own) {
  std::vector<std::string> out;
  if (!r.alive_at_end) out.push_back("the server died during the soak");
  int64_t unexpected = 0;
  std::string first;
  for (int k = 0; k < kSoakKinds; ++k) {
    const SoakTally& t = r.tallies[size_t(k)];
    unexpected += t.unexpected;
    if (first.empty() && t.unexpected)
      first = soak_kind_name(SoakKind(k)) + (", " + t.first_unexpected);
  }
  if (unexpected)
    out.push_back(std::to_string(unexpected) +
                  " requests got an answer their kind does not allow (first: " + first + ")");
  if (reference.unexpected)
    out.push_back("the reference run had " + std::to_string(reference.unexpected) +
                  " failed good requests (first: " + reference.first_unexpected + ")");
  if (r.alive_at_end && !r.idle.answered)
    out.push_back("/metrics did not answer with the scheduler gauges");
  if (r.idle.answered && r.idle.used_blocks != 0)
    out.push_back("KV blocks still in use " + std::to_string(int64_t(kIdleDeadlineS)) +
                  " s after the clients stopped: " + std::to_string(int64_t(r.idle.used_blocks)));
  if (r.idle.answered && (r.idle.running != 0 || r.idle.waiting != 0))
    out.push_back("requests still running or waiting after the clients stopped");
  if (own && r.exit_code != 0)
    out.push_back("troupe serve exited " + std::to_string(r.exit_code) + " after SIGTERM (want 0)");
  return out;
}

}  // namespace

void SoakTally::add(const SoakOutcome& o) {
  ++sent;
  ++answers[o.answer];
  if (o.cls == SoakClass::Served) {
    ++served;
    output_tokens += o.output_tokens;
  } else if (o.cls == SoakClass::ExpectedError) {
    ++expected_errors;
  } else {
    ++unexpected;
    if (first_unexpected.empty()) first_unexpected = o.answer + ": " + o.detail;
  }
}

void SoakTally::merge(const SoakTally& o) {
  sent += o.sent;
  served += o.served;
  expected_errors += o.expected_errors;
  unexpected += o.unexpected;
  output_tokens += o.output_tokens;
  for (const auto& [answer, n] : o.answers) answers[answer] += n;
  if (first_unexpected.empty()) first_unexpected = o.first_unexpected;
}

int run_soak(const SoakConfig& c) {
  std::unique_ptr<SoakServer> server = c.base.host.empty()
                                           ? SoakServer::start(c.serve_args)
                                           : SoakServer::attach(c.base, c.server_pid);
  const BaseUrl& base = server->base();
  std::printf("troupe bench soak: %lld clients for %.2f min (seed %llu) against %s:%u, %s\n",
              static_cast<long long>(c.concurrency), c.minutes,
              static_cast<unsigned long long>(c.seed), base.host.c_str(), unsigned(base.port),
              server->command().c_str());
  std::fflush(stdout);

  SoakResult r;
  r.chat = serves_chat(base);
  SoakTally reference;
  r.reference = run_reference(base, c.seed, reference_seconds(c.minutes * 60), r.chat, reference);
  r.rss_start_kib = r.rss_peak_kib = server->rss_kib();
  SoakProgress progress;
  std::thread watcher([&] { watch(*server, c, progress, r); });
  const double start = now_seconds();
  run_clients(base, c, r.chat, progress, r.tallies);
  r.soak = soak_phase(c, r.tallies, now_seconds() - start);
  progress.clients_done = true;
  watcher.join();

  r.alive_at_end = server->alive();
  if (r.alive_at_end) r.idle = wait_idle(base, kIdleDeadlineS);
  r.rss_end_kib = server->rss_kib();
  r.exit_code = server->stop();
  r.own_server = server->own();
  r.failures = judge(r, reference, r.own_server);
  print_soak_report(r);
  return r.failures.empty() ? 0 : 1;
}

}  // namespace troupe::bench

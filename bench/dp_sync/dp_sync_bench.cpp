#include "bench/dp_sync/dp_sync_bench.h"
#include "bench/dp_sync/inproc_all_reduce.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <mutex>
#include <numeric>
#include <optional>
#include <thread>

#include "bench/common/stats.h"
#include "bench/dp_sync/inproc_mailbox.h"
#include "kernels/check.h"
#include "runtime/collectives/all_reduce.h"
#include "runtime/collectives/step_metadata.h"

namespace troupe::bench {
namespace {

using runtime::collectives::AllReduceRank;
using runtime::collectives::CollectiveSchedule;
using runtime::collectives::StepMetadata;
using runtime::collectives::StepMetadataReduce;
using Message = runtime::collectives::CollectiveMessage<StepMetadata>;
using Progress = runtime::collectives::Progress<StepMetadata>;
using MakeSchedule = CollectiveSchedule (*)(int32_t rank, int32_t size);

// A barrier of the R rank threads that waits as the mailboxes do (spin with yield, or
// sleep on the generation), and gives up when the run is aborted.
class StepBarrier {
 public:
  StepBarrier(int32_t n, MailWait how) : n_(n), how_(how) {}
  bool arrive_and_wait(const std::atomic<bool>& abort) {
    const int64_t generation = generation_.load();
    if (arrived_.fetch_add(1) + 1 == n_) {
      arrived_.store(0);
      generation_.fetch_add(1);
      if (how_ == MailWait::Block) generation_.notify_all();
      return !abort.load();
    }
    while (generation_.load() == generation) {
      if (abort.load()) return false;
      if (how_ == MailWait::Spin)
        std::this_thread::yield();
      else
        generation_.wait(generation);
    }
    return !abort.load();
  }
  void interrupt() {
    generation_.fetch_add(1);
    generation_.notify_all();
  }

 private:
  const int32_t n_;
  const MailWait how_;
  std::atomic<int32_t> arrived_{0};
  std::atomic<int64_t> generation_{0};
};

// What the rank threads of one row share.
struct Group {
  Group(int32_t R, MakeSchedule make, MailWait how, const DpSyncBenchConfig& c)
      : ranks(R), make(make), how(how), config(c), boxes(R), barrier(R, how),
        start(c.steps * R), done(c.steps * R) {}

  const int32_t ranks;
  const MakeSchedule make;
  const MailWait how;
  const DpSyncBenchConfig& config;
  std::vector<InprocMailbox<Message>> boxes;  // [R]
  StepBarrier barrier;
  std::atomic<bool> abort{false};
  std::vector<double> start, done;  // [steps, R] seconds, lockstep phase
  double back_to_back_begin = 0, back_to_back_end = 0;
  std::mutex error_mu;
  std::string error;

  void fail(const std::string& what) {
    std::lock_guard<std::mutex> lock(error_mu);
    if (error.empty()) error = what;
    abort.store(true);
    barrier.interrupt();
    for (auto& box : boxes) box.interrupt();
  }
};

// Rank q contributes q + 1 tokens, so the reduced vector is known in advance.
void check_result(const StepMetadata& m, int32_t R, int64_t step) {
  TROUPE_CHECK(m.agreed() && m.step_min == step, "dp-sync: step ", step, " reduced to steps [",
               m.step_min, ", ", m.step_max, "]");
  TROUPE_CHECK(static_cast<int32_t>(m.tokens.size()) == R, "dp-sync: ", m.tokens.size(),
               " token counts for ", R, " ranks");
  for (int32_t q = 0; q < R; ++q)
    TROUPE_CHECK(m.tokens[q] == q + 1, "dp-sync: step ", step, " has ", m.tokens[q],
                 " tokens for rank ", q, ", expected ", q + 1);
}

// One all-reduce on rank r's thread (inproc_all_reduce.h), its result checked.
bool run_step(Group& g, AllReduceRank<StepMetadata, StepMetadataReduce>& ar, int32_t r,
              int64_t step, std::vector<Message>& batch) {
  const std::optional<StepMetadata> result = inproc_all_reduce(
      ar, g.boxes, r, step, runtime::collectives::local_step_metadata(r, g.ranks, step, r + 1, true),
      g.how, g.abort, batch);
  if (!result) return false;
  check_result(*result, g.ranks, step);
  return true;
}

void rank_main(Group& g, int32_t r) {
  try {
    AllReduceRank<StepMetadata, StepMetadataReduce> ar(g.make(r, g.ranks));
    std::vector<Message> batch;
    const DpSyncBenchConfig& c = g.config;
    int64_t step = 0;
    for (int64_t i = 0; i < c.warmup + c.steps; ++i, ++step) {
      if (!g.barrier.arrive_and_wait(g.abort)) return;
      const double t0 = now_seconds();
      if (!run_step(g, ar, r, step, batch)) return;
      if (i < c.warmup) continue;
      g.start[(i - c.warmup) * g.ranks + r] = t0;
      g.done[(i - c.warmup) * g.ranks + r] = now_seconds();
    }
    if (!g.barrier.arrive_and_wait(g.abort)) return;
    if (r == 0) g.back_to_back_begin = now_seconds();
    for (int64_t i = 0; i < c.back_to_back_steps; ++i, ++step)
      if (!run_step(g, ar, r, step, batch)) return;
    if (!g.barrier.arrive_and_wait(g.abort)) return;
    if (r == 0) g.back_to_back_end = now_seconds();
  } catch (const std::exception& e) {
    g.fail(e.what());
  }
}

// The whole group on this one thread, messages delivered first in, first out: the CPU the
// schedule's logic costs per step, summed over the R ranks, without threads or waiting.
double one_thread_us_per_step(int32_t R, MakeSchedule make, int64_t steps) {
  std::vector<AllReduceRank<StepMetadata, StepMetadataReduce>> group;
  for (int32_t r = 0; r < R; ++r) group.emplace_back(make(r, R));
  std::vector<Message> queue;
  int64_t results = 0;
  auto take = [&](Progress p) {
    for (Message& m : p.send) queue.push_back(std::move(m));
    if (p.result) ++results, check_result(*p.result, R, p.result->step_min);
  };
  const double t0 = now_seconds();
  for (int64_t step = 0; step < steps; ++step) {
    queue.clear();
    for (int32_t r = 0; r < R; ++r)
      take(group[r].start(step, runtime::collectives::local_step_metadata(r, R, step, r + 1, true)));
    for (size_t i = 0; i < queue.size(); ++i) {
      Message m = std::move(queue[i]);
      take(group[m.to].receive(std::move(m)));
    }
  }
  const double us = (now_seconds() - t0) * 1e6 / static_cast<double>(steps);
  TROUPE_CHECK(results == steps * R, "dp-sync: ", results, " results of ", steps * R);
  return us;
}

DpSyncBenchRow run_row(int32_t R, MakeSchedule make, MailWait how, const DpSyncBenchConfig& c) {
  Group g(R, make, how, c);
  std::vector<std::thread> threads;
  for (int32_t r = 0; r < R; ++r) threads.emplace_back(rank_main, std::ref(g), r);
  for (std::thread& t : threads) t.join();
  if (!g.error.empty()) TROUPE_FAIL(g.error);

  DpSyncBenchRow row;
  row.ranks = R;
  row.wait = how;
  for (int32_t r = 0; r < R; ++r) {
    const CollectiveSchedule s = make(r, R);
    row.schedule = s.name;
    row.messages_per_step += s.sends();
    row.busiest_rank = std::max(row.busiest_rank, s.sends() + s.receives());
  }
  for (int64_t i = 0; i < c.steps; ++i) {
    const auto first = g.start.begin() + i * R, last = g.done.begin() + i * R;
    row.latency_us.push_back((*std::max_element(last, last + R) - *std::min_element(first, first + R)) *
                             1e6);
  }
  row.one_thread_us = one_thread_us_per_step(R, make, c.steps);
  if (c.back_to_back_steps > 0)
    row.back_to_back_us =
        (g.back_to_back_end - g.back_to_back_begin) * 1e6 / static_cast<double>(c.back_to_back_steps);
  return row;
}

double mean(const std::vector<double>& v) {
  return std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
}

}  // namespace

void DpSyncBenchConfig::validate() const {
  if (ranks.empty()) TROUPE_FAIL("--ranks must list at least one group size");
  for (const int32_t r : ranks)
    if (r < 1 || r > 256) TROUPE_FAIL("--ranks: each group size must be in [1, 256], got " << r);
  if (steps < 1) TROUPE_FAIL("--steps must be at least 1, got " << steps);
  if (warmup < 0) TROUPE_FAIL("--warmup must be at least 0, got " << warmup);
  if (waits.empty()) TROUPE_FAIL("--wait must name spin, block or both");
  if (back_to_back_steps < 0)
    TROUPE_FAIL("--back-to-back-steps must be at least 0, got " << back_to_back_steps);
}

std::vector<DpSyncBenchRow> run_dp_sync_bench(const DpSyncBenchConfig& c) {
  c.validate();
  std::vector<DpSyncBenchRow> rows;
  for (const MailWait how : c.waits)
    for (const int32_t R : c.ranks)
      for (const MakeSchedule make : {runtime::collectives::recursive_doubling_schedule,
                                      runtime::collectives::gather_broadcast_schedule})
        rows.push_back(run_row(R, make, how, c));
  return rows;
}

void print_dp_sync_report(const DpSyncBenchConfig& c, const std::vector<DpSyncBenchRow>& rows) {
  std::printf("%-5s %5s  %-18s %9s %8s %9s %9s %9s %12s %12s\n", "wait", "ranks", "schedule",
              "msgs/step", "busiest", "p50 us", "p99 us", "mean us", "b2b us/step",
              "1-thread us");
  for (const DpSyncBenchRow& r : rows)
    std::printf("%-5s %5d  %-18s %9lld %8lld %9.2f %9.2f %9.2f %12.2f %12.2f\n",
                r.wait == MailWait::Spin ? "spin" : "block", r.ranks, r.schedule.c_str(),
                static_cast<long long>(r.messages_per_step), static_cast<long long>(r.busiest_rank),
                percentile(r.latency_us, 0.5), percentile(r.latency_us, 0.99), mean(r.latency_us),
                r.back_to_back_us, r.one_thread_us);
  std::printf("\np50 speed-up of recursive doubling over gather-broadcast (same run):");
  for (size_t i = 0; i + 1 < rows.size(); i += 2)
    std::printf("%s R=%d %.2fx", i == 0 || rows[i].wait != rows[i - 2].wait
                                     ? (rows[i].wait == MailWait::Spin ? "\n  spin: " : "\n  block:")
                                     : "",
                rows[i].ranks,
                percentile(rows[i + 1].latency_us, 0.5) / percentile(rows[i].latency_us, 0.5));
  const unsigned cores = std::thread::hardware_concurrency();
  const int32_t max_ranks = *std::max_element(c.ranks.begin(), c.ranks.end());
  std::printf("\n");
  if (static_cast<unsigned>(max_ranks) > cores)
    std::printf("note: %u hardware threads; with more ranks than that the rank threads "
                "time-share the cores and a step waits for the OS to run every rank, so the rows "
                "above R = %u price the OS scheduler as much as the schedule\n",
                cores, cores);
  std::printf("seed figures (MISSION.md; schedulers in separate processes): p50 5.4 -> 0.55 ms at 16 "
              "ranks, 10.8 -> 1.5 ms per step at DEP32\n");
}

}  // namespace troupe::bench

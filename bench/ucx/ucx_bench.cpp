#include "bench/ucx/ucx_bench.h"

#include <signal.h>
#include <spawn.h>
#include <spdlog/spdlog.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <numeric>
#include <thread>

#include "bench/common/stats.h"
#include "bench/dp_sync/dp_sync_bench.h"
#include "bench/ucx/kv_put_bench.h"
#include "kernels/check.h"
#include "runtime/collectives/schedule.h"
#include "runtime/dep/in_process_group.h"
#include "runtime/dep/ucx/ucx_communicator.h"
#include "runtime/dep/ucx/ucx_dp_sync.h"

extern char** environ;

namespace troupe::bench {
namespace {

using runtime::Bytes;
using runtime::Communicator;
using runtime::UcxCommunicator;

// Both ranks have made their buffers: the timed exchanges start together.
void barrier(Communicator& c) { c.all_to_all(std::vector<Bytes>(c.size())); }

// One rank's MoE steps on a 2-rank group: per step the dispatch buffers (T kE / 2 rows
// to the peer, as many kept) and the combine buffers (the experts' outputs of the rows
// that came) are made first, then a barrier; the timed part is dispatch + combine.
std::vector<double> moe_steps(Communicator& c, const UcxBenchShape& s, int64_t warmup, int64_t steps) {
  const int me = c.rank(), peer = 1 - me;
  std::vector<double> seconds;
  for (int64_t i = 0; i < warmup + steps; ++i) {
    c.begin_step();
    std::vector<Bytes> dispatch(2), combine(2);
    dispatch[peer] = Bytes(static_cast<size_t>(s.dispatch_bytes()), std::byte{1});
    dispatch[me] = Bytes(static_cast<size_t>(s.dispatch_bytes()), std::byte{1});
    combine[peer] = Bytes(static_cast<size_t>(s.combine_bytes()), std::byte{2});
    combine[me] = Bytes(static_cast<size_t>(s.combine_bytes()), std::byte{2});
    barrier(c);
    const double t0 = now_seconds();
    const auto rows = c.all_to_all(std::move(dispatch));
    const auto outputs = c.all_to_all(std::move(combine));
    const double t1 = now_seconds();
    TROUPE_CHECK(int64_t(rows[peer].size()) == s.dispatch_bytes() &&
                     int64_t(outputs[peer].size()) == s.combine_bytes(),
                 "bench ucx: rank ", me, " got ", rows[peer].size(), " + ", outputs[peer].size(),
                 " bytes, expected ", s.dispatch_bytes(), " + ", s.combine_bytes());
    if (i >= warmup) seconds.push_back(t1 - t0);
  }
  return seconds;
}

// The same bytes as one step moves between the ranks (both directions, both exchanges),
// copied once by memcpy on this thread: the in-process floor.
std::vector<double> memcpy_steps(const UcxBenchShape& s, int64_t warmup, int64_t steps) {
  const size_t n = static_cast<size_t>(2 * (s.dispatch_bytes() + s.combine_bytes()));
  std::vector<char> src(n, 1), dst(n, 0);
  std::vector<double> seconds;
  for (int64_t i = 0; i < warmup + steps; ++i) {
    const double t0 = now_seconds();
    std::memcpy(dst.data(), src.data(), n);
    const double t1 = now_seconds();
    src[i % n] = dst[(i * 7) % n];  // keeps the copy from being optimized away
    if (i >= warmup) seconds.push_back(t1 - t0);
  }
  return seconds;
}

// The same exchanges between two threads through the in-process group (buffers moved).
std::vector<double> in_process_steps(const UcxBenchShape& s, int64_t warmup, int64_t steps) {
  runtime::InProcessGroup group(2);
  std::vector<double> rank0;
  std::thread peer([&] { moe_steps(group.communicator(1), s, warmup, steps); });
  rank0 = moe_steps(group.communicator(0), s, warmup, steps);
  peer.join();
  return rank0;
}

struct SyncTimes {
  std::vector<double> start, done;  // [steps] seconds, CLOCK_MONOTONIC (one host)
};

// Lockstep DP-sync all-reduces over UCX, each after a barrier; rank q contributes q + 1
// tokens, so the result is known.
SyncTimes ucx_sync_steps(UcxCommunicator& c, int64_t warmup, int64_t steps) {
  runtime::StepMetadataRank ar(runtime::collectives::recursive_doubling_schedule(c.rank(), c.size()));
  SyncTimes t;
  for (int64_t i = 0; i < warmup + steps; ++i) {
    c.begin_step();
    barrier(c);
    const double t0 = now_seconds();
    const auto m = runtime::ucx_all_reduce(
        c, ar, i, runtime::collectives::local_step_metadata(c.rank(), c.size(), i, c.rank() + 1, true));
    const double t1 = now_seconds();
    TROUPE_CHECK(m.agreed() && m.step_min == i && m.tokens == std::vector<int64_t>({1, 2}),
                 "bench ucx: DP sync of step ", i, " reduced to a wrong value");
    if (i < warmup) continue;
    t.start.push_back(t0);
    t.done.push_back(t1);
  }
  return t;
}

Bytes pack(const std::vector<double>& v) {
  const auto* p = reinterpret_cast<const std::byte*>(v.data());
  return Bytes(p, p + v.size() * sizeof(double));
}
std::vector<double> unpack(const Bytes& b) {
  std::vector<double> v(b.size() / sizeof(double));
  std::memcpy(v.data(), b.data(), v.size() * sizeof(double));
  return v;
}

runtime::UcxOptions options(const UcxBenchConfig& c) {
  runtime::UcxOptions o;
  o.exchange_timeout_s = 60;
  if (c.peer_errors) o.peer_errors = runtime::UcxOptions::PeerErrors::Always;
  return o;
}

// What both ranks run, in the same order. Rank 1 ends by handing its DP-sync times over.
struct Figures {
  std::vector<std::vector<double>> moe;  // [shape] rank 0's step seconds
  std::vector<double> sync_us;           // last rank's result - first rank's start
};

Figures run_rank(UcxCommunicator& c, const UcxBenchConfig& config) {
  Figures f;
  for (const UcxBenchShape& s : config.shapes) f.moe.push_back(moe_steps(c, s, config.warmup, config.steps));
  const SyncTimes mine = ucx_sync_steps(c, config.sync_warmup, config.sync_steps);
  c.begin_step();
  std::vector<Bytes> send(2);
  send[1 - c.rank()] = pack(mine.start);
  const auto starts = c.all_to_all(std::move(send));
  send = std::vector<Bytes>(2);
  send[1 - c.rank()] = pack(mine.done);
  const auto dones = c.all_to_all(std::move(send));
  const std::vector<double> their_start = unpack(starts[1 - c.rank()]), their_done = unpack(dones[1 - c.rank()]);
  TROUPE_CHECK(their_start.size() == mine.start.size() && their_done.size() == mine.done.size(),
               "bench ucx: the peer timed ", their_start.size(), " DP-sync steps, this rank ", mine.start.size());
  for (size_t i = 0; i < mine.start.size(); ++i)
    f.sync_us.push_back((std::max(mine.done[i], their_done[i]) - std::min(mine.start[i], their_start[i])) * 1e6);
  return f;
}

// The child rank: killed if this process leaves early, waited for otherwise.
class Child {
 public:
  Child(const std::string& exe, std::vector<std::string> args) {
    std::vector<char*> argv;
    args.insert(args.begin(), exe);
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    const int e = posix_spawn(&pid_, exe.c_str(), nullptr, nullptr, argv.data(), environ);
    TROUPE_CHECK(e == 0, "bench ucx: cannot start ", exe, ": ", std::strerror(e));
  }
  ~Child() {
    if (pid_ > 0) kill(pid_, SIGKILL), waitpid(pid_, nullptr, 0);
  }
  int wait() {
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }

 private:
  pid_t pid_ = -1;
};

double mean(const std::vector<double>& v) { return std::accumulate(v.begin(), v.end(), 0.0) / double(v.size()); }

void print_report(const UcxBenchConfig& config, const std::string& transports, const Figures& f,
                  const std::vector<std::vector<double>>& copy, const std::vector<std::vector<double>>& group,
                  const std::vector<double>& inproc_sync_us) {
  std::printf("transports (rank 0 to rank 1): %s\n\n", transports.c_str());
  std::printf("MoE dispatch + combine, 2 ranks, T kE / 2 rows crossing each way per step; %lld steps after "
              "%lld warm-up; GB/s = bytes crossing (both ways) / p50\n",
              static_cast<long long>(config.steps), static_cast<long long>(config.warmup));
  std::printf("%-11s %6s %5s %6s %4s %11s | %10s %10s %8s | %10s %8s | %12s\n", "shape", "tokens", "top-k",
              "hidden", "elem", "bytes/step", "ucx p50 us", "ucx p99 us", "ucx GB/s", "memcpy us", "GB/s",
              "in-proc p50 us");
  for (size_t i = 0; i < config.shapes.size(); ++i) {
    const UcxBenchShape& s = config.shapes[i];
    const double bytes = 2.0 * double(s.dispatch_bytes() + s.combine_bytes());
    const double p50 = percentile(f.moe[i], 0.5), c50 = percentile(copy[i], 0.5);
    std::printf("%-11s %6lld %5lld %6lld %4lld %11.0f | %10.1f %10.1f %8.2f | %10.1f %8.2f | %12.1f\n",
                s.name.c_str(), static_cast<long long>(s.tokens), static_cast<long long>(s.top_k),
                static_cast<long long>(s.hidden), static_cast<long long>(s.element_bytes), bytes, p50 * 1e6,
                percentile(f.moe[i], 0.99) * 1e6, bytes / p50 * 1e-9, c50 * 1e6, bytes / c50 * 1e-9,
                percentile(group[i], 0.5) * 1e6);
  }
  std::printf("(in-proc: the same two exchanges between two threads through InProcessGroup, which moves the "
              "buffers instead of copying them)\n\n");
  std::printf("DP sync of the step metadata, recursive doubling, R = 2, lockstep (%lld steps after %lld "
              "warm-up); latency = last rank's result - first rank's start\n",
              static_cast<long long>(config.sync_steps), static_cast<long long>(config.sync_warmup));
  std::printf("%-34s %9s %9s %9s\n", "", "p50 us", "p99 us", "mean us");
  std::printf("%-34s %9.2f %9.2f %9.2f\n", "UCX, two processes", percentile(f.sync_us, 0.5),
              percentile(f.sync_us, 0.99), mean(f.sync_us));
  std::printf("%-34s %9.2f %9.2f %9.2f\n", "in-process, two threads (spin)", percentile(inproc_sync_us, 0.5),
              percentile(inproc_sync_us, 0.99), mean(inproc_sync_us));
}

}  // namespace

void UcxBenchConfig::validate() const {
  if (steps < 1) TROUPE_FAIL("--steps must be at least 1, got " << steps);
  if (warmup < 0) TROUPE_FAIL("--warmup must be at least 0, got " << warmup);
  if (sync_steps < 1) TROUPE_FAIL("--sync-steps must be at least 1, got " << sync_steps);
  if (sync_warmup < 0) TROUPE_FAIL("--sync-warmup must be at least 0, got " << sync_warmup);
  if (kv_put_repeats < 1) TROUPE_FAIL("--kv-put-repeats must be at least 1, got " << kv_put_repeats);
}

int run_ucx_bench_peer(const UcxBenchConfig& config, const std::string& dir) {
  config.validate();
  {
    UcxCommunicator c(1, 2, runtime::directory_all_gather(dir, "bench", 1, 2, 30), options(config));
    run_rank(c, config);
  }
  kv_put_receiver(dir);
  return 0;
}

int run_ucx_bench(const UcxBenchConfig& config, const std::string& self_exe,
                  const std::vector<std::string>& child_flags) {
  config.validate();
  char pattern[] = "/tmp/troupe-bench-ucx-XXXXXX";
  TROUPE_CHECK(mkdtemp(pattern) != nullptr, "bench ucx: cannot make a directory in /tmp");
  const std::string dir = pattern;
  std::vector<std::string> args = {"bench", "ucx", "--rank", "1", "--dir", dir};
  args.insert(args.end(), child_flags.begin(), child_flags.end());
  Figures f;
  std::string transports;
  KvPutReport puts;
  {
    Child child(self_exe, args);
    {
      UcxCommunicator c(0, 2, runtime::directory_all_gather(dir, "bench", 0, 2, 30), options(config));
      transports = c.transports();
      std::printf("troupe bench ucx: rank 0 here (pid %d), rank 1 a child process; UCX transports: %s\n",
                  static_cast<int>(getpid()), transports.c_str());
      std::fflush(stdout);
      f = run_rank(c, config);
    }
    puts = kv_put_sender(dir, config.kv_put_repeats);
    const int rc = child.wait();
    TROUPE_CHECK(rc == 0, "bench ucx: rank 1 exited with ", rc);
  }
  std::filesystem::remove_all(dir);
  // The baselines, after the child is gone: the same shapes in this process.
  std::vector<std::vector<double>> copy, group;
  for (const UcxBenchShape& s : config.shapes) {
    copy.push_back(memcpy_steps(s, config.warmup, config.steps));
    group.push_back(in_process_steps(s, config.warmup, config.steps));
  }
  DpSyncBenchConfig d;
  d.ranks = {2};
  d.steps = config.sync_steps;
  d.warmup = config.sync_warmup;
  d.back_to_back_steps = 0;
  d.waits = {MailWait::Spin};
  std::vector<double> inproc;
  for (const DpSyncBenchRow& row : run_dp_sync_bench(d))
    if (row.schedule == "recursive-doubling") inproc = row.latency_us;
  print_report(config, transports, f, copy, group, inproc);
  print_kv_puts(puts);
  return 0;
}

}  // namespace troupe::bench

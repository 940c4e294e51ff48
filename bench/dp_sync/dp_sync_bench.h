// `troupe bench dp-sync`: the latency of the DP-sync all-reduce (runtime/collectives) of
// the step metadata among R rank threads in one process, recursive doubling against the
// gather-then-broadcast baseline, over a minimal in-process transport (inproc_mailbox.h),
// not the actors; idle ranks spin with yield or sleep until mail comes. Per schedule and R:
//   lockstep      every step behind a barrier; latency = the last rank's result minus the
//                 first rank's start; p50 / p99 / mean over the steps
//   back-to-back  no barrier, each rank starts step N+1 as soon as it has N's result (as
//                 the schedulers will, their messages of N+1 overtaking N); wall time / step
//   1-thread      all R state machines on one thread, no waiting: the CPU the schedule's
//                 logic costs per step, summed over the ranks
// Every result is checked (tokens[q] = q + 1 for each rank q): a wrong one is an error.
// Figures only, never pass/fail.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bench/dp_sync/inproc_mailbox.h"

namespace troupe::bench {

struct DpSyncBenchConfig {
  std::vector<int32_t> ranks = {2, 4, 8, 16, 32};  // group sizes R
  int64_t steps = 2000;                            // timed lockstep steps per row
  int64_t warmup = 200;                            // untimed lockstep steps first
  int64_t back_to_back_steps = 2000;               // steps without a barrier per row
  std::vector<MailWait> waits = {MailWait::Spin, MailWait::Block};  // how idle ranks wait

  void validate() const;  // throws troupe::Error naming the flag
};

struct DpSyncBenchRow {
  std::string schedule;  // "recursive-doubling" or "gather-broadcast"
  int32_t ranks = 0;
  MailWait wait = MailWait::Spin;
  int64_t messages_per_step = 0;  // sent by all ranks together
  int64_t busiest_rank = 0;       // messages sent + received by the busiest rank per step
  std::vector<double> latency_us;  // [steps] lockstep latencies
  double back_to_back_us = 0;      // wall time per step without a barrier
  double one_thread_us = 0;        // the group's logic on one thread, per step
};

std::vector<DpSyncBenchRow> run_dp_sync_bench(const DpSyncBenchConfig& config);

void print_dp_sync_report(const DpSyncBenchConfig& config, const std::vector<DpSyncBenchRow>& rows);

}  // namespace troupe::bench

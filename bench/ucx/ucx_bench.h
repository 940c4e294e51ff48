// `troupe bench ucx`: the data plane between two processes (runtime/dep/ucx): MoE
// dispatch + combine over a UcxCommunicator at the tiny model's and a flash-shaped token
// count, beside the same bytes copied by memcpy and the same exchanges through the
// in-process group, all in one run; then the DP-sync all-reduce of the step metadata
// across the two processes (UCX mail) beside two threads of one process (bench dp-sync's
// mailboxes). The bench is rank 0; it starts rank 1 as a child process
// (`troupe bench ucx --rank 1 --dir DIR ...`) and meets it through files in DIR. Last,
// the KV hand-off's region puts between the two processes (kv_put_bench.h).
// Figures only, never pass/fail; every exchanged buffer's size is checked.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace troupe::bench {

struct UcxBenchShape {
  std::string name;
  int64_t tokens = 0;         // T tokens on each rank per step
  int64_t top_k = 0;          // kE picks per token
  int64_t hidden = 0;         // H
  int64_t element_bytes = 0;  // 4: f32 rows (what ExpertParallel sends), 2: bf16
  // With picks spread evenly over R = 2 ranks, T kE / 2 rows cross each way per step:
  int64_t rows_crossing() const { return tokens * top_k / 2; }
  int64_t dispatch_bytes() const { return rows_crossing() * (4 + hidden * element_bytes); }
  int64_t combine_bytes() const { return rows_crossing() * hidden * element_bytes; }
};

struct UcxBenchConfig {
  // MODEL.md: tiny H 256, flash H 5120; both top-6.
  std::vector<UcxBenchShape> shapes = {{"tiny", 32, 6, 256, 4},
                                       {"flash-bf16", 256, 6, 5120, 2},
                                       {"flash-f32", 256, 6, 5120, 4}};
  int64_t steps = 200;   // timed MoE steps per shape
  int64_t warmup = 20;   // untimed first
  int64_t sync_steps = 2000;
  int64_t sync_warmup = 200;
  bool peer_errors = false;  // UcxOptions::PeerErrors::Always (TCP on one host)
  int64_t kv_put_repeats = 20;  // timed puts per KV region size (kv_put_bench.h)

  void validate() const;  // throws troupe::Error naming the flag
};

// The bench: rank 0 here, rank 1 started as `self_exe bench ucx --rank 1 --dir DIR` plus
// child_flags. Prints the report.
int run_ucx_bench(const UcxBenchConfig& config, const std::string& self_exe,
                  const std::vector<std::string>& child_flags);

// Rank 1's side (the child process), meeting rank 0 in `dir`.
int run_ucx_bench_peer(const UcxBenchConfig& config, const std::string& dir);

}  // namespace troupe::bench

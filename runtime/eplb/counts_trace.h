// A recording of an instance's routing: one JSON line per step, the step's token counts
// per MoE layer and logical expert summed over the ranks, in the format `troupe eplb plan
// --weights` reads (runtime/eplb/expert_loads_json.h):
//   [[120, 3, 0, 55], [9, 9, 80, 2]]
//   [[101, 7, 2, 60], [8, 12, 77, 3]]
// Written by the engine (expert-counts-file), read by `troupe bench eplb --counts FILE`.
#pragma once

#include <cstdint>
#include <fstream>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "runtime/eplb/expert_loads_json.h"

namespace troupe::runtime::eplb {

class CountsRecorder {
 public:
  // Opens `path` for appending; throws troupe::Error naming it when it cannot.
  explicit CountsRecorder(const std::string& path);
  // One step's counts [layers, experts], as one line, flushed (a reader may follow it).
  void write(std::span<const int64_t> counts, int64_t layers, int64_t experts);
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::mutex mutex_;  // one recorder may outlive an incarnation's writer
  std::ofstream out_;
};

// Every line of the file (empty lines skipped), each [layers, experts] like the first.
// Throws troupe::Error naming the file and line on any malformation.
std::vector<ExpertLoads> read_counts_trace(const std::string& path);

}  // namespace troupe::runtime::eplb

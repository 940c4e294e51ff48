#include "runtime/eplb/counts_trace.h"

#include <cstring>

#include "kernels/check.h"

namespace troupe::runtime::eplb {

CountsRecorder::CountsRecorder(const std::string& path) : path_(path) {
  out_.open(path, std::ios::out | std::ios::app);
  if (!out_) TROUPE_FAIL("expert-counts-file: cannot open " << path << ": " << std::strerror(errno));
}

void CountsRecorder::write(std::span<const int64_t> counts, int64_t layers, int64_t experts) {
  TROUPE_CHECK(static_cast<int64_t>(counts.size()) == layers * experts, "expert counts: ",
               counts.size(), " values for ", layers, " x ", experts);
  std::string line = "[";
  for (int64_t l = 0; l < layers; ++l) {
    line += l ? ",[" : "[";
    for (int64_t e = 0; e < experts; ++e) {
      if (e) line += ',';
      line += std::to_string(counts[l * experts + e]);
    }
    line += ']';
  }
  line += "]\n";
  std::lock_guard lock(mutex_);
  out_ << line << std::flush;
}

std::vector<ExpertLoads> read_counts_trace(const std::string& path) {
  std::ifstream in(path);
  if (!in) TROUPE_FAIL("--counts: cannot open " << path << ": " << std::strerror(errno));
  std::vector<ExpertLoads> steps;
  int64_t n = 0;
  for (std::string line; std::getline(in, line);) {
    n += 1;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    try {
      ExpertLoads s = parse_expert_loads_json(line);
      if (!steps.empty() && (s.num_layers != steps.front().num_layers ||
                             s.num_logical != steps.front().num_logical))
        TROUPE_FAIL(s.num_layers << " layers x " << s.num_logical << " experts, the first step "
                    << steps.front().num_layers << " x " << steps.front().num_logical);
      steps.push_back(std::move(s));
    } catch (const Error& e) {
      TROUPE_FAIL(path << " line " << n << ": " << e.what());
    }
  }
  if (steps.empty()) TROUPE_FAIL(path << ": no steps recorded");
  return steps;
}

}  // namespace troupe::runtime::eplb

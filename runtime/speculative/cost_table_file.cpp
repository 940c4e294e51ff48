#include "runtime/speculative/cost_table_file.h"

#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "kernels/check.h"
#include "runtime/speculative/speculative_config.h"

namespace troupe::runtime {

std::vector<StepTimeSample> parse_cost_table(std::string_view text, std::string_view where) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    TROUPE_FAIL(where << ": not valid JSON (" << e.what() << ")");
  }
  if (!j.is_object() || !j.contains("step_seconds"))
    TROUPE_FAIL(where << ": must be an object {\"step_seconds\": {...}}");
  return parse_step_seconds(j["step_seconds"], where);
}

std::vector<StepTimeSample> read_cost_table(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    if (errno == ENOENT) return {};
    TROUPE_FAIL(path << ": cannot read (" << std::strerror(errno) << ")");
  }
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) TROUPE_FAIL(path << ": read failed");
  return parse_cost_table(text.str(), path);
}

void write_cost_table(const std::string& path, std::span<const StepTimeSample> cells) {
  // Unique per process and call: ranks (threads or processes) may write the same path.
  static std::atomic<uint64_t> serial{0};
  const std::string tmp = path + ".tmp." + std::to_string(::getpid()) + "." +
                          std::to_string(serial.fetch_add(1));
  const std::string text = "{\"step_seconds\": " + step_seconds_json(cells) + "}\n";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) TROUPE_FAIL(path << ": cannot write " << tmp << " (" << std::strerror(errno) << ")");
    out << text;
    out.close();
    if (!out) {
      std::remove(tmp.c_str());
      TROUPE_FAIL(path << ": writing " << tmp << " failed");
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    std::remove(tmp.c_str());
    TROUPE_FAIL(path << ": cannot replace it (" << std::strerror(err) << ")");
  }
}

}  // namespace troupe::runtime

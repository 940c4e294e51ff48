// Reading a value out of a Prometheus text exposition (GET /metrics) in tests.
#pragma once

#include <sstream>
#include <string>

namespace troupe::testing {

// The value of the first sample named exactly `name` (with or without labels), or -1.
inline double prometheus_value(const std::string& text, const std::string& name) {
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (line.rfind(name, 0) == 0 && line.size() > name.size() &&
        (line[name.size()] == ' ' || line[name.size()] == '{'))
      return std::stod(line.substr(line.rfind(' ') + 1));
  return -1;
}

}  // namespace troupe::testing

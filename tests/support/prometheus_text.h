// Reading a value out of a Prometheus text exposition (GET /metrics) in tests.
#pragma once

#include <cctype>
#include <sstream>
#include <string>

namespace troupe::testing {

// The value of the first sample line that starts with `series`, or -1 when none does.
// `series` is a whole metric name, optionally with a prefix of its labels
// (`name{reason="abort"`); the character after it must not continue the name, so
// `troupe:x` does not match `troupe:x_total`.
inline double prometheus_value(const std::string& text, const std::string& series) {
  const auto continues_name = [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == ':';
  };
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (line.rfind(series, 0) == 0 && line.size() > series.size() &&
        !continues_name(line[series.size()]))
      return std::stod(line.substr(line.rfind(' ') + 1));
  return -1;
}

// The value of the first sample of `family` whose labels contain `label`
// (`tier="disk"`), or -1 when none does.
inline double series_with(const std::string& text, const std::string& family,
                          const std::string& label) {
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (line.rfind(family + "{", 0) == 0 && line.find(label) != std::string::npos)
      return std::stod(line.substr(line.rfind(' ') + 1));
  return -1;
}

}  // namespace troupe::testing

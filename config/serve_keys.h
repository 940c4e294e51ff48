// The schema of ServeConfig: one entry per key, naming the YAML key / long flag, its
// kind, a one-line help, and how to read and print the value. The YAML loader, the flag
// parser and to_yaml() all walk this one table, so a key cannot be known to one and not
// the others.
#pragma once

#include <functional>
#include <span>
#include <string>
#include <string_view>

#include "config/serve_config.h"

namespace troupe::config {

enum class ValueKind : uint8_t { String, Int, Bool, Bytes, Seconds, Choice };

struct ConfigKey {
  std::string name;  // YAML key and long flag name, e.g. "max-num-seqs"
  ValueKind kind;
  std::string help;
  std::string expects;  // what a valid value is, for errors: "an integer in [0, 65535]"
  // Parses text into cfg; false (cfg unchanged) if the text is not a valid value.
  std::function<bool(ServeConfig&, const std::string&)> set;
  std::function<std::string(const ServeConfig&)> get;  // text that set() reads back
};

std::span<const ConfigKey> serve_config_keys();
const ConfigKey* find_serve_config_key(std::string_view name);

// The known key nearest to a misspelled one (edit distance <= 3), or "".
std::string nearest_serve_config_key(std::string_view name);

// Every key as "key: value" lines, in table order (a config file that reproduces cfg).
std::string to_yaml(const ServeConfig& cfg);

}  // namespace troupe::config

// Loading a ServeConfig: defaults, then a YAML file whose keys are the long flag names,
// then command-line flags. Every error is a troupe::Error that names the key and where it
// came from: "cfg.yaml:4: key 'port' expects an integer in [0, 65535], got '70000'" or
// "flag --port expects ...".
#pragma once

#include <map>
#include <set>
#include <string>

#include "config/serve_config.h"

namespace troupe::config {

// Key -> where it was last set ("cfg.yaml line 4", "flag --port"); keys at their default
// are absent.
using KeyOrigins = std::map<std::string, std::string>;

// Applies the keys of a YAML document to cfg. `source` names the document in errors (the
// file path). An empty document changes nothing.
void apply_serve_config_yaml(ServeConfig& cfg, const std::string& text, const std::string& source,
                             KeyOrigins* origins = nullptr);

// Defaults overridden by the file at `path`, checked with ServeConfig::validate().
ServeConfig load_serve_config_file(const std::string& path);

// Applies parsed flags (name without "--" -> value). A boolean key K is set by flag K with
// value "1" (or true/false) and cleared by flag no-K, as vLLM's --no-enable-prefix-caching.
// The flag "config" is skipped (it names the file, it is not a setting).
void apply_serve_flags(ServeConfig& cfg, const std::map<std::string, std::string>& flags,
                       KeyOrigins* origins = nullptr);

// The one call of `troupe serve`: defaults < flags["config"] file (if given) < the other
// flags, then validate(). The serve command puts its MODEL_DIR positional in flags["model"].
ServeConfig resolve_serve_config(const std::map<std::string, std::string>& flags);

// The whole file at `path`; an unreadable one is an Error naming it as `what` ("config file").
std::string read_text_file(const std::string& path, const char* what);

// Flag sets for cli::Args: every key (plus "config") takes a value, except the boolean
// keys, which appear as K and no-K without a value.
std::set<std::string> serve_value_flags();
std::set<std::string> serve_bool_flags();

}  // namespace troupe::config

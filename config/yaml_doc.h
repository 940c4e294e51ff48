// What the YAML loaders of config/ share (the serve config and the cluster file): parsing
// with errors at file:line:column, naming a node's kind, and applying a map of serve keys.
// yaml-cpp stays inside config/: only its .cpp files include this header.
#pragma once

#include <yaml-cpp/yaml.h>

#include <functional>
#include <string>

#include "config/load.h"
#include "config/serve_config.h"

namespace troupe::config {

// The document in `text`; a syntax error is a troupe::Error "source:line:col: YAML ...".
YAML::Node parse_yaml(const std::string& text, const std::string& source);

// "a list", "a map" or "no value", for "expects an integer, got a list".
const char* node_kind(const YAML::Node& n);

// "source:line" of a node, for messages.
std::string yaml_at(const std::string& source, const YAML::Node& n);

// Applies every "key: value" of `map` to cfg. A key for which `owned` returns a non-empty
// reason is refused with it ("... is set by the cluster file's router"); unknown keys,
// repeated keys and bad values are Errors at source:line.
void apply_serve_config_map(ServeConfig& cfg, const YAML::Node& map, const std::string& source,
                            KeyOrigins* origins,
                            const std::function<std::string(const std::string&)>& owned = {});

}  // namespace troupe::config

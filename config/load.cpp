#include "config/load.h"

#include <fstream>
#include <sstream>

#include "config/serve_keys.h"
#include "config/yaml_doc.h"
#include "config/value_parse.h"
#include "kernels/check.h"

namespace troupe::config {
namespace {

std::string did_you_mean(const std::string& name, const std::string& prefix) {
  const std::string near = nearest_serve_config_key(name);
  return near.empty() ? "" : " (did you mean '" + prefix + near + "'?)";
}

// Sets one key from one YAML value; `at` is "cfg.yaml:4" for messages.
void apply_yaml_value(ServeConfig& cfg, const ConfigKey& key, const YAML::Node& value,
                      const std::string& at) {
  if (!value.IsScalar())
    TROUPE_FAIL(at << ": key '" << key.name << "' expects " << key.expects << ", got "
                   << node_kind(value));
  if (!key.set(cfg, value.Scalar()))
    TROUPE_FAIL(at << ": key '" << key.name << "' expects " << key.expects << ", got '"
                   << value.Scalar() << "'");
}

// Applies the file at `path` (errors name it as given).
void apply_serve_config_file(ServeConfig& cfg, const std::string& path, KeyOrigins& origins) {
  apply_serve_config_yaml(cfg, read_text_file(path, "config file"), path, &origins);
}

}  // namespace

YAML::Node parse_yaml(const std::string& text, const std::string& source) {
  try {
    return YAML::Load(text);
  } catch (const YAML::ParserException& e) {
    TROUPE_FAIL(source << ":" << e.mark.line + 1 << ":" << e.mark.column + 1
                       << ": YAML syntax error: " << e.msg);
  }
}

std::string read_text_file(const std::string& path, const char* what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) TROUPE_FAIL(what << " '" << path << "' cannot be read");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

const char* node_kind(const YAML::Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Sequence:
      return "a list";
    case YAML::NodeType::Map:
      return "a map";
    default:
      return "no value";
  }
}

std::string yaml_at(const std::string& source, const YAML::Node& n) {
  return source + ":" + std::to_string(n.Mark().line + 1);
}

void apply_serve_config_map(ServeConfig& cfg, const YAML::Node& map, const std::string& source,
                            KeyOrigins* origins,
                            const std::function<std::string(const std::string&)>& owned) {
  std::map<std::string, int> first_line;
  for (const auto& kv : map) {
    const std::string at = yaml_at(source, kv.first);
    if (!kv.first.IsScalar()) TROUPE_FAIL(at << ": a key must be a plain name");
    const std::string name = kv.first.Scalar();
    const ConfigKey* key = find_serve_config_key(name);
    if (!key) TROUPE_FAIL(at << ": unknown key '" << name << "'" << did_you_mean(name, ""));
    if (owned)
      if (const std::string why = owned(name); !why.empty())
        TROUPE_FAIL(at << ": key '" << name << "' " << why);
    const auto [it, fresh] = first_line.emplace(name, kv.first.Mark().line + 1);
    if (!fresh)
      TROUPE_FAIL(at << ": key '" << name << "' is set twice (first on line " << it->second << ")");
    apply_yaml_value(cfg, *key, kv.second, at);
    if (origins) (*origins)[name] = source + " line " + std::to_string(it->second);
  }
}

void apply_serve_config_yaml(ServeConfig& cfg, const std::string& text, const std::string& source,
                             KeyOrigins* origins) {
  const YAML::Node root = parse_yaml(text, source);
  if (root.IsNull()) return;  // empty file or only comments: all defaults
  if (!root.IsMap())
    TROUPE_FAIL(source << ":" << root.Mark().line + 1
                       << ": expected 'key: value' lines at the top level, got "
                       << (root.IsSequence() ? "a list" : "a single value"));
  apply_serve_config_map(cfg, root, source, origins);
}

ServeConfig load_serve_config_file(const std::string& path) {
  ServeConfig cfg;
  KeyOrigins origins;
  apply_serve_config_file(cfg, path, origins);
  cfg.validate(origins);
  return cfg;
}

void apply_serve_flags(ServeConfig& cfg, const std::map<std::string, std::string>& flags,
                       KeyOrigins* origins) {
  for (const auto& [flag, value] : flags) {
    if (flag == "config") continue;
    const ConfigKey* key = find_serve_config_key(flag);
    std::string text = value;
    // --no-K clears boolean key K (vLLM's argparse BooleanOptionalAction spelling).
    if (!key && flag.rfind("no-", 0) == 0) {
      key = find_serve_config_key(flag.substr(3));
      if (key && key->kind != ValueKind::Bool) key = nullptr;
      if (key) {
        const auto on = parse_bool(value);
        if (!on) TROUPE_FAIL("flag --" << flag << " takes no value, got '" << value << "'");
        text = *on ? "false" : "true";
      }
    }
    if (!key) TROUPE_FAIL("unknown flag --" << flag << did_you_mean(flag, "--"));
    if (!key->set(cfg, text))
      TROUPE_FAIL("flag --" << flag << " expects " << key->expects << ", got '" << value << "'");
    if (origins) (*origins)[key->name] = "flag --" + flag;
  }
}

ServeConfig resolve_serve_config(const std::map<std::string, std::string>& flags) {
  ServeConfig cfg;
  KeyOrigins origins;
  if (const auto it = flags.find("config"); it != flags.end())
    apply_serve_config_file(cfg, it->second, origins);
  apply_serve_flags(cfg, flags, &origins);
  cfg.validate(origins);
  return cfg;
}

std::set<std::string> serve_value_flags() {
  std::set<std::string> out = {"config"};
  for (const ConfigKey& k : serve_config_keys())
    if (k.kind != ValueKind::Bool) out.insert(k.name);
  return out;
}

std::set<std::string> serve_bool_flags() {
  std::set<std::string> out;
  for (const ConfigKey& k : serve_config_keys())
    if (k.kind == ValueKind::Bool) out.insert({k.name, "no-" + k.name});
  return out;
}

}  // namespace troupe::config

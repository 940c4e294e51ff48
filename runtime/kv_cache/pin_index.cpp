#include "runtime/kv_cache/pin_index.h"

#include <spdlog/spdlog.h>

#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <system_error>

namespace troupe::runtime {
namespace {

using json = nlohmann::json;

std::optional<SavedPrefix> parse_entry(const json& e, size_t i, std::string* why) {
  auto fail = [&](const std::string& what) -> std::optional<SavedPrefix> {
    *why = "pins[" + std::to_string(i) + "]: " + what;
    return std::nullopt;
  };
  if (!e.is_object()) return fail("not an object");
  const auto name = e.find("name");
  const auto tokens = e.find("tokens");
  if (name == e.end() || !name->is_string()) return fail("\"name\" must be a string");
  if (tokens == e.end() || !tokens->is_array()) return fail("\"tokens\" must be an array");
  SavedPrefix p;
  p.name = name->get<std::string>();
  if (p.name.empty() || p.name.size() > kMaxPinNameBytes) return fail("\"name\" is empty or too long");
  p.tokens.reserve(tokens->size());
  for (const json& t : *tokens) {
    if (!t.is_number_integer() || t.get<int64_t>() < 0 ||
        t.get<int64_t>() > std::numeric_limits<int32_t>::max())
      return fail("a token is not an int32 >= 0");
    p.tokens.push_back(int32_t(t.get<int64_t>()));
  }
  return p;
}

}  // namespace

std::string encode_pin_index(std::span<const SavedPrefix> pins) {
  json list = json::array();
  for (const SavedPrefix& p : pins) list.push_back({{"name", p.name}, {"tokens", p.tokens}});
  return json{{"version", 1}, {"pins", std::move(list)}}.dump() + "\n";
}

std::optional<std::vector<SavedPrefix>> parse_pin_index(std::string_view text, std::string* why) {
  const json j = json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    *why = "not a JSON object";
    return std::nullopt;
  }
  const auto version = j.find("version");
  if (version == j.end() || !version->is_number_integer() || version->get<int64_t>() != 1) {
    *why = "\"version\" must be 1";
    return std::nullopt;
  }
  const auto list = j.find("pins");
  if (list == j.end() || !list->is_array()) {
    *why = "\"pins\" must be an array";
    return std::nullopt;
  }
  std::vector<SavedPrefix> out;
  std::set<std::string> names;
  for (size_t i = 0; i < list->size(); ++i) {
    auto p = parse_entry((*list)[i], i, why);
    if (!p) return std::nullopt;
    if (!names.insert(p->name).second) {
      *why = "pins[" + std::to_string(i) + "]: the name \"" + p->name + "\" comes twice";
      return std::nullopt;
    }
    out.push_back(std::move(*p));
  }
  return out;
}

std::string pin_index_path(const std::string& disk_dir) {
  return (std::filesystem::path(disk_dir) / "kv-pins.json").string();
}

std::vector<SavedPrefix> read_pin_index(const std::string& disk_dir) {
  const std::string path = pin_index_path(disk_dir);
  std::ifstream in(path, std::ios::binary);
  if (!in) return {};
  std::ostringstream text;
  text << in.rdbuf();
  std::string why;
  auto pins = parse_pin_index(text.str(), &why);
  if (!pins) {
    spdlog::warn("kv disk tier: ignoring {} (no saved prefixes restored): {}", path, why);
    return {};
  }
  return std::move(*pins);
}

bool write_pin_index(const std::string& disk_dir, std::span<const SavedPrefix> pins) {
  const std::string path = pin_index_path(disk_dir), tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << encode_pin_index(pins);
    if (!out) {
      spdlog::warn("kv disk tier: cannot write {} (saved prefixes will not survive a restart)", tmp);
      return false;
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) spdlog::warn("kv disk tier: cannot rename {}: {}", tmp, ec.message());
  return !ec;
}

}  // namespace troupe::runtime

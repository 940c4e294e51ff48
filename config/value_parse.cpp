#include "config/value_parse.h"

#include <array>
#include <cctype>
#include <charconv>
#include <cmath>
#include <algorithm>
#include <utility>
#include <vector>

namespace troupe::config {
namespace {

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(a[i])) !=
        std::tolower(static_cast<unsigned char>(b[i])))
      return false;
  return true;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

// Splits "1.5 GiB" into the number "1.5" and the unit "GiB".
std::pair<std::string_view, std::string_view> split_unit(std::string_view s) {
  size_t i = 0;
  while (i < s.size() && (std::isdigit(static_cast<unsigned char>(s[i])) || s[i] == '.')) ++i;
  return {s.substr(0, i), trim(s.substr(i))};
}

constexpr int64_t kKi = 1024;
constexpr std::array<std::pair<std::string_view, int64_t>, 9> kByteUnits = {{
    {"B", 1},
    {"KB", 1000},
    {"MB", 1000 * 1000},
    {"GB", int64_t(1000) * 1000 * 1000},
    {"TB", int64_t(1000) * 1000 * 1000 * 1000},
    {"KiB", kKi},
    {"MiB", kKi* kKi},
    {"GiB", kKi* kKi* kKi},
    {"TiB", kKi* kKi* kKi* kKi},
}};

}  // namespace

std::optional<int64_t> parse_int(std::string_view s) {
  if (!s.empty() && s.front() == '+') s.remove_prefix(1);
  int64_t v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return v;
}

std::optional<bool> parse_bool(std::string_view s) {
  for (std::string_view t : {"true", "yes", "on", "1"})
    if (iequals(s, t)) return true;
  for (std::string_view f : {"false", "no", "off", "0"})
    if (iequals(s, f)) return false;
  return std::nullopt;
}

std::optional<int64_t> parse_bytes(std::string_view s) {
  auto [number, unit] = split_unit(trim(s));
  int64_t scale = unit.empty() ? 1 : 0;
  for (const auto& [name, factor] : kByteUnits)
    if (iequals(unit, name)) scale = factor;
  const size_t dot = number.find('.');
  const std::string_view whole = number.substr(0, dot);
  const std::string_view frac = dot == std::string_view::npos ? "" : number.substr(dot + 1);
  if (scale == 0 || whole.empty() || (dot != std::string_view::npos && frac.empty()) ||
      frac.find('.') != std::string_view::npos || frac.size() > 18)
    return std::nullopt;
  // value = digits / 10^len(frac) * scale, in 128-bit integers so "1.5GiB" is exact.
  __int128 digits = 0, denom = 1;
  for (char c : std::string(whole) + std::string(frac)) {
    digits = digits * 10 + (c - '0');
    if (digits > (__int128(1) << 100)) return std::nullopt;
  }
  for (size_t i = 0; i < frac.size(); ++i) denom *= 10;
  const __int128 scaled = digits * scale;
  if (scaled % denom != 0) return std::nullopt;  // not whole bytes
  const __int128 bytes = scaled / denom;
  if (bytes > INT64_MAX) return std::nullopt;
  return static_cast<int64_t>(bytes);
}

std::optional<double> parse_seconds(std::string_view s) {
  auto [number, unit] = split_unit(trim(s));
  double scale = 0;
  if (unit.empty() || unit == "s") scale = 1;
  if (unit == "ms") scale = 1e-3;
  if (unit == "m") scale = 60;
  if (unit == "h") scale = 3600;
  double v = 0;
  const auto [end, ec] = std::from_chars(number.data(), number.data() + number.size(), v);
  if (scale == 0 || number.empty() || ec != std::errc() || end != number.data() + number.size())
    return std::nullopt;
  v *= scale;
  if (!std::isfinite(v)) return std::nullopt;
  return v;
}

std::string format_bytes(int64_t bytes) {
  for (auto [name, factor] :
       {std::pair{"TiB", kKi * kKi * kKi * kKi}, std::pair{"GiB", kKi * kKi * kKi},
        std::pair{"MiB", kKi * kKi}, std::pair{"KiB", kKi}})
    if (bytes != 0 && bytes % factor == 0) return std::to_string(bytes / factor) + name;
  return std::to_string(bytes);
}

std::string format_seconds(double seconds) {
  // Fixed notation (parse_seconds reads no exponents), shortest digits that read back.
  std::array<char, 400> buf{};  // DBL_MAX has 309 integer digits
  const auto [end, ec] =
      std::to_chars(buf.data(), buf.data() + buf.size(), seconds, std::chars_format::fixed);
  return std::string(buf.data(), end);
}

namespace {

size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] != b[j - 1] ? 1u : 0u)});
      diag = up;
    }
  }
  return row[b.size()];
}

}  // namespace

std::string nearest_name(std::string_view name, std::span<const std::string_view> candidates) {
  std::string_view best;
  size_t best_d = 4;
  for (const std::string_view c : candidates) {
    const size_t d = edit_distance(name, c);
    if (d < best_d) best_d = d, best = c;
  }
  return std::string(best);
}

}  // namespace troupe::config

#include "cli/args.h"

#include <cerrno>
#include <cstdlib>
#include <sstream>

#include "kernels/check.h"

namespace troupe::cli {

Args::Args(const std::vector<std::string>& argv, const std::set<std::string>& value_flags,
           const std::set<std::string>& bool_flags) {
  for (size_t i = 0; i < argv.size(); ++i) {
    const std::string& a = argv[i];
    if (a.rfind("--", 0) != 0 || a.size() == 2) {
      positional_.push_back(a);
      continue;
    }
    std::string name = a.substr(2), value;
    const auto eq = name.find('=');
    const bool inline_value = eq != std::string::npos;
    if (inline_value) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
    }
    if (bool_flags.count(name)) {
      if (inline_value) TROUPE_FAIL("flag --" << name << " takes no value");
      values_[name] = "1";
    } else if (value_flags.count(name)) {
      if (!inline_value) {
        if (i + 1 >= argv.size()) TROUPE_FAIL("flag --" << name << " needs a value");
        value = argv[++i];
      }
      values_[name] = value;
    } else {
      TROUPE_FAIL("unknown flag --" << name);
    }
  }
}

std::optional<std::string> Args::get(const std::string& flag) const {
  auto it = values_.find(flag);
  if (it == values_.end()) return std::nullopt;
  return it->second;
}

std::string Args::get_or(const std::string& flag, const std::string& fallback) const {
  return get(flag).value_or(fallback);
}

int64_t Args::get_int(const std::string& flag, int64_t fallback) const {
  auto v = get(flag);
  if (!v) return fallback;
  char* end = nullptr;
  errno = 0;
  const long long x = std::strtoll(v->c_str(), &end, 10);
  if (v->empty() || *end != '\0' || errno == ERANGE)
    TROUPE_FAIL("flag --" << flag << " expects an integer, got '" << *v << "'");
  return x;
}

double Args::get_double(const std::string& flag, double fallback) const {
  auto v = get(flag);
  if (!v) return fallback;
  char* end = nullptr;
  errno = 0;
  const double x = std::strtod(v->c_str(), &end);
  if (v->empty() || *end != '\0' || errno == ERANGE)
    TROUPE_FAIL("flag --" << flag << " expects a number, got '" << *v << "'");
  return x;
}

std::vector<int32_t> parse_token_ids(const std::string& text) {
  std::vector<int32_t> ids;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    size_t used = 0;
    long long v = 0;
    try {
      v = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != item.size() || v < INT32_MIN || v > INT32_MAX)
      TROUPE_FAIL("--tokens: '" << item << "' is not a token id");
    ids.push_back(static_cast<int32_t>(v));
  }
  if (ids.empty()) TROUPE_FAIL("--tokens: no token ids given");
  return ids;
}

}  // namespace troupe::cli

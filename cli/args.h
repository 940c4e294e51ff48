// A small flag parser for the troupe subcommands: `--name value`, `--name=value`
// and boolean `--name`. Unknown flags and missing values are errors naming the flag.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace troupe::cli {

class Args {
 public:
  // value_flags take a value; bool_flags do not. Positional arguments are kept in order.
  Args(const std::vector<std::string>& argv, const std::set<std::string>& value_flags,
       const std::set<std::string>& bool_flags);

  bool has(const std::string& flag) const { return values_.count(flag) > 0; }
  std::optional<std::string> get(const std::string& flag) const;
  std::string get_or(const std::string& flag, const std::string& fallback) const;
  int64_t get_int(const std::string& flag, int64_t fallback) const;
  double get_double(const std::string& flag, double fallback) const;
  const std::vector<std::string>& positional() const { return positional_; }

 private:
  std::map<std::string, std::string> values_;
  std::vector<std::string> positional_;
};

// "1,2,3" -> token ids (--tokens of logits and draft); anything else is an error naming
// the item. Range against the vocabulary is the model's check.
std::vector<int32_t> parse_token_ids(const std::string& text);

}  // namespace troupe::cli

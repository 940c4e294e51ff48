#include "net/openai/json_fields.h"

#include <cmath>

#include "net/openai/errors.h"

namespace troupe::net::openai {

namespace {

[[noreturn]] void wrong_type(const std::string& param, const char* expected, const json& got) {
  throw_api_error(ErrorKind::InvalidRequest,
                  "'" + param + "' must be " + expected + ", got " + got.type_name(), param);
}

// How a non-finite number reads in a message (JSON has no spelling for it).
std::string non_finite_text(double d) {
  if (std::isnan(d)) return "NaN";
  return d > 0 ? "Infinity" : "-Infinity";
}

}  // namespace

const json* find_field(const json& object, const std::string& name) {
  const auto it = object.find(name);
  if (it == object.end() || it->is_null()) return nullptr;
  return &*it;
}

std::optional<bool> get_bool(const json& object, const std::string& name) {
  const json* v = find_field(object, name);
  if (!v) return std::nullopt;
  if (!v->is_boolean()) wrong_type(name, "a boolean", *v);
  return v->get<bool>();
}

std::optional<double> get_number(const json& object, const std::string& name) {
  const json* v = find_field(object, name);
  if (!v) return std::nullopt;
  if (!v->is_number()) wrong_type(name, "a number", *v);
  const double d = v->get<double>();
  // NaN and infinities come from msgpack (the TCP API), never from JSON text: a parser
  // that overflows refuses the body (parse_json_object).
  if (!std::isfinite(d))
    throw_api_error(ErrorKind::InvalidRequest,
                    "'" + name + "' must be a finite number, got " + non_finite_text(d), name);
  return d;
}

std::optional<int64_t> get_int(const json& object, const std::string& name) {
  const json* v = find_field(object, name);
  if (!v) return std::nullopt;
  return as_int(*v, name);
}

std::optional<std::string> get_string(const json& object, const std::string& name) {
  const json* v = find_field(object, name);
  if (!v) return std::nullopt;
  if (!v->is_string()) wrong_type(name, "a string", *v);
  return v->get<std::string>();
}

std::vector<std::string> get_string_list(const json& object, const std::string& name) {
  const json* v = find_field(object, name);
  if (!v) return {};
  if (v->is_string()) return {v->get<std::string>()};
  if (!v->is_array()) wrong_type(name, "a string or a list of strings", *v);
  std::vector<std::string> out;
  for (const json& item : *v) {
    if (!item.is_string()) wrong_type(name, "a string or a list of strings", item);
    out.push_back(item.get<std::string>());
  }
  return out;
}

int64_t as_int(const json& value, const std::string& param) {
  if (value.is_number_integer() && !value.is_number_unsigned()) return value.get<int64_t>();
  // 2^63 as a double: larger values do not fit int64.
  constexpr double kLimit = 9223372036854775808.0;
  if (value.is_number_unsigned()) {
    if (value.get<uint64_t>() <= uint64_t(INT64_MAX)) return value.get<int64_t>();
  } else if (value.is_number_float()) {
    const double d = value.get<double>();
    if (!std::isfinite(d))
      throw_api_error(ErrorKind::InvalidRequest,
                      "'" + param + "' must be an integer, got " + non_finite_text(d), param);
    if (d == std::floor(d) && d >= -kLimit && d < kLimit) return int64_t(d);
  } else {
    wrong_type(param, "an integer", value);
  }
  throw_api_error(ErrorKind::InvalidRequest,
                  "'" + param + "' must be an integer in the int64 range, got " + value.dump(),
                  param);
}

std::vector<int32_t> as_token_ids(const json& value, const std::string& param, int64_t vocab_size) {
  if (!value.is_array()) wrong_type(param, "a list of token ids", value);
  std::vector<int32_t> ids;
  ids.reserve(value.size());
  for (const json& item : value) {
    const int64_t id = as_int(item, param);
    if (id < 0 || id >= vocab_size)
      throw_api_error(ErrorKind::InvalidRequest,
                      "token id " + std::to_string(id) + " in '" + param +
                          "' is outside the vocabulary [0, " + std::to_string(vocab_size) + ")",
                      param);
    ids.push_back(static_cast<int32_t>(id));
  }
  return ids;
}

}  // namespace troupe::net::openai

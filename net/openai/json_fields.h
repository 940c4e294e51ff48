// Typed reads of request body fields. A field that is absent or JSON null reads as
// "not given" (clients such as the openai SDKs send null for unset options); a field of
// the wrong type throws ApiException (400) naming the field.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace troupe::net::openai {

using nlohmann::json;

// The field's value, or nullptr when it is absent or null.
const json* find_field(const json& object, const std::string& name);

std::optional<bool> get_bool(const json& object, const std::string& name);
// A finite number: NaN and +-Inf (which msgpack can carry) are a 400 naming the field.
std::optional<double> get_number(const json& object, const std::string& name);
// An integer; a float with an integral value is accepted (as pydantic does), a non-finite
// or non-integral float or one outside int64 is a 400.
std::optional<int64_t> get_int(const json& object, const std::string& name);
std::optional<std::string> get_string(const json& object, const std::string& name);
// A string or a list of strings (OpenAI's "stop").
std::vector<std::string> get_string_list(const json& object, const std::string& name);

// Reads `value` as an int64 for the field `param`; throws 400 otherwise.
int64_t as_int(const json& value, const std::string& param);
// A list of token ids, each in [0, vocab_size).
std::vector<int32_t> as_token_ids(const json& value, const std::string& param, int64_t vocab_size);

}  // namespace troupe::net::openai

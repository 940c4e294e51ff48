// POST /tokenize and /detokenize, in vLLM's shapes.
//   /tokenize   {"prompt": string, "add_special_tokens": true}  or
//               {"messages": [...], "add_generation_prompt": true}  (the chat template)
//               plus optional "model" and "return_token_strs"
//            -> {"count", "max_model_len", "tokens": [ids], "token_strs": [..] | null}
//   /detokenize {"tokens": [ids]} -> {"prompt": text}
#pragma once

#include <nlohmann/json.hpp>
#include <string_view>
#include <variant>

#include "net/openai/errors.h"
#include "net/openai/request_parse.h"

namespace troupe::net::openai {

using JsonResult = std::variant<nlohmann::json, ApiError>;

JsonResult tokenize(std::string_view body, const ServingInfo& info, const model::TextTokenizer& tok);
JsonResult detokenize(std::string_view body, const ServingInfo& info, const model::TextTokenizer& tok);

}  // namespace troupe::net::openai

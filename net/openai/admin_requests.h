// The operator routes' bodies (docs/pd.md "Drain"): POST /admin/drain {"instance": NAME}
// asks the cluster router to move every request of that instance to another decode
// instance. Answered {"object": "drain", "instance": NAME, "requests": n} (n: the
// requests it held when asked, now moving).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <variant>

#include "net/openai/errors.h"
#include "net/openai/request_parse.h"

namespace troupe::net::openai {

struct DrainRequest {
  std::string instance;  // 1..256 bytes
};

std::variant<DrainRequest, ApiError> parse_drain_request(std::string_view body,
                                                         const ServingInfo& info);
nlohmann::json drain_response(const std::string& instance, int64_t requests);

}  // namespace troupe::net::openai

#include "net/openai/admin_requests.h"

#include "net/openai/json_fields.h"

namespace troupe::net::openai {

std::variant<DrainRequest, ApiError> parse_drain_request(std::string_view body,
                                                         const ServingInfo& info) {
  try {
    const json object = parse_json_object(body, info);
    const std::optional<std::string> instance = get_string(object, "instance");
    if (!instance) throw_api_error(ErrorKind::InvalidRequest, "'instance' is required", "instance");
    if (instance->empty() || instance->size() > 256)
      throw_api_error(ErrorKind::InvalidRequest, "'instance' must be 1 to 256 bytes", "instance");
    return DrainRequest{*instance};
  } catch (const ApiException& e) {
    return e.error;
  }
}

nlohmann::json drain_response(const std::string& instance, int64_t requests) {
  return {{"object", "drain"}, {"instance", instance}, {"requests", requests}};
}

}  // namespace troupe::net::openai

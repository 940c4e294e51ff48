// The HTTP routes of `troupe serve`: method + path -> a Route, or the ApiError to answer
// (404 unknown path, 405 known path with another method). HEAD matches every GET route
// (the server sends the GET's headers without its body). Pure logic, no sockets.
//
//   POST /v1/completions        POST /v1/chat/completions   GET /v1/models
//   GET  /health                GET  /metrics               POST /tokenize  POST /detokenize
//   POST /v1/kv/save            POST /v1/kv/delete          DELETE /v1/kv/ID (kv_requests.h)
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "net/openai/errors.h"

namespace troupe::net::http {

enum class Route {
  Completions, ChatCompletions, Models, Health, Metrics, Tokenize, Detokenize, KvSave, KvDelete,
  AdminDrain
};

struct RouteMatch {
  std::optional<Route> route;             // set when the method and path match
  std::optional<openai::ApiError> error;  // 404 or 405 otherwise
  std::string allow;                      // the path's methods, for a 405's Allow header
  std::string kv_id;                      // KvDelete by path: the ID of DELETE /v1/kv/ID
};

// `target` is the request target; a query string ("?...") is ignored.
RouteMatch match_route(std::string_view method, std::string_view target);

// Routes that need the API key when one is configured: the /v1 API and the tokenizer
// endpoints. /health and /metrics stay open for probes and scrapers (as vLLM does).
bool needs_api_key(Route r);

}  // namespace troupe::net::http

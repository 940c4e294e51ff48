#include "net/http/routes.h"

#include <array>

namespace troupe::net::http {
namespace {

struct RouteEntry {
  std::string_view path;
  std::string_view method;
  Route route;
};

constexpr std::array<RouteEntry, 10> kRoutes{{
    {"/v1/completions", "POST", Route::Completions},
    {"/v1/chat/completions", "POST", Route::ChatCompletions},
    {"/v1/models", "GET", Route::Models},
    {"/health", "GET", Route::Health},
    {"/metrics", "GET", Route::Metrics},
    {"/tokenize", "POST", Route::Tokenize},
    {"/detokenize", "POST", Route::Detokenize},
    {"/v1/kv/save", "POST", Route::KvSave},
    {"/v1/kv/delete", "POST", Route::KvDelete},
    {"/admin/drain", "POST", Route::AdminDrain},
}};

constexpr std::string_view kKvPrefix = "/v1/kv/";

}  // namespace

RouteMatch match_route(std::string_view method, std::string_view target) {
  const std::string_view path = target.substr(0, target.find('?'));
  RouteMatch m;
  for (const RouteEntry& e : kRoutes) {
    if (e.path != path) continue;
    // RFC 9110 9.3.2: HEAD is GET without the body; a server answering GET answers HEAD.
    const bool get = e.method == "GET";
    if (e.method == method || (get && method == "HEAD")) {
      m.route = e.route;
    } else {
      m.allow = get ? "GET, HEAD" : std::string(e.method);
      m.error = openai::ApiError{openai::ErrorKind::MethodNotAllowed,
                                 "Method " + std::string(method) + " not allowed on " +
                                     std::string(path) + "; use " + m.allow,
                                 ""};
    }
    return m;
  }
  // DELETE /v1/kv/ID: any other segment under /v1/kv/ names a saved prefix.
  if (path.starts_with(kKvPrefix) && path.size() > kKvPrefix.size()) {
    if (method == "DELETE") {
      m.route = Route::KvDelete;
      m.kv_id = std::string(path.substr(kKvPrefix.size()));
    } else {
      m.allow = "DELETE";
      m.error = openai::ApiError{openai::ErrorKind::MethodNotAllowed,
                                 "Method " + std::string(method) + " not allowed on " +
                                     std::string(path) + "; use DELETE",
                                 ""};
    }
    return m;
  }
  m.error = openai::ApiError{openai::ErrorKind::NotFound,
                             "No route " + std::string(method) + " " + std::string(path), ""};
  return m;
}

bool needs_api_key(Route r) {
  return r != Route::Health && r != Route::Metrics;
}

}  // namespace troupe::net::http

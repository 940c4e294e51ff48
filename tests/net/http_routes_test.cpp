// net/http/routes: every route by method and path, a query string ignored, 404 for an
// unknown path and 405 (with the allowed method) for a known path with another method.
#include <gtest/gtest.h>

#include "net/http/routes.h"

namespace troupe::net::http {
namespace {

TEST(HttpRoutes, MatchesEveryRoute) {
  const struct {
    const char* method;
    const char* target;
    Route route;
  } cases[] = {
      {"POST", "/v1/completions", Route::Completions},
      {"POST", "/v1/chat/completions", Route::ChatCompletions},
      {"GET", "/v1/models", Route::Models},
      {"GET", "/health", Route::Health},
      {"GET", "/metrics?name=x", Route::Metrics},
      {"POST", "/tokenize", Route::Tokenize},
      {"POST", "/detokenize", Route::Detokenize},
      {"HEAD", "/health", Route::Health},
      {"HEAD", "/v1/models", Route::Models},
      {"HEAD", "/metrics", Route::Metrics},
      {"POST", "/v1/kv/save", Route::KvSave},
      {"DELETE", "/v1/kv/conv-1", Route::KvDelete},
      {"POST", "/admin/drain", Route::AdminDrain},
  };
  for (const auto& c : cases) {
    const RouteMatch m = match_route(c.method, c.target);
    ASSERT_TRUE(m.route.has_value()) << c.target;
    EXPECT_EQ(*m.route, c.route) << c.target;
    EXPECT_FALSE(m.error.has_value());
  }
}

TEST(HttpRoutes, UnknownPathIs404AndWrongMethodIs405) {
  const RouteMatch unknown = match_route("GET", "/v1/complete");
  ASSERT_TRUE(unknown.error.has_value());
  EXPECT_EQ(unknown.error->status(), 404);
  EXPECT_FALSE(unknown.route.has_value());
  const RouteMatch wrong = match_route("DELETE", "/v1/models");
  ASSERT_TRUE(wrong.error.has_value());
  EXPECT_EQ(wrong.error->status(), 405);
  EXPECT_EQ(wrong.allow, "GET, HEAD");
  EXPECT_EQ(match_route("PUT", "/tokenize").allow, "POST");
  EXPECT_EQ(match_route("HEAD", "/tokenize").error->status(), 405);  // HEAD only on GET routes
  EXPECT_EQ(match_route("get", "/health").error->status(), 405);     // methods are case-sensitive
}

TEST(HttpRoutes, OnlyProbesSkipTheApiKey) {
  EXPECT_FALSE(needs_api_key(Route::Health));
  EXPECT_FALSE(needs_api_key(Route::Metrics));
  for (Route r : {Route::Completions, Route::ChatCompletions, Route::Models, Route::Tokenize,
                  Route::Detokenize, Route::KvSave, Route::KvDelete, Route::AdminDrain})
    EXPECT_TRUE(needs_api_key(r));
}

}  // namespace
}  // namespace troupe::net::http

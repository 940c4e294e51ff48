// HTTP requests as `troupe serve` reads them (net/http/server.cpp), without sockets: the
// bytes go through Beast's request_parser with the server's limits (64 KiB of header,
// the body limit), one request after another as on a keep-alive connection; each parsed
// request is routed (net/http/routes) and its body handled as the route would (the
// OpenAI parse, /tokenize, /detokenize, the API key check), down to the JSON reply text.
// Contract: nothing here throws; a malformed request is a parser error code or an
// ApiError value.
#include <boost/asio/buffer.hpp>
#include <boost/beast/http.hpp>

#include "fuzz/targets.h"
#include "net/http/request_checks.h"
#include "net/http/routes.h"
#include "net/openai/admin_requests.h"
#include "net/openai/kv_requests.h"
#include "net/openai/responses.h"
#include "net/openai/tokenize.h"

namespace troupe::fuzz {
namespace {

namespace bhttp = boost::beast::http;
using namespace net::openai;
using net::http::Route;
using Request = bhttp::request<bhttp::string_body>;

constexpr size_t kHeaderLimit = 64 * 1024;  // as Session::do_read
constexpr std::string_view kApiKey = "sk-fuzz";

void reply(const ApiError& err) {
  (void)dump_json(err.body());
}

void reply(const JsonResult& r) {
  if (const auto* err = std::get_if<ApiError>(&r)) return reply(*err);
  (void)dump_json(std::get<nlohmann::json>(r));
}

void generation(Endpoint ep, std::string_view body) {
  ParseResult r = parse_generation_request(ep, body, tiny_serving_info(), tiny_tokenizer());
  if (const auto* err = std::get_if<ApiError>(&r)) reply(*err);
}

// Session::handle without the engine: route, API key, then the route's body handling.
void handle(const Request& req) {
  const auto m =
      net::http::match_route(std::string(req.method_string()), std::string(req.target()));
  if (m.error) return reply(*m.error);
  const Route route = *m.route;
  // The seeds send "Authorization: Bearer sk-fuzz"; mutations reach the 401 path.
  if (net::http::needs_api_key(route)) {
    const auto auth = req[bhttp::field::authorization];
    if (auto err = check_api_key({auth.data(), auth.size()}, kApiKey)) return reply(*err);
  }
  const ServingInfo& info = tiny_serving_info();
  switch (route) {
    case Route::Completions:
      return generation(Endpoint::Completions, req.body());
    case Route::ChatCompletions:
      return generation(Endpoint::ChatCompletions, req.body());
    case Route::Tokenize:
      return reply(tokenize(req.body(), info, tiny_tokenizer()));
    case Route::Detokenize:
      return reply(detokenize(req.body(), info, tiny_tokenizer()));
    case Route::Models:
      return (void)dump_json(models_response(info, 0));
    case Route::KvSave: {
      ParseResult r = parse_kv_save(req.body(), info, tiny_tokenizer());
      if (const auto* err = std::get_if<ApiError>(&r)) reply(*err);
      return;
    }
    case Route::KvDelete: {
      ParseResult r = parse_kv_delete(req.body(), m.kv_id, info);
      if (const auto* err = std::get_if<ApiError>(&r)) reply(*err);
      return;
    }
    case Route::AdminDrain: {
      auto r = parse_drain_request(req.body(), info);
      if (const auto* err = std::get_if<ApiError>(&r)) reply(*err);
      else (void)dump_json(drain_response(std::get<DrainRequest>(r).instance, 0));
      return;
    }
    case Route::Health:
    case Route::Metrics:
      return;
  }
}

// Parses one request from the front of `in` and consumes its bytes; false when the
// stream ends (malformed, incomplete or over a limit: the server answers or closes).
bool next_request(std::string_view& in) {
  in.remove_prefix(net::http::leading_empty_lines(in));  // RFC 9112 2.2, as the session
  bhttp::request_parser<bhttp::string_body> parser;
  parser.header_limit(kHeaderLimit);
  parser.body_limit(tiny_serving_info().max_body_bytes);
  parser.eager(true);
  bool header_checked = false;
  while (!parser.is_done()) {
    boost::beast::error_code ec;
    const size_t used = parser.put(boost::asio::buffer(in.data(), in.size()), ec);
    in.remove_prefix(used);
    if (ec == bhttp::error::need_more && used > 0) continue;
    if (ec == bhttp::error::need_more) parser.put_eof(ec);  // the client closed here
    if (ec) {
      if (auto err = net::http::read_error(ec, kHeaderLimit)) reply(*err);  // 400 / 431
      return false;
    }
    if (used == 0 && !parser.is_done()) return false;
    if (!header_checked && parser.is_header_done()) {  // the session's framing checks
      header_checked = true;
      const Request& h = parser.get();
      const net::http::HeaderFacts facts{h.version(), h.count(bhttp::field::content_length),
                                         h.count(bhttp::field::transfer_encoding),
                                         h.count(bhttp::field::host), parser.chunked()};
      if (auto err = net::http::check_header(facts)) return reply(*err), false;
    }
  }
  if (auto err = net::http::check_json_body(parser.get().body())) return reply(*err), false;
  handle(parser.get());
  return parser.keep_alive();
}

}  // namespace

void http_request(const uint8_t* data, size_t size) {
  std::string_view in = as_text(data, size);
  while (!in.empty() && next_request(in)) {
  }
}

}  // namespace troupe::fuzz

TROUPE_FUZZ_MAIN(troupe::fuzz::http_request)

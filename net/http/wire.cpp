#include "net/http/wire.h"

#include <cstdio>

#include "net/openai/responses.h"

namespace troupe::net::http {

std::string_view reason_phrase(int status) {
  switch (status) {
    case 100:
      return "Continue";
    case 200:
      return "OK";
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 408:
      return "Request Timeout";
    case 413:
      return "Payload Too Large";
    case 431:
      return "Request Header Fields Too Large";
    case 500:
      return "Internal Server Error";
    case 503:
      return "Service Unavailable";
    case 507:
      return "Insufficient Storage";
    default:
      return "Unknown";
  }
}

// Every response says HTTP/1.1 (RFC 9110 6.2: a server sends its own version, also to
// an HTTP/1.0 client) and names its Connection outcome explicitly.
std::string response_head(const ResponseHead& h) {
  std::string s = "HTTP/1.1 " + std::to_string(h.status) + " ";
  s += reason_phrase(h.status);
  s += "\r\nServer: troupe\r\nContent-Type: ";
  s += h.content_type;
  s += "\r\nContent-Length: " + std::to_string(h.content_length) + "\r\n";
  if (!h.allow.empty()) {
    s += "Allow: ";
    s += h.allow;
    s += "\r\n";
  }
  s += h.keep_alive ? "Connection: keep-alive\r\n\r\n" : "Connection: close\r\n\r\n";
  return s;
}

std::string sse_head(bool chunked, bool keep_alive) {
  std::string h =
      "HTTP/1.1 200 OK\r\nServer: troupe\r\nContent-Type: text/event-stream\r\n"
      "Cache-Control: no-cache\r\n";
  if (chunked) h += "Transfer-Encoding: chunked\r\n";
  h += keep_alive ? "Connection: keep-alive\r\n\r\n" : "Connection: close\r\n\r\n";
  return h;
}

std::string http_chunk(std::string_view data) {
  char size[24];
  const int n = std::snprintf(size, sizeof size, "%zx\r\n", data.size());
  std::string s(size, size_t(n));
  s.append(data);
  s += "\r\n";
  return s;
}

std::string error_response(const openai::ApiError& err, bool keep_alive) {
  const std::string body = openai::dump_json(err.body());
  return response_head({err.status(), "application/json", body.size(), keep_alive, {}}) + body;
}

}  // namespace troupe::net::http

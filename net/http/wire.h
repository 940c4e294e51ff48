// The bytes of troupe's HTTP/1.1 responses, written by hand (no Beast: the one Beast
// translation unit, server.cpp, stays the only slow one). Pure functions, no sockets.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "net/openai/errors.h"

namespace troupe::net::http {

struct ResponseHead {
  int status = 200;
  std::string_view content_type = "application/json";
  size_t content_length = 0;  // of the body a GET would get (also for HEAD)
  bool keep_alive = true;
  std::string_view allow;  // a 405's Allow header; empty: none
};

// Status line and headers, ending in the blank line.
std::string response_head(const ResponseHead& h);
// "Not Found" for 404, ...; "Unknown" for a status troupe never sends.
std::string_view reason_phrase(int status);

// The head of a server-sent event stream; chunked for HTTP/1.1 (HTTP/1.0: the body
// ends with the connection).
std::string sse_head(bool chunked, bool keep_alive);
// One chunk of a chunked body: hex size, CRLF, data, CRLF.
std::string http_chunk(std::string_view data);

// A whole JSON error response (the ApiError body) that closes the connection: what a
// refused or malformed request gets.
std::string error_response(const openai::ApiError& err, bool keep_alive);

}  // namespace troupe::net::http

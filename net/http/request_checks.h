// What the HTTP server refuses before routing, as ApiErrors (RFC 9112): a request it
// cannot parse, a header that makes the body length ambiguous, a body JSON cannot hold.
// Pure logic apart from reading Beast's error codes; server.cpp answers each refusal and
// closes the connection (after a framing error the next request's start is unknown).
#pragma once

#include <boost/system/error_code.hpp>
#include <cstddef>
#include <optional>
#include <string_view>

#include "net/openai/errors.h"

namespace troupe::net::http {

// The header fields that decide how a request's body is framed.
struct HeaderFacts {
  unsigned version = 11;                // 10: HTTP/1.0, 11: HTTP/1.1
  size_t content_length_fields = 0;     // field lines named Content-Length
  size_t transfer_encoding_fields = 0;  // field lines named Transfer-Encoding
  size_t host_fields = 0;               // field lines named Host
  bool chunked = false;                 // Beast found chunked as the final coding
};

// 400 for a duplicate Content-Length, a Transfer-Encoding other than chunked alone,
// and a missing (HTTP/1.1) or repeated Host (RFC 9112 3.2, 6.1, 6.3); nullopt when fine.
std::optional<openai::ApiError> check_header(const HeaderFacts& h);

// An error reading a request: 431 over the header limit, 400 for a malformed request
// (bad request line, field, Content-Length, chunk size, ...) or one cut off mid-way by
// a half-close; nullopt when there is nobody to answer (the peer left, the read was
// cancelled). The body limit (413) is the caller's: it needs the Content-Length.
std::optional<openai::ApiError> read_error(const boost::system::error_code& ec,
                                           size_t header_limit);

// 400 for a body with a NUL byte (JSON text cannot contain one, RFC 8259 7, and it
// would end the text for any C-string reader); nullopt when fine.
std::optional<openai::ApiError> check_json_body(std::string_view body);

// How many bytes of empty lines (CR, LF) precede a request line: RFC 9112 2.2 asks a
// server to ignore them.
size_t leading_empty_lines(std::string_view buffered);

}  // namespace troupe::net::http

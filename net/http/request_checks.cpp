#include "net/http/request_checks.h"

#include <boost/beast/http/error.hpp>
#include <string>

namespace troupe::net::http {

using openai::ApiError;
using openai::ErrorKind;

namespace {

ApiError bad_request(std::string message) {
  return {ErrorKind::InvalidRequest, std::move(message), ""};
}

}  // namespace

std::optional<ApiError> check_header(const HeaderFacts& h) {
  // Two lengths, or a length next to chunked (Beast refuses that one itself), let two
  // parties split the bytes differently: the start of request smuggling.
  if (h.content_length_fields > 1)
    return bad_request("malformed request: Content-Length given " +
                       std::to_string(h.content_length_fields) + " times");
  if (h.transfer_encoding_fields > 1)
    return bad_request("malformed request: Transfer-Encoding given " +
                       std::to_string(h.transfer_encoding_fields) + " times");
  if (h.transfer_encoding_fields == 1 && !h.chunked)
    return bad_request(
        "malformed request: Transfer-Encoding must be chunked (the only coding served)");
  if (h.transfer_encoding_fields == 1 && h.version < 11)
    return bad_request("malformed request: Transfer-Encoding in an HTTP/1.0 request");
  if (h.host_fields > 1) return bad_request("malformed request: Host given more than once");
  if (h.host_fields == 0 && h.version >= 11)
    return bad_request("malformed request: an HTTP/1.1 request needs a Host header");
  return std::nullopt;
}

std::optional<ApiError> read_error(const boost::system::error_code& ec, size_t header_limit) {
  namespace bhttp = boost::beast::http;
  const boost::system::error_code beast_kind = bhttp::error::header_limit;
  if (ec.category() != beast_kind.category() || ec == bhttp::error::end_of_stream)
    return std::nullopt;  // a socket error, or EOF before any byte: nobody to answer
  if (ec == bhttp::error::header_limit)
    return ApiError{
        ErrorKind::HeadersTooLarge,
        "the request header is over the limit of " + std::to_string(header_limit) + " bytes", ""};
  if (ec == bhttp::error::partial_message || ec == bhttp::error::short_read)
    return bad_request("malformed request: the client closed its side mid-request");
  return bad_request("malformed request: " + ec.message());
}

std::optional<ApiError> check_json_body(std::string_view body) {
  const size_t nul = body.find('\0');
  if (nul == std::string_view::npos) return std::nullopt;
  return bad_request("the request body has a NUL byte at offset " + std::to_string(nul) +
                     "; JSON text cannot contain one");
}

size_t leading_empty_lines(std::string_view buffered) {
  const size_t n = buffered.find_first_not_of("\r\n");
  return n == std::string_view::npos ? buffered.size() : n;
}

}  // namespace troupe::net::http

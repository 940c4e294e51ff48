// API errors as values: what went wrong (an ErrorKind), the message a client reads and
// the request field at fault. The HTTP status and the OpenAI error type of each kind are
// decided in ONE place (errors.cpp), so every route answers a given mistake the same way.
//
// Body, as OpenAI and vLLM send it:
//   {"error": {"message": "...", "type": "invalid_request_error", "param": "max_tokens" | null,
//              "code": "model_not_found" | null}}
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace troupe::net::openai {

enum class ErrorKind {
  InvalidRequest,    // 400: malformed JSON, wrong types, out-of-range values
  ContextLength,     // 400: the prompt (plus max_tokens) does not fit the context
  Unauthorized,      // 401: missing or wrong API key
  ModelNotFound,     // 404: "model" names a model this server does not serve
  NotFound,          // 404: no such route
  MethodNotAllowed,  // 405
  RequestTimeout,    // 408: the header or body did not arrive in time
  PayloadTooLarge,   // 413: the body is over the size limit
  HeadersTooLarge,   // 431: the request header is over the size limit
  InsufficientStorage,  // 507: KV save: the pinned KV budget (kv-pinned-bytes) is full or off
  Unavailable,       // 503: not ready yet, or shutting down
  Internal,          // 500: the engine failed the request
};

struct ApiError {
  ErrorKind kind = ErrorKind::InvalidRequest;
  std::string message;
  std::string param;  // the request field at fault; empty -> null

  int status() const;             // the HTTP status
  std::string_view type() const;  // OpenAI's error type
  std::string_view code() const;  // OpenAI's code; empty -> null
  nlohmann::json body() const;    // {"error": {...}}
};

int http_status(ErrorKind kind);
std::string_view error_type(ErrorKind kind);
std::string_view error_code(ErrorKind kind);

// An ApiError thrown inside the protocol layer; public functions catch it and return
// the ApiError as a value.
struct ApiException {
  ApiError error;
};

[[noreturn]] void throw_api_error(ErrorKind kind, std::string message, std::string param = {});

}  // namespace troupe::net::openai

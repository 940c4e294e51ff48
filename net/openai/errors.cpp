#include "net/openai/errors.h"

namespace troupe::net::openai {

int http_status(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::InvalidRequest:
    case ErrorKind::ContextLength:
      return 400;
    case ErrorKind::Unauthorized:
      return 401;
    case ErrorKind::ModelNotFound:
    case ErrorKind::NotFound:
      return 404;
    case ErrorKind::MethodNotAllowed:
      return 405;
    case ErrorKind::RequestTimeout:
      return 408;
    case ErrorKind::PayloadTooLarge:
      return 413;
    case ErrorKind::HeadersTooLarge:
      return 431;
    case ErrorKind::Unavailable:
      return 503;
    case ErrorKind::InsufficientStorage:
      return 507;
    case ErrorKind::Internal:
      return 500;
  }
  return 500;
}

std::string_view error_type(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::Unavailable:
    case ErrorKind::Internal:
      return "server_error";
    default:
      return "invalid_request_error";  // OpenAI uses it for every client mistake
  }
}

std::string_view error_code(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::ContextLength:
      return "context_length_exceeded";
    case ErrorKind::Unauthorized:
      return "invalid_api_key";
    case ErrorKind::ModelNotFound:
      return "model_not_found";
    case ErrorKind::PayloadTooLarge:
      return "request_too_large";
    default:
      return "";
  }
}

int ApiError::status() const {
  return http_status(kind);
}
std::string_view ApiError::type() const {
  return error_type(kind);
}
std::string_view ApiError::code() const {
  return error_code(kind);
}

nlohmann::json ApiError::body() const {
  nlohmann::json err = {
      {"message", message}, {"type", type()}, {"param", nullptr}, {"code", nullptr}};
  if (!param.empty()) err["param"] = param;
  if (!code().empty()) err["code"] = code();
  return {{"error", std::move(err)}};
}

void throw_api_error(ErrorKind kind, std::string message, std::string param) {
  throw ApiException{ApiError{kind, std::move(message), std::move(param)}};
}

}  // namespace troupe::net::openai

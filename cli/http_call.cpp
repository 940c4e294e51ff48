#include "cli/http_call.h"

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>

namespace troupe::cli {

namespace beast = boost::beast;
using tcp = boost::asio::ip::tcp;

HttpAnswer http_call(const std::string& host, int64_t port, const std::string& method,
                     const std::string& target, const std::string& body,
                     const std::string& api_key) {
  try {
    boost::asio::io_context io;
    beast::tcp_stream stream(io);
    stream.expires_after(std::chrono::seconds(10));
    stream.connect(tcp::resolver(io).resolve(host, std::to_string(port)));
    beast::http::request<beast::http::string_body> req{beast::http::string_to_verb(method), target, 11};
    req.set(beast::http::field::host, host);
    if (!api_key.empty()) req.set(beast::http::field::authorization, "Bearer " + api_key);
    if (!body.empty()) {
      req.set(beast::http::field::content_type, "application/json");
      req.body() = body;
    }
    req.prepare_payload();
    beast::http::write(stream, req);
    beast::flat_buffer buf;
    beast::http::response<beast::http::string_body> res;
    beast::http::read(stream, buf, res);
    return {static_cast<int>(res.result_int()), res.body()};
  } catch (const std::exception& e) {
    return {0, e.what()};
  }
}

}  // namespace troupe::cli

// A small client of troupe's TCP API (docs/serve.md, "TCP API"): submits one prompt,
// prints the streamed text as it arrives, then the finish reason and usage.
//
//   troupe serve &                                   # TCP API on 127.0.0.1:8001
//   tcp_client "Once upon a time" --max-tokens 32 [--host H --port P --temperature T]
//
// Frames are a 4-byte big-endian length plus a msgpack map (net/tcp/frame.h).
#include <boost/asio.hpp>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>

#include "net/tcp/frame.h"

namespace {

namespace asio = boost::asio;
using asio::ip::tcp;
using nlohmann::json;

json read_message(tcp::socket& socket) {
  std::array<unsigned char, troupe::net::tcp::kFrameHeaderBytes> header{};
  asio::read(socket, asio::buffer(header));
  std::string payload(troupe::net::tcp::frame_length(header.data()), '\0');
  asio::read(socket, asio::buffer(payload));
  troupe::net::tcp::FrameDecode d = troupe::net::tcp::decode_payload(payload);
  if (!d.message) throw std::runtime_error(d.error);
  return *d.message;
}

struct Options {
  std::string host = "127.0.0.1";
  std::string port = "8001";
  json submit = {{"type", "submit"}, {"id", 1}, {"max_tokens", 32}};
};

Options parse_args(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has_value = i + 1 < argc;
    if (a == "--host" && has_value) o.host = argv[++i];
    else if (a == "--port" && has_value) o.port = argv[++i];
    else if (a == "--max-tokens" && has_value) o.submit["max_tokens"] = std::atoi(argv[++i]);
    else if (a == "--temperature" && has_value) o.submit["temperature"] = std::atof(argv[++i]);
    else if (a == "--api-key" && has_value) o.submit["api_key"] = argv[++i];
    else o.submit["prompt"] = a;
  }
  if (!o.submit.contains("prompt")) o.submit["prompt"] = "Once upon a time";
  return o;
}

}  // namespace

int main(int argc, char** argv) try {
  const Options o = parse_args(argc, argv);
  asio::io_context ioc;
  tcp::socket socket(ioc);
  asio::connect(socket, tcp::resolver(ioc).resolve(o.host, o.port));
  asio::write(socket, asio::buffer(troupe::net::tcp::encode_frame(o.submit)));
  for (;;) {
    const json m = read_message(socket);
    if (m["type"] == "tokens") {
      std::cout << m["text"].get<std::string>() << std::flush;
    } else if (m["type"] == "done") {
      std::cout << "\n[finish_reason: " << m["finish_reason"].get<std::string>()
                << ", usage: " << m["usage"].dump() << "]\n";
      return 0;
    } else {
      std::cerr << "error: " << m.value("message", m.dump()) << "\n";
      return 1;
    }
  }
} catch (const std::exception& e) {
  std::cerr << "tcp_client: " << e.what() << "\n";
  return 1;
}

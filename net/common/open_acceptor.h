// Opening a listening socket (used by Listener, listener.h): resolve, open, reuse the
// address, bind, listen; a failure is a troupe::Error naming host:port and why.
// Returns the bound port (the OS picks one for port 0).
#pragma once

#include <boost/asio.hpp>
#include <cstdint>
#include <string>

#include "kernels/check.h"

namespace troupe::net {

inline uint16_t open_acceptor(boost::asio::io_context& ioc,
                              boost::asio::ip::tcp::acceptor& acceptor, const std::string& host,
                              uint16_t port, const char* what) {
  namespace asio = boost::asio;
  boost::system::error_code ec;
  asio::ip::tcp::resolver resolver(ioc);
  const std::string where = std::string(what) + " " + host + ":" + std::to_string(port);
  auto results = resolver.resolve(host, std::to_string(port), ec);
  if (ec || results.empty()) TROUPE_FAIL("cannot resolve " << where << ": " << ec.message());
  const asio::ip::tcp::endpoint ep = *results.begin();
  acceptor.open(ep.protocol(), ec);
  if (!ec) acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) acceptor.bind(ep, ec);
  if (!ec) acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) TROUPE_FAIL("cannot listen on " << where << ": " << ec.message());
  return acceptor.local_endpoint().port();
}

}  // namespace troupe::net

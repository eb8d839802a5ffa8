#include "listener.h"

#include <fcntl.h>
#include <fmt/format.h>

#include <algorithm>

#include "ringmaster/status.h"

namespace ringmaster::agent {

void open_listener(boost::asio::ip::tcp::acceptor& acceptor, const std::string& listen, const char* option) {
  const auto colon = listen.rfind(':');
  if (colon == std::string::npos) {
    throw Error(ErrorCategory::config, fmt::format("{} {}: expected ADDR:PORT", option, listen));
  }
  std::string host = listen.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  const std::string port_text = listen.substr(colon + 1);
  if (port_text.empty() || port_text.size() > 5 ||
      !std::all_of(port_text.begin(), port_text.end(), [](char c) { return c >= '0' && c <= '9'; }) ||
      std::stoi(port_text) > 65535) {
    throw Error(ErrorCategory::config, fmt::format("{} {}: bad port", option, listen));
  }
  boost::system::error_code ec;
  const auto address = boost::asio::ip::make_address(host, ec);
  if (ec) throw Error(ErrorCategory::config, fmt::format("{} {}: {} is not an IP address", option, listen, host));
  const boost::asio::ip::tcp::endpoint endpoint(address, static_cast<std::uint16_t>(std::stoi(port_text)));
  acceptor.open(endpoint.protocol(), ec);
  if (!ec) close_on_exec(acceptor.native_handle());
  if (!ec) acceptor.set_option(boost::asio::ip::tcp::acceptor::reuse_address(true), ec);
  if (!ec) acceptor.bind(endpoint, ec);
  if (!ec) acceptor.listen(boost::asio::socket_base::max_listen_connections, ec);
  if (ec)
    throw Error(ErrorCategory::network, fmt::format("cannot listen on {} ({}): {}", listen, option, ec.message()));
}

void close_on_exec(int fd) {
  const int flags = ::fcntl(fd, F_GETFD);
  if (flags >= 0) ::fcntl(fd, F_SETFD, flags | FD_CLOEXEC);
}

}  // namespace ringmaster::agent

// Opens an agent's listening socket from a command-line ADDR:PORT (the
// control port's --listen, the metrics port's --metrics): one parser and
// one set of errors for both.
#pragma once

// Boost 1.74's awaitable.hpp uses std::exchange without including <utility>.
#include <utility>

#include <boost/asio/ip/tcp.hpp>

#include <string>

namespace ringmaster::agent {

// Binds and listens `acceptor` on LISTEN ("10.0.0.5:29600", "[::1]:0";
// port 0 picks one). Throws Error(config) naming OPTION for a malformed
// value or a host that is not an IP address, Error(network) when the port
// cannot be bound.
void open_listener(boost::asio::ip::tcp::acceptor& acceptor, const std::string& listen, const char* option);

// Marks a descriptor Asio opened close-on-exec (Asio opens without
// O_CLOEXEC). The spawn paths close everything above stderr anyway; this
// keeps a program another library starts from inheriting it too.
void close_on_exec(int fd);

}  // namespace ringmaster::agent

// The agent's plain-HTTP port (--metrics ADDR:PORT): read-only and without
// authentication, like node_exporter's, on a bind of its own. GET or HEAD
//   /metrics   Prometheus text (format 0.0.4)
//   /healthz   200 while the agent's event loop answers
//   /readyz    200 once it listens for clients with its inventory taken,
//              503 while it cannot accept (out of descriptors) or stops
// and nothing else: the health answers carry one word, never state.
// HTTP parsing and framing are Boost.Beast's; each request must arrive
// whole within 5 s of the previous answer (or of the connection), and at
// most 64 connections are kept, the oldest giving way to a new one.
#pragma once

// Boost 1.74's awaitable.hpp uses std::exchange without including <utility>.
#include <utility>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/tcp_stream.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <string>

namespace ringmaster::agent {

struct HttpAnswer {
  unsigned status = 200;
  std::string content_type;
  std::string body;
  bool allow_get_head = false;  // a 405 names the methods it takes
};

class HttpEndpoints {
 public:
  struct Sources {
    std::function<std::string()> metrics;  // the exposition text
    std::function<bool()> ready;           // what /readyz reports
  };

  // Binds ADDR:PORT (port 0 picks one). Throws Error(config) for an
  // address that is not an IP address, Error(network) when it cannot bind.
  HttpEndpoints(boost::asio::io_context& io, const std::string& listen, Sources sources);

  std::uint16_t port() const noexcept;
  void start();  // serves on io until close()
  void close();

  // What a request for METHOD TARGET gets (HEAD: the same without body).
  HttpAnswer answer(std::string_view method, std::string_view target) const;

  static constexpr std::size_t kMaxConnections = 64;
  static constexpr std::chrono::seconds kRequestDeadline{5};

 private:
  boost::asio::awaitable<void> accept_loop();
  boost::asio::awaitable<void> serve(std::shared_ptr<boost::beast::tcp_stream> stream);

  boost::asio::io_context& io_;
  boost::asio::ip::tcp::acceptor acceptor_;
  Sources sources_;
  // Connections in the order they came: at the cap the oldest gives way.
  std::list<std::shared_ptr<boost::beast::tcp_stream>> connections_;
};

}  // namespace ringmaster::agent

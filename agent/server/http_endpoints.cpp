// The agent's /metrics, /healthz and /readyz over Boost.Beast.
#include "http_endpoints.h"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>

#include "listener.h"

namespace ringmaster::agent {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using asio::awaitable;
using asio::use_awaitable;
using asio::ip::tcp;

namespace {

constexpr std::uint32_t kMaxHeaderBytes = 8192;  // a scrape's request is a few hundred bytes

}  // namespace

HttpEndpoints::HttpEndpoints(asio::io_context& io, const std::string& listen, Sources sources)
    : io_(io), acceptor_(io), sources_(std::move(sources)) {
  open_listener(acceptor_, listen, "--metrics");
}

std::uint16_t HttpEndpoints::port() const noexcept {
  boost::system::error_code ec;
  return acceptor_.is_open() ? acceptor_.local_endpoint(ec).port() : 0;
}

void HttpEndpoints::start() {
  asio::co_spawn(io_, accept_loop(), asio::detached);
}

void HttpEndpoints::close() {
  boost::system::error_code ec;
  acceptor_.close(ec);
  for (const auto& c : connections_)
    c->socket().close(ec);
}

HttpAnswer HttpEndpoints::answer(std::string_view method, std::string_view target) const {
  const std::string_view path = target.substr(0, target.find('?'));
  const bool known = path == "/metrics" || path == "/healthz" || path == "/readyz";
  if (!known) {
    return {404, "text/plain; charset=utf-8", "not found: this port serves /metrics, /healthz and /readyz\n"};
  }
  if (method != "GET" && method != "HEAD") {
    return {405, "text/plain; charset=utf-8", "only GET and HEAD\n", true};
  }
  if (path == "/metrics") return {200, "text/plain; version=0.0.4; charset=utf-8", sources_.metrics()};
  if (path == "/healthz") return {200, "text/plain; charset=utf-8", "ok\n"};
  return sources_.ready() ? HttpAnswer{200, "text/plain; charset=utf-8", "ready\n"}
                          : HttpAnswer{503, "text/plain; charset=utf-8", "not ready\n"};
}

awaitable<void> HttpEndpoints::accept_loop() {
  for (;;) {
    boost::system::error_code ec;
    tcp::socket socket = co_await acceptor_.async_accept(asio::redirect_error(use_awaitable, ec));
    if (ec) {
      if (!acceptor_.is_open()) co_return;
      asio::steady_timer pause(io_, std::chrono::milliseconds(100));  // out of descriptors: no spinning
      co_await pause.async_wait(asio::redirect_error(use_awaitable, ec));
      continue;
    }
    close_on_exec(socket.native_handle());
    if (connections_.size() >= kMaxConnections) {
      connections_.front()->socket().close(ec);
      connections_.pop_front();
    }
    auto stream = std::make_shared<beast::tcp_stream>(std::move(socket));
    connections_.push_back(stream);
    asio::co_spawn(io_, serve(std::move(stream)), asio::detached);
  }
}

// Requests one after another on a connection (Prometheus keeps its
// connections), each read whole within the deadline, answered in order.
awaitable<void> HttpEndpoints::serve(std::shared_ptr<beast::tcp_stream> stream) {
  struct Forget {
    HttpEndpoints& endpoints;
    const std::shared_ptr<beast::tcp_stream>& stream;
    ~Forget() { endpoints.connections_.remove(stream); }
  } forget{*this, stream};
  beast::flat_buffer buffer(kMaxHeaderBytes);
  for (;;) {
    http::request_parser<http::empty_body> parser;
    parser.header_limit(kMaxHeaderBytes);
    parser.body_limit(0);
    boost::system::error_code ec;
    stream->expires_after(kRequestDeadline);
    co_await http::async_read(*stream, buffer, parser, asio::redirect_error(use_awaitable, ec));
    if (ec) break;  // closed, too slow, too large or not HTTP: the connection ends
    const auto& request = parser.get();
    const HttpAnswer a = answer(std::string_view(request.method_string().data(), request.method_string().size()),
                                std::string_view(request.target().data(), request.target().size()));
    const bool head = request.method() == http::verb::head;
    http::response<http::string_body> response{static_cast<http::status>(a.status), request.version()};
    response.set(http::field::server, "ringmaster-agent");
    response.set(http::field::content_type, a.content_type);
    if (a.allow_get_head) response.set(http::field::allow, "GET, HEAD");
    response.keep_alive(request.keep_alive());
    response.content_length(a.body.size());
    if (!head) response.body() = a.body;
    stream->expires_after(kRequestDeadline);
    http::response_serializer<http::string_body> serializer(response);
    if (head) {
      co_await http::async_write_header(*stream, serializer, asio::redirect_error(use_awaitable, ec));
    } else {
      co_await http::async_write(*stream, serializer, asio::redirect_error(use_awaitable, ec));
    }
    if (ec || !response.keep_alive()) break;
  }
  boost::system::error_code ignored;
  stream->socket().shutdown(tcp::socket::shutdown_both, ignored);
}

}  // namespace ringmaster::agent

// AgentClient: one Asio thread per client, coroutines for reading and the
// heartbeat, a write queue drained on the same thread.
// Boost 1.74's awaitable.hpp uses std::exchange without including <utility>.
#include <utility>

#include <fmt/format.h>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/connect.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

#include <atomic>
#include <deque>
#include <map>
#include <mutex>
#include <thread>

#include "ringmaster/agent/client.h"
#include "ringmaster/status.h"

namespace ringmaster::agent {

namespace asio = boost::asio;
using asio::awaitable;
using asio::use_awaitable;
using asio::ip::tcp;
using nlohmann::json;

struct AgentClient::Impl : std::enable_shared_from_this<AgentClient::Impl> {
  asio::io_context io;
  tcp::socket socket{io};
  std::unique_ptr<asio::ssl::context> tls_context;
  std::unique_ptr<asio::ssl::stream<tcp::socket&>> tls;  // set when ClientOptions::tls
  asio::steady_timer heartbeat_timer{io};
  std::thread thread;
  ClientOptions options;
  MessageHandler on_message;
  CloseHandler on_close;
  json hello;
  std::string address;

  std::mutex mutex;  // pending, next_id, closed_reason
  std::map<long long, std::promise<json>> pending;
  long long next_id = 1;
  std::atomic<bool> open{false};
  std::string closed_reason;

  std::deque<std::string> writes;  // I/O thread only
  bool writing = false;
  std::atomic<long long> last_heard_us{0};
  std::atomic<long long> rtt_us{0};

  // I/O thread.
  void write(std::string frame) {
    writes.push_back(std::move(frame));
    if (!writing) write_next();
  }
  void write_next() {
    if (writes.empty() || !socket.is_open()) {
      writing = false;
      return;
    }
    writing = true;
    auto done = [self = shared_from_this()](boost::system::error_code ec, std::size_t) {
      self->writes.pop_front();
      if (ec) {
        self->shut("cannot write to the agent: " + ec.message());
        return;
      }
      self->write_next();
    };
    if (tls) {
      asio::async_write(*tls, asio::buffer(writes.front()), std::move(done));
    } else {
      asio::async_write(socket, asio::buffer(writes.front()), std::move(done));
    }
  }

  // Any thread.
  void post_frame(std::string frame) {
    asio::post(io, [self = shared_from_this(), f = std::move(frame)]() mutable { self->write(std::move(f)); });
  }

  awaitable<json> read_message() {
    unsigned char header[4];
    if (tls) {
      co_await asio::async_read(*tls, asio::buffer(header), use_awaitable);
    } else {
      co_await asio::async_read(socket, asio::buffer(header), use_awaitable);
    }
    const std::uint32_t n = frame_length(header);
    if (n > kMaxFrameBytes) throw Error(ErrorCategory::protocol, fmt::format("agent sent a frame of {} bytes", n));
    std::string body(n, '\0');
    if (tls) {
      co_await asio::async_read(*tls, asio::buffer(body), use_awaitable);
    } else {
      co_await asio::async_read(socket, asio::buffer(body), use_awaitable);
    }
    FrameDecoder d;
    d.feed(reinterpret_cast<const char*>(header), 4);
    d.feed(body.data(), body.size());
    auto m = d.next();
    last_heard_us = steady_us();
    co_return std::move(*m);
  }

  void dispatch(json m) {
    const auto re = m.find("re");
    if (re != m.end() && re->is_number_integer()) {
      std::promise<json> p;
      bool found = false;
      {
        std::lock_guard lock(mutex);
        auto it = pending.find(re->get<long long>());
        if (it != pending.end()) {
          p = std::move(it->second);
          pending.erase(it);
          found = true;
        }
      }
      if (found) {
        if (m.value("type", "") == "reply" && m.contains("ping_us"))
          rtt_us = steady_us() - m["ping_us"].get<long long>();
        p.set_value(std::move(m));
        return;
      }
    }
    if (on_message) on_message(m);
  }

  awaitable<void> read_loop(std::shared_ptr<Impl> self) {
    try {
      for (;;)
        dispatch(co_await read_message());
    } catch (const boost::system::system_error& e) {
      shut(e.code() == asio::error::eof ? "the agent closed the connection" : "connection lost: " + e.code().message());
    } catch (const std::exception& e) {
      shut(std::string("bad message from the agent: ") + e.what());
    }
    (void)self;
  }

  awaitable<void> heartbeat_loop(std::shared_ptr<Impl> self) {
    for (;;) {
      heartbeat_timer.expires_after(options.heartbeat);
      boost::system::error_code ec;
      co_await heartbeat_timer.async_wait(asio::redirect_error(use_awaitable, ec));
      if (ec || !socket.is_open()) co_return;
      if (steady_us() - last_heard_us > options.silence_limit.count() * 1000) {
        shut(fmt::format("agent {} silent for {} ms", address, options.silence_limit.count()));
        co_return;
      }
      json ping = {{"type", "ping"}, {"v", kProtocolVersion}, {"ping_us", steady_us()}};
      auto future = self->send(std::move(ping), /*post=*/false);
      (void)future;  // the reply updates rtt_us in dispatch
    }
  }

  std::future<json> send(json message, bool post = true) {
    std::promise<json> p;
    auto future = p.get_future();
    long long id = 0;
    {
      std::lock_guard lock(mutex);
      if (!open) {
        p.set_value(json{{"type", "error"}, {"message", "not connected: " + closed_reason}});
        return future;
      }
      id = next_id++;
      pending.emplace(id, std::move(p));
    }
    message["id"] = id;
    message["v"] = kProtocolVersion;
    std::string frame = encode_frame(message);
    if (post) {
      post_frame(std::move(frame));
    } else {
      write(std::move(frame));
    }
    return future;
  }

  // I/O thread (or before the thread starts).
  void shut(const std::string& why) {
    std::map<long long, std::promise<json>> failed;
    {
      std::lock_guard lock(mutex);
      if (!open && !closed_reason.empty()) return;
      open = false;
      closed_reason = why;
      failed.swap(pending);
    }
    boost::system::error_code ec;
    socket.shutdown(tcp::socket::shutdown_both, ec);
    socket.close(ec);
    heartbeat_timer.cancel();
    for (auto& [id, p] : failed)
      p.set_value(json{{"type", "error"}, {"re", id}, {"message", why}});
    if (on_close) on_close(why);
  }
};

AgentClient::AgentClient(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}

AgentClient::~AgentClient() {
  close();
}

void AgentClient::close() {
  if (!impl_) return;
  asio::post(impl_->io, [impl = impl_] { impl->shut("closed by this client"); });
  if (impl_->thread.joinable()) {
    if (impl_->thread.get_id() == std::this_thread::get_id()) {
      impl_->thread.detach();
    } else {
      impl_->thread.join();
    }
  }
}

// The client's TLS: 1.3 only, its own certificate where given, and the
// agent's certificate checked against --tls-ca for `verified_name` (or
// not checked at all with --tls-insecure).
static std::unique_ptr<asio::ssl::context> tls_client_context(const ClientOptions& options,
                                                              const std::string& verified_name) {
  auto context = std::make_unique<asio::ssl::context>(asio::ssl::context::tls_client);
  // TLS 1.3 only, as the agent: the proof's channel binding (an
  // exporter) is sound there; TLS 1.2 without Extended Master
  // Secret would let a man in the middle share it.
  if (SSL_CTX_set_min_proto_version(context->native_handle(), TLS1_3_VERSION) != 1) {
    throw Error(ErrorCategory::internal, "OpenSSL refused TLS 1.3 as the least version");
  }
  if (!options.tls_cert_file.empty()) {
    boost::system::error_code ec;
    context->use_certificate_chain_file(options.tls_cert_file, ec);
    if (!ec) context->use_private_key_file(options.tls_key_file, asio::ssl::context::pem, ec);
    if (ec) {
      throw Error(ErrorCategory::config, fmt::format("--tls-cert {} / --tls-key {}: {}", options.tls_cert_file,
                                                     options.tls_key_file, ec.message()));
    }
  }
  if (!options.tls_ca_file.empty()) {
    boost::system::error_code ec;
    context->load_verify_file(options.tls_ca_file, ec);
    if (ec) {
      throw Error(ErrorCategory::config, fmt::format("--tls-ca {}: {}", options.tls_ca_file, ec.message()));
    }
    context->set_verify_mode(asio::ssl::verify_peer);
    context->set_verify_callback(asio::ssl::host_name_verification(verified_name));
  } else {
    context->set_verify_mode(asio::ssl::verify_none);
  }
  return context;
}

std::unique_ptr<AgentClient> AgentClient::connect(const ClientOptions& options, MessageHandler on_message,
                                                  CloseHandler on_close) {
  auto impl = std::make_shared<Impl>();
  impl->options = options;
  impl->address = fmt::format("{}:{}", options.host, options.port);
  const std::string where = "agent " + impl->address;

  // Handshake on this thread, with a deadline enforced by a timer.
  std::promise<void> ready;
  auto handshake = ready.get_future();
  asio::steady_timer deadline(impl->io);
  deadline.expires_after(options.connect_timeout);
  bool timed_out = false;
  deadline.async_wait([&](boost::system::error_code ec) {
    if (ec) return;
    timed_out = true;
    boost::system::error_code ignore;
    impl->socket.close(ignore);
  });
  asio::co_spawn(
      impl->io,
      [&]() -> awaitable<void> {
        try {
          tcp::resolver resolver(impl->io);
          auto endpoints = co_await resolver.async_resolve(options.host, std::to_string(options.port), use_awaitable);
          co_await asio::async_connect(impl->socket, endpoints, use_awaitable);
          impl->socket.set_option(tcp::no_delay(true));
          if (options.tls) {
            if (options.tls_ca_file.empty() && !options.tls_insecure) {
              throw Error(ErrorCategory::config,
                          fmt::format("TLS to {} without --tls-ca cannot check who answers, and this client's proof "
                                      "would go to whoever does: give the CA that signed the agents' certificates "
                                      "(--tls-ca), or --tls-insecure to accept any certificate",
                                      where));
            }
            const std::string verified_name = options.tls_name.empty() ? options.host : options.tls_name;
            impl->tls_context = tls_client_context(options, verified_name);
            impl->tls = std::make_unique<asio::ssl::stream<tcp::socket&>>(impl->socket, *impl->tls_context);
            SSL_set_tlsext_host_name(impl->tls->native_handle(), verified_name.c_str());
            boost::system::error_code ec;
            co_await impl->tls->async_handshake(asio::ssl::stream_base::client,
                                                asio::redirect_error(use_awaitable, ec));
            if (ec) {
              throw Error(ErrorCategory::network, fmt::format("TLS handshake with {} failed: {}", where, ec.message()));
            }
          }
          json hello = co_await impl->read_message();
          if (hello.value("type", "") != "hello") {
            throw Error(ErrorCategory::protocol, where + " did not start with hello: " + hello.dump());
          }
          impl->hello = hello;
          const std::string auth = hello.value("auth", "none");
          if (auth == "hmac-sha256") {
            // Without a token given, the one an agent of this user on this
            // machine made in the default state directory.
            const std::string token = options.token.empty() ? local_agent_token() : options.token;
            if (token.empty()) {
              throw Error(ErrorCategory::config,
                          where + " requires a token (--token-file; an agent started without one keeps its own in " +
                              token_path(default_state_dir()) + ")");
            }
            // Both sides prove the token, over both nonces and the TLS
            // session: an impostor agent that does not hold it is refused.
            const std::string agent_nonce = hello.value("nonce", "");
            const std::string client_nonce = random_nonce();
            const std::string binding = tls_binding(impl->tls ? impl->tls->native_handle() : nullptr);
            json msg = {{"type", "auth"},
                        {"id", 0},
                        {"v", kProtocolVersion},
                        {"nonce", client_nonce},
                        {"hmac", client_proof(token, agent_nonce, client_nonce, binding)}};
            const std::string frame = encode_frame(msg);
            if (impl->tls) {
              co_await asio::async_write(*impl->tls, asio::buffer(frame), use_awaitable);
            } else {
              co_await asio::async_write(impl->socket, asio::buffer(frame), use_awaitable);
            }
            json reply = co_await impl->read_message();
            if (reply.value("type", "") != "reply" || !reply.value("ok", false)) {
              throw Error(ErrorCategory::config,
                          where + " refused the token: " + reply.value("message", std::string("no reason given")));
            }
            const json proof = reply.value("hmac", json());
            if (!proof.is_string() || !equal_constant_time(proof.get<std::string>(),
                                                           agent_proof(token, agent_nonce, client_nonce, binding))) {
              throw Error(ErrorCategory::config,
                          where + " did not prove it holds the token (it may not be the agent you meant to reach)");
            }
          }
          ready.set_value();
        } catch (const boost::system::system_error& e) {
          ready.set_exception(std::make_exception_ptr(
              Error(timed_out ? ErrorCategory::timeout : ErrorCategory::network,
                    timed_out ? fmt::format("{}: no hello within {} ms{}", where, options.connect_timeout.count(),
                                            options.tls ? ""
                                                        : " (an agent serving TLS says nothing before the TLS "
                                                          "handshake: connect with TLS)")
                              : fmt::format("cannot connect to {}: {}", where, e.code().message()))));
        } catch (...) {
          ready.set_exception(std::current_exception());
        }
        deadline.cancel();
      },
      asio::detached);
  impl->io.run();
  impl->io.restart();
  handshake.get();  // throws what the handshake threw

  impl->on_message = std::move(on_message);
  impl->on_close = std::move(on_close);
  impl->open = true;
  impl->last_heard_us = steady_us();
  asio::co_spawn(impl->io, impl->read_loop(impl), asio::detached);
  asio::co_spawn(impl->io, impl->heartbeat_loop(impl), asio::detached);
  impl->thread = std::thread([impl] { impl->io.run(); });
  return std::unique_ptr<AgentClient>(new AgentClient(impl));
}

std::future<json> AgentClient::request(json message) {
  return impl_->send(std::move(message));
}

json AgentClient::call(json message, std::chrono::milliseconds timeout) {
  const std::string type = message.value("type", "?");
  auto future = request(std::move(message));
  if (future.wait_for(timeout) != std::future_status::ready) {
    throw Error(ErrorCategory::timeout,
                fmt::format("agent {} did not answer {} within {} ms", impl_->address, type, timeout.count()));
  }
  json reply = future.get();
  if (reply.value("type", "") == "error") {
    throw Error(ErrorCategory::peer,
                fmt::format("agent {}: {}", impl_->address, reply.value("message", std::string("error"))));
  }
  return reply;
}

const json& AgentClient::hello() const noexcept {
  return impl_->hello;
}
std::string AgentClient::address() const {
  return impl_->address;
}
bool AgentClient::connected() const noexcept {
  return impl_->open;
}
std::chrono::microseconds AgentClient::round_trip() const noexcept {
  return std::chrono::microseconds(impl_->rtt_us.load());
}

}  // namespace ringmaster::agent

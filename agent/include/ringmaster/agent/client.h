// A client of one agent: connect, authenticate, send requests, receive
// replies, events and heartbeats. Its socket runs on its own Asio thread;
// handlers are called on that thread and must not block (the console
// forwards them to the GUI thread as queued signals).
#pragma once

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <future>
#include <memory>
#include <string>

#include "ringmaster/agent/protocol.h"

namespace ringmaster::agent {

struct ClientOptions {
  std::string host = "127.0.0.1";
  std::uint16_t port = kDefaultPort;
  std::string token;  // empty: local_agent_token() (an agent of this user on this machine)
  bool tls = false;   // the agent serves TLS (--tls-cert)
  // Verify the agent's certificate and host name against this CA (PEM).
  // Empty: the connection is refused before anything is sent, unless
  // tls_insecure says to encrypt without verifying who answers.
  std::string tls_ca_file;
  bool tls_insecure = false;  // --tls-insecure: TLS with no CA, any certificate taken
  // The name the agent's certificate must carry when `host` is one of the
  // addresses a name resolved to (a headless Service); empty: `host`.
  std::string tls_name;
  // This client's certificate and key (PEM), for an agent that asks for
  // one (--tls-client-ca); empty: none.
  std::string tls_cert_file, tls_key_file;
  std::chrono::milliseconds connect_timeout{5000};
  std::chrono::milliseconds heartbeat{1000};      // a ping this often
  std::chrono::milliseconds silence_limit{3000};  // nothing heard this long: the agent is gone
};

class AgentClient {
 public:
  using MessageHandler = std::function<void(const nlohmann::json&)>;
  using CloseHandler = std::function<void(const std::string& why)>;

  // Connects, reads `hello` and authenticates. Throws Error naming the
  // agent's address: network (cannot connect), timeout, protocol, or
  // config (the agent wants a token and none was given, or refused it).
  // `on_message` sees every message that is not a reply (events,
  // heartbeats); `on_close` runs once when the connection ends.
  static std::unique_ptr<AgentClient> connect(const ClientOptions& options, MessageHandler on_message = {},
                                              CloseHandler on_close = {});
  ~AgentClient();
  AgentClient(const AgentClient&) = delete;
  AgentClient& operator=(const AgentClient&) = delete;

  // Sends `message` with the next id and v; the future holds the reply, or
  // an {"type":"error"} object when the agent refused it or the connection
  // ended first.
  std::future<nlohmann::json> request(nlohmann::json message);
  // request() and wait; throws Error with the agent's message on an error
  // reply, Error(timeout) after `timeout`.
  nlohmann::json call(nlohmann::json message, std::chrono::milliseconds timeout = std::chrono::seconds(10));

  const nlohmann::json& hello() const noexcept;
  std::string address() const;
  bool connected() const noexcept;
  // Round-trip time of the last answered ping; 0 before the first.
  std::chrono::microseconds round_trip() const noexcept;
  void close();

  struct Impl;

 private:
  explicit AgentClient(std::shared_ptr<Impl> impl);
  std::shared_ptr<Impl> impl_;
};

}  // namespace ringmaster::agent

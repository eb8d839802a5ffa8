// The store client used inside the engine: one TCP connection, blocking
// calls with deadlines, torch's TCPStore protocol.
//
// Failures throw Error: network (with the address and errno text), timeout,
// or protocol. The bootstrap catches them and adds stage, rank and hint.
// Not thread-safe: one thread per Client.
#pragma once

#include <chrono>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "net/socket.h"
#include "store/store.h"

namespace ringmaster::store {

class Client final : public Store {
 public:
  Client(net::Socket socket, std::chrono::milliseconds timeout);

  // VALIDATE, then a PING that must echo before the deadline: a listener
  // that accepts but never serves fails here, not later.
  void handshake(net::Clock::time_point deadline) override;
  std::string handshake_detail() const override { return "VALIDATE + PING answered"; }

  void set(const std::string& key, const std::string& value) override;
  std::string get(const std::string& key) override;
  // GET without the WAIT before it: one round trip, for keys known to
  // exist. A missing key makes the server close the connection (torch's
  // protocol has no "not found" answer).
  std::string get_existing(const std::string& key) override;
  std::vector<std::string> get_many(const std::vector<std::string>& keys) override { return multi_get(keys); }
  std::string compare_set(const std::string& key, const std::string& expected, const std::string& desired) override;
  std::int64_t add(const std::string& key, std::int64_t delta) override;
  bool check(const std::vector<std::string>& keys) override;
  // Returns false on timeout (after cancelling the wait on the server).
  bool wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override;
  std::int64_t num_keys();
  bool delete_key(const std::string& key);
  void append(const std::string& key, const std::string& value) override;
  std::vector<std::string> multi_get(const std::vector<std::string>& keys);
  void multi_set(const std::vector<std::string>& keys, const std::vector<std::string>& values);
  std::uint32_t ping(std::uint32_t nonce, net::Clock::time_point deadline);

  const net::Socket& socket() const noexcept { return socket_; }
  std::chrono::milliseconds timeout() const noexcept { return timeout_; }

 private:
  void send(const std::string& bytes, net::Clock::time_point deadline);
  void recv(void* data, std::size_t size, net::Clock::time_point deadline, const char* what);
  template <class T>
  T recv_value(net::Clock::time_point deadline, const char* what);
  std::string recv_string(net::Clock::time_point deadline, const char* what);
  net::Clock::time_point deadline() const { return net::Clock::now() + timeout_; }

  net::Socket socket_;
  std::chrono::milliseconds timeout_;
  std::string peer_;
};

}  // namespace ringmaster::store

// A key-value store wire-compatible with PyTorch's c10d TCPStore.
//
// TcpStoreServer serves torch clients and ours; TcpStoreClient talks to any
// TCPStore, ours or a real torchrun's MASTER_PORT. The server runs on its
// own thread and is safe to use from any thread. A client is one
// connection: use it from one thread at a time.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace ringmaster {

struct StoreServerOptions {
  // Address to listen on; empty listens on every IPv6 and IPv4 address.
  std::string host;
  // 0 picks a free port.
  std::uint16_t port = 29500;
  // Clients expected at once; sizes the listen backlog and warns when the
  // kernel's somaxconn would cap it.
  int expected_clients = 0;
  // Caps a test may raise. Connections at once: one more is closed at
  // accept (a rank's init then retries until its timeout).
  std::size_t max_connections = 16384;
  // A connection that has not sent VALIDATE within this is closed; once
  // validated a connection may stay idle for ever (torch keeps them for
  // hours).
  std::chrono::milliseconds validate_timeout{10000};
  // Keys (their bytes) one connection may have parked in WAIT at once.
  std::size_t max_waiting_key_bytes = 16u << 20;
  // Replies one connection may have waiting to be sent (a MULTI_GET's
  // whole, pipelined GETs, WAIT wake-ups): a client that asks and does not
  // read is disconnected at this cap.
  std::size_t max_reply_bytes = 64u << 20;
  // Replies waiting to be sent over all connections at once; the
  // connection whose reply would pass it is disconnected.
  std::size_t max_queued_reply_bytes = 512u << 20;
};

class TcpStoreServer {
 public:
  // Binds and starts serving; throws Error(network) when it cannot listen.
  explicit TcpStoreServer(const StoreServerOptions& options);
  ~TcpStoreServer();
  TcpStoreServer(const TcpStoreServer&) = delete;
  TcpStoreServer& operator=(const TcpStoreServer&) = delete;

  std::uint16_t port() const noexcept;
  std::size_t num_keys() const;
  std::size_t num_connections() const;
  // Stops serving and joins the thread; also done by the destructor.
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

class TcpStoreClient {
 public:
  // Resolves host, connects with exponential backoff and jitter until
  // `timeout`, validates the connection and checks it with a PING. Every
  // operation afterwards times out after `timeout` too. Throws Error with
  // the address and errno text on failure.
  TcpStoreClient(const std::string& host, std::uint16_t port, std::chrono::milliseconds timeout);
  ~TcpStoreClient();
  TcpStoreClient(TcpStoreClient&&) noexcept;
  TcpStoreClient& operator=(TcpStoreClient&&) noexcept;

  void set(const std::string& key, const std::string& value);
  // Waits for the key like torch's get(), then returns its value.
  std::string get(const std::string& key);
  std::string compare_set(const std::string& key, const std::string& expected, const std::string& desired);
  std::int64_t add(const std::string& key, std::int64_t delta);
  bool check(const std::vector<std::string>& keys);
  // Throws Error(timeout) when the keys do not all exist within timeout.
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout);
  std::int64_t num_keys();
  bool delete_key(const std::string& key);
  void append(const std::string& key, const std::string& value);
  std::vector<std::string> multi_get(const std::vector<std::string>& keys);
  void multi_set(const std::vector<std::string>& keys, const std::vector<std::string>& values);
  // Round trip of a nonce; returns the time it took.
  std::chrono::microseconds ping();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ringmaster

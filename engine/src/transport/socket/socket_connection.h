// A connection carried by a TCP socket: non-blocking sendmsg/recvmsg.
#pragma once

#include "net/socket.h"
#include "transport/connection.h"

namespace ringmaster::transport {

class SocketConnection final : public Connection {
 public:
  explicit SocketConnection(net::Socket socket) noexcept : socket_(std::move(socket)) {}
  TransportKind kind() const noexcept override { return TransportKind::socket; }
  std::int64_t send_some(const iovec* iov, int count) noexcept override;
  std::int64_t recv_some(const iovec* iov, int count) noexcept override;
  int fd() const noexcept override { return socket_.fd(); }
  bool data_pollable() const noexcept override { return true; }
  void shutdown() noexcept override;

 private:
  net::Socket socket_;
};

}  // namespace ringmaster::transport

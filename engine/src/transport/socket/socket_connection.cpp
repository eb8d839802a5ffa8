#include "transport/socket/socket_connection.h"

#include <sys/socket.h>

#include <cerrno>

namespace ringmaster::transport {

std::string_view name_of(TransportKind kind) noexcept {
  switch (kind) {
    case TransportKind::socket:
      return "SOCKET";
    case TransportKind::shm:
      return "SHM";
    case TransportKind::ofi:
      return "OFI";
  }
  return "?";
}

std::int64_t SocketConnection::send_some(const iovec* iov, int count) noexcept {
  msghdr msg{};
  msg.msg_iov = const_cast<iovec*>(iov);
  msg.msg_iovlen = static_cast<std::size_t>(count);
  const ssize_t w = ::sendmsg(socket_.fd(), &msg, MSG_DONTWAIT | MSG_NOSIGNAL);
  if (w >= 0) return w;
  return errno == EAGAIN || errno == EINTR ? 0 : -errno;
}

std::int64_t SocketConnection::recv_some(const iovec* iov, int count) noexcept {
  msghdr msg{};
  msg.msg_iov = const_cast<iovec*>(iov);
  msg.msg_iovlen = static_cast<std::size_t>(count);
  const ssize_t r = ::recvmsg(socket_.fd(), &msg, MSG_DONTWAIT);
  if (r > 0) return r;
  if (r == 0) return net::kPeerClosed;
  return errno == EAGAIN || errno == EINTR ? 0 : -errno;
}

void SocketConnection::shutdown() noexcept {
  if (socket_.valid()) ::shutdown(socket_.fd(), SHUT_RDWR);
}

}  // namespace ringmaster::transport

#include "transport/socket/socket_connection.h"

#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <new>

#include "base/bytes.h"

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

namespace {

// Up to `limit` bytes of `iov` from byte `skip` on, as a new iovec list.
int window(const iovec* iov, int count, std::size_t skip, std::size_t limit, iovec* out, int max_out) {
  int n = 0;
  for (int i = 0; i < count && limit > 0 && n < max_out; ++i) {
    if (skip >= iov[i].iov_len) {
      skip -= iov[i].iov_len;
      continue;
    }
    const std::size_t len = std::min(iov[i].iov_len - skip, limit);
    out[n++] = {static_cast<char*>(iov[i].iov_base) + skip, len};
    limit -= len;
    skip = 0;
  }
  return n;
}

std::int64_t send_on(int fd, const iovec* iov, int count) noexcept {
  msghdr msg{};
  msg.msg_iov = const_cast<iovec*>(iov);
  msg.msg_iovlen = static_cast<std::size_t>(count);
  const ssize_t w = ::sendmsg(fd, &msg, MSG_DONTWAIT | MSG_NOSIGNAL);
  if (w >= 0) return w;
  return errno == EAGAIN || errno == EINTR ? 0 : -errno;
}

std::int64_t recv_on(int fd, const iovec* iov, int count) noexcept {
  msghdr msg{};
  msg.msg_iov = const_cast<iovec*>(iov);
  msg.msg_iovlen = static_cast<std::size_t>(count);
  const ssize_t r = ::recvmsg(fd, &msg, MSG_DONTWAIT);
  if (r > 0) return r;
  if (r == 0) return net::kPeerClosed;
  return errno == EAGAIN || errno == EINTR ? 0 : -errno;
}

std::size_t total(const iovec* iov, int count) noexcept {
  std::size_t n = 0;
  for (int i = 0; i < count; ++i)
    n += iov[i].iov_len;
  return n;
}

}  // namespace

SocketConnection::SocketConnection(net::Socket socket) {
  sockets_.push_back(std::move(socket));
}

void SocketConnection::add_socket(net::Socket socket) {
  sockets_.push_back(std::move(socket));
}

int SocketConnection::wait_fd(bool sending) const noexcept {
  return sockets_[socket_at(sending ? sent_ : received_)].fd();
}

// With several sockets, each call moves stripe after stripe in order until
// a socket takes less than offered; what it moved is always a prefix of
// the stream, as with one socket.
std::int64_t SocketConnection::move(const iovec* iov, int count, std::uint64_t& position,
                                    std::int64_t (*on)(int, const iovec*, int) noexcept) noexcept {
  if (sockets_.size() == 1) return on(sockets_.front().fd(), iov, count);
  const std::size_t want = total(iov, count);
  std::size_t moved = 0;
  while (moved < want) {
    const std::size_t room = kStripeBytes - static_cast<std::size_t>(position % kStripeBytes);
    iovec part[8];
    const int n = window(iov, count, moved, std::min(room, want - moved), part, 8);
    const std::size_t offered = total(part, n);
    const std::int64_t done = on(sockets_[socket_at(position)].fd(), part, n);
    if (done < 0) return moved > 0 ? static_cast<std::int64_t>(moved) : done;
    position += static_cast<std::uint64_t>(done);
    moved += static_cast<std::size_t>(done);
    if (static_cast<std::size_t>(done) < offered) break;
  }
  return static_cast<std::int64_t>(moved);
}

std::int64_t SocketConnection::send_some(const iovec* iov, int count) noexcept {
  return move(iov, count, sent_, send_on);
}

std::int64_t SocketConnection::recv_some(const iovec* iov, int count) noexcept {
  if (lent_begin_ == lent_end_) return move(iov, count, received_, recv_on);
  // What peek() read and nobody consumed comes first (it never reads past
  // the step it was asked for).
  std::size_t moved = 0;
  for (int i = 0; i < count && lent_begin_ < lent_end_; ++i) {
    const std::size_t n = std::min(iov[i].iov_len, lent_end_ - lent_begin_);
    std::memcpy(iov[i].iov_base, lent_.data() + lent_begin_, n);
    lent_begin_ += n;
    moved += n;
    if (n < iov[i].iov_len) break;
  }
  return static_cast<std::int64_t>(moved);
}

std::size_t SocketConnection::peek(std::size_t wanted, const std::byte** data, const std::byte* toward) noexcept {
  if (lent_begin_ == lent_end_) {
    if (lent_.empty()) {
      try {
        lent_.resize(kLendBytes + kApartSlack);
      } catch (const std::bad_alloc&) {
        return 0;  // recv_some copies instead
      }
    }
    const std::size_t at = offset_apart(lent_.data(), toward);
    iovec into{lent_.data() + at, std::min(wanted, kLendBytes)};
    const std::int64_t n = move(&into, 1, received_, recv_on);
    if (n <= 0) return 0;  // nothing yet, or an error recv_some reports
    lent_begin_ = at;
    lent_end_ = at + static_cast<std::size_t>(n);
  }
  *data = lent_.data() + lent_begin_;
  return lent_end_ - lent_begin_;
}

bool SocketConnection::look_ahead(void* out, std::size_t bytes) noexcept {
  // What peek() reads stays lent until recv_some hands it out.
  const std::byte* data = nullptr;
  if (peek(bytes, &data) < bytes) return false;
  std::memcpy(out, data, bytes);
  return true;
}

std::size_t SocketConnection::pad_before(const void* data, std::size_t bytes, std::size_t header_bytes) const noexcept {
  if (bytes < kPaddedFromBytes) return 0;
  const std::size_t from = reinterpret_cast<std::uintptr_t>(data) % kApartSlack;
  return (from + kApartSlack / 2 + kApartSlack - header_bytes % kApartSlack) % kApartSlack;
}

std::optional<net::TcpSendState> SocketConnection::send_state() const noexcept {
  std::optional<net::TcpSendState> first;
  for (const auto& socket : sockets_) {
    const auto state = net::tcp_send_state(socket.fd());
    if (state && state->stuck()) return state;
    if (!first) first = state;
  }
  return first;
}

void SocketConnection::shutdown() noexcept {
  for (auto& s : sockets_) {
    if (s.valid()) ::shutdown(s.fd(), SHUT_RDWR);
  }
}

std::optional<net::TcpSegments> SocketConnection::tcp_segments() const noexcept {
  std::optional<net::TcpSegments> total;
  for (const auto& s : sockets_) {
    if (const auto one = net::tcp_segments(s.fd())) total = total.value_or(net::TcpSegments{}) += *one;
  }
  return total;
}

}  // namespace ringmaster::transport

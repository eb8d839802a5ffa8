// A connection carried by TCP: non-blocking sendmsg/recvmsg on one socket,
// or on several (RINGMASTER_NSOCKS_PER_CHANNEL) that share the byte stream
// in stripes, as NCCL's socket transport does so that a network that
// limits each flow (5 Gbit/s per flow on EC2 outside a placement group)
// still gives a connection its whole bandwidth.
#pragma once

#include <vector>

#include "net/path_probe.h"
#include "net/socket.h"
#include "transport/connection.h"

namespace ringmaster::transport {

class SocketConnection final : public Connection {
 public:
  // Stripe size with several sockets: the stream's bytes [k*S, (k+1)*S)
  // travel on socket k mod n.
  static constexpr std::size_t kStripeBytes = 128 * 1024;
  static constexpr std::size_t kLendBytes = 256 * 1024;     // the lending buffer
  static constexpr std::size_t kLendFromBytes = 64 * 1024;  // smaller steps: one read with the header

  explicit SocketConnection(net::Socket socket);
  // The connection's next socket, before any data moves. Both ends add
  // theirs in the same order.
  void add_socket(net::Socket socket);
  std::size_t sockets() const noexcept { return sockets_.size(); }

  TransportKind kind() const noexcept override { return TransportKind::socket; }
  std::int64_t send_some(const iovec* iov, int count) noexcept override;
  std::int64_t recv_some(const iovec* iov, int count) noexcept override;
  // Large steps are lent from a small buffer of this connection's: a
  // reduction then reads what the kernel just copied there while it is
  // still in the cache, instead of from a copy in the step's whole-size
  // scratch buffer, which has left it by then.
  std::size_t peek(std::size_t wanted, const std::byte** data, const std::byte* toward = nullptr) noexcept override;
  void consume(std::size_t bytes) noexcept override { lent_begin_ += bytes; }
  bool look_ahead(void* out, std::size_t bytes) noexcept override;
  bool lends(std::size_t step_bytes) const noexcept override { return step_bytes >= kLendFromBytes; }
  // The kernel copies what sendmsg sends into pages of its own, and on
  // loopback those pages are free again by the next step, so a step's
  // data lands at the page offset of its header's size. When the sender's
  // data lies at about that same page offset (as memory fresh from mmap
  // does, 16 bytes in), that copy runs 1.5x slower: its stores and loads
  // alias in their low 12 address bits. Filler after the header moves the
  // data half a page away; from kPaddedFromBytes, where it costs under 7%.
  std::size_t pad_before(const void* data, std::size_t bytes, std::size_t header_bytes) const noexcept override;
  int fd() const noexcept override { return sockets_.front().fd(); }
  std::optional<net::TcpSegments> tcp_segments() const noexcept override;
  int wait_fd(bool sending) const noexcept override;
  bool data_pollable() const noexcept override { return true; }
  std::optional<net::TcpSendState> send_state() const noexcept override;
  void shutdown() noexcept override;

 private:
  std::vector<net::Socket> sockets_;
  std::uint64_t sent_ = 0;       // stream bytes sent (with several sockets)
  std::uint64_t received_ = 0;   // stream bytes received
  std::vector<std::byte> lent_;  // read ahead for peek(); [lent_begin_, lent_end_) not yet consumed
  std::size_t lent_begin_ = 0, lent_end_ = 0;

  // send_some and recv_some: `on` moves bytes on one socket, `position` is
  // the stream position of that direction.
  std::int64_t move(const iovec* iov, int count, std::uint64_t& position,
                    std::int64_t (*on)(int, const iovec*, int) noexcept) noexcept;
  std::size_t socket_at(std::uint64_t position) const noexcept {
    return static_cast<std::size_t>((position / kStripeBytes) % sockets_.size());
  }
};

}  // namespace ringmaster::transport

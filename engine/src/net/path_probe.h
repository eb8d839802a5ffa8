// What a TCP connection that stopped moving says of its path, and a probe
// of the path's packet sizes: for telling a path-MTU black hole (small
// packets pass, full-size ones vanish, no ICMP says why) from a host that
// is gone and from a peer that is merely slow.
#pragma once

#include <chrono>
#include <optional>
#include <string>

#include "net/socket.h"

namespace ringmaster::net {

// The kernel's view of one TCP socket's sending side (TCP_INFO).
struct TcpSendState {
  int unacked = 0;        // segments sent and not acknowledged
  int retransmits = 0;    // retransmissions of the oldest of them so far
  int total_retrans = 0;  // over the connection's life
  int mss = 0;            // the segments' payload
  int path_mtu = 0;       // the largest packet the kernel believes the path takes
  // Data sent and not acknowledged, retransmitted: the peer's kernel
  // does not get it (a peer that is only slow still acknowledges).
  bool stuck() const noexcept { return unacked > 0 && retransmits > 0; }
};
std::optional<TcpSendState> tcp_send_state(int fd) noexcept;

// Whether a packet of `packet_bytes` (IP and TCP headers included)
// reaches `to`, a port that listens there: a new connection's MSS is
// clamped so that its one segment fills such a packet, and the packet
// passed when the peer's kernel acknowledges it within `wait`. A listener
// whose process never accepts still acknowledges (the connection waits in
// its backlog), so a rank's bootstrap listener serves.
enum class PacketFate { passed, lost, refused, unreachable };  // refused: the host answered, nothing listens
// `sent` gets the size of the packet that went (the kernel rounds the
// segment: it may differ from packet_bytes by a few bytes).
PacketFate probe_packet(const SocketAddress& to, int packet_bytes, std::chrono::milliseconds wait, int* sent = nullptr);

// The path to `to` for packets up to `largest` bytes: whether small ones
// pass at all, and the largest size that does (bisected to the byte,
// about 2 s where larger ones are lost).
struct PathSizes {
  bool refused = false;  // the host said nothing listens there (a reset)
  bool small_pass = false;
  int largest_passing = 0;  // 0 when even the smallest was lost
  bool exact = true;        // false: the listener went away before the last round; largest_passing is a floor
};
PathSizes probe_path_sizes(const SocketAddress& to, int largest,
                           std::chrono::milliseconds wait = std::chrono::milliseconds(300));

}  // namespace ringmaster::net

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
  int unacked = 0;      // segments sent and not acknowledged
  int retransmits = 0;  // retransmissions of the oldest of them so far
  int mss = 0;          // the segments' payload
  int path_mtu = 0;     // the largest packet the kernel believes the path takes
  // Data sent and not acknowledged, retransmitted: the peer's kernel
  // does not get it (a peer that is only slow still acknowledges).
  bool stuck() const noexcept { return unacked > 0 && retransmits > 0; }
};
std::optional<TcpSendState> tcp_send_state(int fd) noexcept;

// The path to `to`, a port that listens there, for packets up to
// `largest` bytes (IP and TCP headers included): whether small ones pass
// at all, and the largest size that does. Each probe is a new connection
// whose MSS is clamped so that its one segment fills a packet of the size
// under test; the packet passed when the peer's kernel acknowledges it
// within `wait`. A listener whose process never accepts still
// acknowledges (the connection waits in its backlog), so a rank's
// bootstrap listener serves.
struct PathSizes {
  bool refused = false;  // the host said nothing listens there (a reset)
  bool small_pass = false;
  int largest_passing = 0;  // 0 when even the smallest was lost
  bool exact = true;        // false: the listener went away before the last round; largest_passing is a floor
};
PathSizes probe_path_sizes(const SocketAddress& to, int largest,
                           std::chrono::milliseconds wait = std::chrono::milliseconds(300));

}  // namespace ringmaster::net

// What TCP itself counts on a connected socket (TCP_INFO): the segments it
// sent and those it had to send again. A link that loses packets shows
// as resent segments at its sender, whatever rate it still reaches.
#pragma once

#include <cstdint>
#include <optional>

namespace ringmaster::net {

struct TcpSegments {
  std::uint64_t sent = 0;    // tcpi_segs_out: every segment, resent ones included
  std::uint64_t resent = 0;  // tcpi_total_retrans
  TcpSegments& operator+=(const TcpSegments& o) {
    sent += o.sent;
    resent += o.resent;
    return *this;
  }
};

// nullopt when `fd` is not a TCP socket or the kernel predates the
// counters (Linux 4.2 added tcpi_segs_out).
std::optional<TcpSegments> tcp_segments(int fd) noexcept;

}  // namespace ringmaster::net

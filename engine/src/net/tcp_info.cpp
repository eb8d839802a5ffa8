// TCP_INFO through the kernel's own header: glibc's struct tcp_info stops
// before tcpi_segs_out.
#include "net/tcp_info.h"

#include <linux/tcp.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstddef>

namespace ringmaster::net {

std::optional<TcpSegments> tcp_segments(int fd) noexcept {
  tcp_info info{};
  socklen_t length = sizeof(info);
  if (fd < 0 || ::getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &length) != 0) return std::nullopt;
  if (length < offsetof(tcp_info, tcpi_segs_out) + sizeof(info.tcpi_segs_out)) return std::nullopt;
  return TcpSegments{info.tcpi_segs_out, info.tcpi_total_retrans};
}

}  // namespace ringmaster::net

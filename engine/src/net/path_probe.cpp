#include "net/path_probe.h"

#include <linux/sockios.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <thread>
#include <vector>

namespace ringmaster::net {

namespace {

// IP and TCP headers around a segment's payload (TCP options are counted
// in the MSS the kernel clamps).
int headers(int family) {
  return (family == AF_INET6 ? 40 : 20) + 20;
}

}  // namespace

std::optional<TcpSendState> tcp_send_state(int fd) noexcept {
  tcp_info info{};
  socklen_t length = sizeof(info);
  if (::getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &length) != 0) return std::nullopt;
  TcpSendState s;
  s.unacked = static_cast<int>(info.tcpi_unacked);
  s.retransmits = static_cast<int>(info.tcpi_retransmits);
  s.mss = static_cast<int>(info.tcpi_snd_mss);
  s.path_mtu = static_cast<int>(info.tcpi_pmtu);
  return s;
}

namespace {

// How a probe packet fared: acknowledged by the peer's kernel (passed),
// sent and never acknowledged (lost), reset (refused: the host answered,
// nothing listens), or no connection at all (unreachable).
enum class PacketFate { passed, lost, refused, unreachable };

// One probe connection: its socket and what it sent.
struct Probe {
  int packet_bytes = 0;
  Socket socket;
  int sent = 0;
  PacketFate fate = PacketFate::unreachable;
};

// Opens `probe`'s connection, its MSS clamped to fill a packet of its
// size; connected later, or refused.
void open_probe(const SocketAddress& to, Probe& probe) {
  const int fd = ::socket(to.family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return;
  probe.socket = Socket(fd);
  const int mss = probe.packet_bytes - headers(to.family());
  const int one = 1;
  if (mss < 64 || ::setsockopt(fd, IPPROTO_TCP, TCP_MAXSEG, &mss, sizeof(mss)) != 0 ||
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) != 0) {
    probe.socket = Socket();
    return;
  }
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&to.storage), to.length) != 0 && errno != EINPROGRESS) {
    probe.fate = errno == ECONNREFUSED ? PacketFate::refused : PacketFate::unreachable;
    probe.socket = Socket();
  }
}

// Once connected (the handshake's packets are small), one segment's
// worth: the payload the kernel settled on, in a packet with the headers
// and the TCP options it carries (timestamps).
void send_segment(const SocketAddress& to, Probe& probe) {
  const int fd = probe.socket.fd();
  int err = 0;
  socklen_t err_length = sizeof(err);
  if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &err_length) != 0 || err != 0) {
    probe.fate = err == ECONNREFUSED ? PacketFate::refused : PacketFate::unreachable;
    probe.socket = Socket();
    return;
  }
  tcp_info info{};
  socklen_t info_length = sizeof(info);
  const bool known = ::getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &info_length) == 0 && info.tcpi_snd_mss > 0;
  const int payload_bytes = known ? static_cast<int>(info.tcpi_snd_mss) : probe.packet_bytes - headers(to.family());
  probe.sent = payload_bytes + headers(to.family()) + (known && (info.tcpi_options & TCPI_OPT_TIMESTAMPS) ? 12 : 0);
  const std::vector<char> payload(static_cast<std::size_t>(payload_bytes), 'p');
  probe.fate =
      ::send(fd, payload.data(), payload.size(), MSG_NOSIGNAL) > 0 ? PacketFate::lost : PacketFate::unreachable;
}

// Every probe at once: connected within a second, then acknowledged
// within `wait` (nothing left in the send queue, sent or not) or lost.
void run_probes(const SocketAddress& to, std::vector<Probe>& probes, std::chrono::milliseconds wait) {
  for (auto& p : probes)
    open_probe(to, p);
  const auto connect_until = std::chrono::steady_clock::now() + std::max(wait, std::chrono::milliseconds(1000));
  for (;;) {
    std::vector<pollfd> fds;
    std::vector<Probe*> waiting;
    for (auto& p : probes) {
      if (p.socket.fd() >= 0 && p.sent == 0 && p.fate == PacketFate::unreachable) {
        fds.push_back({p.socket.fd(), POLLOUT, 0});
        waiting.push_back(&p);
      }
    }
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(connect_until - std::chrono::steady_clock::now());
    if (fds.empty() || left.count() <= 0) break;
    if (::poll(fds.data(), fds.size(), static_cast<int>(left.count())) <= 0) break;
    for (std::size_t i = 0; i < fds.size(); ++i) {
      if (fds[i].revents != 0) send_segment(to, *waiting[i]);
    }
  }
  const auto until = std::chrono::steady_clock::now() + wait;
  for (;;) {
    bool pending = false;
    for (auto& p : probes) {
      if (p.fate != PacketFate::lost) continue;
      int queued = 0;
      if (::ioctl(p.socket.fd(), SIOCOUTQ, &queued) == 0 && queued == 0) {
        p.fate = PacketFate::passed;
      } else {
        pending = true;
      }
    }
    if (!pending || std::chrono::steady_clock::now() >= until) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

}  // namespace

PathSizes probe_path_sizes(const SocketAddress& to, int largest, std::chrono::milliseconds wait) {
  PathSizes out;
  const int smallest = to.family() == AF_INET6 ? 1280 : 576;  // what every IPv6 / IPv4 path must carry
  // Rounds of up to 32 sizes at once between a size that passed and one
  // that did not: three rounds narrow 576..9000 to the byte in about a
  // second (the peer may exit soon after it stalls, taking its listener).
  int low = smallest, high = std::max(largest, smallest);
  bool first = true;
  while (first || high - low > 1) {
    std::vector<Probe> probes;
    const int count = first ? 32 : std::min(32, high - low - 1);
    for (int k = 0; k < count; ++k) {
      Probe p;
      p.packet_bytes = first
                           ? low + static_cast<int>(static_cast<long>(high - low) * k / (count - 1))
                           : low + 1 + static_cast<int>(static_cast<long>(high - low - 2) * k / std::max(count - 1, 1));
      probes.push_back(std::move(p));
    }
    run_probes(to, probes, wait);
    if (first) {
      out.refused = probes.front().fate == PacketFate::refused;
      if (probes.front().fate != PacketFate::passed) return out;
      out.small_pass = true;
    }
    first = false;
    bool narrowed = false;
    for (const auto& p : probes) {
      if (p.fate == PacketFate::passed && p.packet_bytes > low) {
        low = p.packet_bytes;
        out.largest_passing = std::max(out.largest_passing, p.sent);
        narrowed = true;
      }
    }
    for (const auto& p : probes) {
      if (p.fate == PacketFate::lost && p.packet_bytes > low && p.packet_bytes < high) {
        high = p.packet_bytes;
        narrowed = true;
      }
    }
    if (low >= largest) break;  // every size passed
    if (!narrowed) {            // the listener went away: what is known so far
      out.exact = false;
      break;
    }
  }
  out.largest_passing = std::max(out.largest_passing, low);
  return out;
}

}  // namespace ringmaster::net

#include "net/socket.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <random>
#include <thread>

#include "base/log.h"
#include "net/connect_filter.h"

namespace ringmaster::net {
namespace {

int remaining_ms(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  if (left <= 0) return 0;
  return left > 1'000'000'000 ? 1'000'000'000 : static_cast<int>(left);
}

// Waits for events on fd until the deadline: 0 when ready, else an errno.
int wait_for(int fd, short events, Clock::time_point deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    const int n = ::poll(&p, 1, remaining_ms(deadline));
    if (n > 0) return 0;
    if (n == 0) return ETIMEDOUT;
    if (errno != EINTR) return errno;
  }
}

const char* errno_name(int err) {
  switch (err) {
    case ECONNREFUSED:
      return "ECONNREFUSED";
    case ETIMEDOUT:
      return "ETIMEDOUT";
    case EHOSTUNREACH:
      return "EHOSTUNREACH";
    case ENETUNREACH:
      return "ENETUNREACH";
    case ECONNRESET:
      return "ECONNRESET";
    case EPIPE:
      return "EPIPE";
    case EADDRINUSE:
      return "EADDRINUSE";
    case EADDRNOTAVAIL:
      return "EADDRNOTAVAIL";
    case EACCES:
      return "EACCES";
    default:
      return nullptr;
  }
}

}  // namespace

std::string errno_text(int err) {
  if (err == kPeerClosed) return "connection closed by peer";
  std::string text = std::strerror(err);
  if (const char* name = errno_name(err)) text += std::string(" (") + name + ")";
  return text;
}

std::uint16_t SocketAddress::port() const noexcept {
  if (family() == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in*>(&storage)->sin_port);
  if (family() == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6*>(&storage)->sin6_port);
  return 0;
}

void SocketAddress::set_port(std::uint16_t port) noexcept {
  if (family() == AF_INET) reinterpret_cast<sockaddr_in*>(&storage)->sin_port = htons(port);
  if (family() == AF_INET6) reinterpret_cast<sockaddr_in6*>(&storage)->sin6_port = htons(port);
}

bool is_loopback_host(const std::string& host) {
  const auto address = SocketAddress::parse(host.find(':') != std::string::npos ? "[" + host + "]:0" : host + ":0");
  return address && address->is_loopback();
}

bool SocketAddress::is_loopback() const noexcept {
  if (family() == AF_INET) {
    return (ntohl(reinterpret_cast<const sockaddr_in*>(&storage)->sin_addr.s_addr) >> 24) == 127;
  }
  if (family() == AF_INET6) {
    const auto* a = &reinterpret_cast<const sockaddr_in6*>(&storage)->sin6_addr;
    return IN6_IS_ADDR_LOOPBACK(a) != 0;
  }
  return false;
}

std::string SocketAddress::host() const {
  char buf[INET6_ADDRSTRLEN] = {};
  if (family() == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(&storage)->sin_addr, buf, sizeof(buf));
  } else if (family() == AF_INET6) {
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(&storage)->sin6_addr, buf, sizeof(buf));
  } else {
    return "<none>";
  }
  return buf;
}

std::string SocketAddress::to_string() const {
  // Appended piece by piece: GCC 12 warns falsely (-Wrestrict) on "[" + host().
  std::string out;
  const bool v6 = family() == AF_INET6;
  if (v6) out += '[';
  out += host();
  if (v6) out += ']';
  out += ':';
  out += std::to_string(port());
  return out;
}

SocketAddress SocketAddress::from_sockaddr(const sockaddr* sa, socklen_t len) {
  SocketAddress a;
  std::memcpy(&a.storage, sa, std::min<std::size_t>(len, sizeof(a.storage)));
  a.length = len;
  return a;
}

std::optional<SocketAddress> SocketAddress::parse(std::string_view text) {
  std::string host;
  std::string_view port_text;
  if (!text.empty() && text.front() == '[') {
    const auto close = text.find(']');
    if (close == std::string_view::npos || close + 1 >= text.size() || text[close + 1] != ':') return std::nullopt;
    host = std::string(text.substr(1, close - 1));
    port_text = text.substr(close + 2);
  } else {
    const auto colon = text.rfind(':');
    if (colon == std::string_view::npos) return std::nullopt;
    host = std::string(text.substr(0, colon));
    port_text = text.substr(colon + 1);
  }
  unsigned port = 0;
  auto [ptr, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (ec != std::errc() || ptr != port_text.data() + port_text.size() || port > 65535) return std::nullopt;
  SocketAddress a;
  auto* v4 = reinterpret_cast<sockaddr_in*>(&a.storage);
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&a.storage);
  if (inet_pton(AF_INET, host.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    a.length = sizeof(sockaddr_in);
  } else if (inet_pton(AF_INET6, host.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    a.length = sizeof(sockaddr_in6);
  } else {
    return std::nullopt;
  }
  a.set_port(static_cast<std::uint16_t>(port));
  return a;
}

ResolveResult resolve(const std::string& host, std::uint16_t port, int family) {
  ResolveResult result;
  addrinfo hints{};
  hints.ai_family = family;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* list = nullptr;
  const std::string service = std::to_string(port);
  result.gai_error = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &list);
  if (result.gai_error != 0) {
    result.error = gai_strerror(result.gai_error);
    return result;
  }
  for (addrinfo* ai = list; ai != nullptr; ai = ai->ai_next) {
    result.addresses.push_back(SocketAddress::from_sockaddr(ai->ai_addr, ai->ai_addrlen));
  }
  ::freeaddrinfo(list);
  return result;
}

bool may_resolve_later(int gai_error) noexcept {
  switch (gai_error) {
    case 0:  // resolved, but to no address
    case EAI_NONAME:
    case EAI_AGAIN:
    case EAI_FAIL:
#ifdef EAI_NODATA
    case EAI_NODATA:
#endif
#ifdef EAI_ADDRFAMILY
    case EAI_ADDRFAMILY:
#endif
      return true;
    default:
      return false;
  }
}

Socket& Socket::operator=(Socket&& other) noexcept {
  if (this != &other) {
    close();
    fd_ = other.release();
  }
  return *this;
}

void Socket::close() noexcept {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

Socket Socket::listen(const SocketAddress& address, int backlog, int& err) {
  err = 0;
  Socket s(::socket(address.family(), SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!s.valid()) {
    err = errno;
    return {};
  }
  const int one = 1;
  ::setsockopt(s.fd(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (::bind(s.fd(), reinterpret_cast<const sockaddr*>(&address.storage), address.length) != 0 ||
      ::listen(s.fd(), backlog) != 0) {
    err = errno;
    return {};
  }
  return s;
}

ConnectOutcome outcome_of_immediate(int err) noexcept {
  // Refused at once (a local port), or no route from here: no packet left.
  return err == ECONNREFUSED                         ? ConnectOutcome::refused
         : err == ENETUNREACH || err == EHOSTUNREACH ? ConnectOutcome::no_route
                                                     : ConnectOutcome::other;
}

ConnectOutcome outcome_of_answer(int so_error) noexcept {
  if (so_error == 0) return ConnectOutcome::connected;
  return so_error == ECONNREFUSED ? ConnectOutcome::refused
         : so_error == EHOSTUNREACH || so_error == ENETUNREACH || so_error == EACCES || so_error == EPERM
             ? ConnectOutcome::rejected
             : ConnectOutcome::other;
}

bool awaiting_syn_ack(int fd) noexcept {
  tcp_info info{};
  socklen_t length = sizeof(info);
  return ::getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &length) == 0 && info.tcpi_state == 2 /* TCP_SYN_SENT */;
}

int Socket::connect(const SocketAddress& to, Clock::time_point deadline, Socket& out) {
  ConnectOutcome outcome = ConnectOutcome::other;
  return connect(to, deadline, out, outcome);
}

int Socket::connect(const SocketAddress& to, Clock::time_point deadline, Socket& out, ConnectOutcome& outcome) {
  outcome = ConnectOutcome::other;
  if (connect_filter_drops(to)) {
    RM_TRACE(net, "connect to {} dropped by the connect filter ({})", to.to_string(), connect_filter_spec());
    std::this_thread::sleep_until(deadline);
    outcome = ConnectOutcome::unanswered;
    return ETIMEDOUT;
  }
  Socket s(::socket(to.family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!s.valid()) return errno;
  if (::connect(s.fd(), reinterpret_cast<const sockaddr*>(&to.storage), to.length) != 0) {
    const int immediate = errno;
    if (immediate != EINPROGRESS) {
      outcome = outcome_of_immediate(immediate);
      return immediate;
    }
    if (const int err = wait_for(s.fd(), POLLOUT, deadline); err != 0) {
      // Still waiting for the SYN-ACK: the kernel's own state says so.
      if (err == ETIMEDOUT && awaiting_syn_ack(s.fd())) outcome = ConnectOutcome::unanswered;
      return err;
    }
    int so_error = 0;
    socklen_t len = sizeof(so_error);
    ::getsockopt(s.fd(), SOL_SOCKET, SO_ERROR, &so_error, &len);
    if (so_error != 0) {
      // An answer came back: a RST, or an ICMP error for the SYN.
      outcome = outcome_of_answer(so_error);
      return so_error;
    }
  }
  outcome = ConnectOutcome::connected;
  out = std::move(s);
  return 0;
}

Socket Socket::accept(Clock::time_point deadline, int& err) const {
  err = wait_for(fd_, POLLIN, deadline);
  if (err != 0) return {};
  Socket s(::accept4(fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
  if (!s.valid()) err = errno;
  return s;
}

int Socket::send_all(const void* data, std::size_t size, Clock::time_point deadline) const {
  const auto* p = static_cast<const std::byte*>(data);
  while (size > 0) {
    const ssize_t n = ::send(fd_, p, size, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      p += n;
      size -= static_cast<std::size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (const int err = wait_for(fd_, POLLOUT, deadline); err != 0) return err;
      continue;
    }
    return errno;
  }
  return 0;
}

int Socket::recv_all(void* data, std::size_t size, Clock::time_point deadline) const {
  auto* p = static_cast<std::byte*>(data);
  while (size > 0) {
    const ssize_t n = ::recv(fd_, p, size, MSG_DONTWAIT);
    if (n > 0) {
      p += n;
      size -= static_cast<std::size_t>(n);
      continue;
    }
    if (n == 0) return kPeerClosed;
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      if (const int err = wait_for(fd_, POLLIN, deadline); err != 0) return err;
      continue;
    }
    return errno;
  }
  return 0;
}

int Socket::recv_some(void* data, std::size_t size, Clock::time_point deadline, std::size_t& got) const {
  got = 0;
  for (;;) {
    const ssize_t n = ::recv(fd_, data, size, MSG_DONTWAIT);
    if (n > 0) {
      got = static_cast<std::size_t>(n);
      return 0;
    }
    if (n == 0) return kPeerClosed;
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) return errno;
    if (const int err = wait_for(fd_, POLLIN, deadline); err != 0) return err;
  }
}

SocketAddress Socket::local_address() const {
  SocketAddress a;
  a.length = sizeof(a.storage);
  if (::getsockname(fd_, reinterpret_cast<sockaddr*>(&a.storage), &a.length) != 0) a = {};
  return a;
}

SocketAddress Socket::peer_address() const {
  SocketAddress a;
  a.length = sizeof(a.storage);
  if (::getpeername(fd_, reinterpret_cast<sockaddr*>(&a.storage), &a.length) != 0) a = {};
  return a;
}

void Socket::set_nodelay() const noexcept {
  const int one = 1;
  ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

void Socket::set_buffer_sizes(int bytes) const noexcept {
  ::setsockopt(fd_, SOL_SOCKET, SO_SNDBUF, &bytes, sizeof(bytes));
  ::setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &bytes, sizeof(bytes));
}

const char* name_of(ConnectOutcome outcome) noexcept {
  switch (outcome) {
    case ConnectOutcome::connected:
      return "connected";
    case ConnectOutcome::refused:
      return "refused";
    case ConnectOutcome::unanswered:
      return "unanswered";
    case ConnectOutcome::rejected:
      return "rejected";
    case ConnectOutcome::no_route:
      return "no_route";
    case ConnectOutcome::other:
      break;
  }
  return "other";
}

std::string ConnectAttempts::summary() const {
  std::string out;
  auto add = [&](int n, const char* what) {
    if (n == 0) return;
    if (!out.empty()) out += ", ";
    out += std::to_string(n) + " " + what;
  };
  add(unanswered, "unanswered");
  add(refused, "refused");
  add(rejected, "rejected");
  add(no_route, "without a route");
  return std::to_string(attempts) + " attempt(s)" + (out.empty() ? "" : ": " + out);
}

int connect_with_backoff(const std::vector<SocketAddress>& addresses, Clock::time_point deadline, Socket& out,
                         ConnectAttempts& report, const ConnectProgress& progress) {
  std::mt19937 rng(std::random_device{}());
  std::uniform_real_distribution<double> jitter(0.75, 1.25);
  auto backoff = std::chrono::milliseconds(10);
  report.first_attempt = Clock::now();
  Clock::time_point last_progress{};
  ConnectOutcome last_reported = ConnectOutcome::connected;
  for (;;) {
    for (const auto& address : addresses) {
      ++report.attempts;
      report.last_address = address;
      const auto started = Clock::now();
      ConnectOutcome outcome = ConnectOutcome::other;
      const int err = Socket::connect(address, std::min(deadline, started + kConnectAttemptWindow), out, outcome);
      if (err == 0) return 0;
      report.last_error = err;
      report.last_outcome = outcome;
      switch (outcome) {
        case ConnectOutcome::refused:
          ++report.refused;
          break;
        case ConnectOutcome::unanswered:
          if (report.unanswered++ == 0) report.first_unanswered = started;
          break;
        case ConnectOutcome::rejected:
          ++report.rejected;
          break;
        case ConnectOutcome::no_route:
          ++report.no_route;
          break;
        default:
          break;
      }
      RM_INFO(net, "connect to {} returned {} ({}), retrying ({} attempts so far)", address.to_string(),
              errno_text(err), name_of(outcome), report.attempts);
      const auto now = Clock::now();
      if (progress && (outcome != last_reported || now - last_progress >= std::chrono::seconds(1))) {
        progress(report);
        last_progress = now;
        last_reported = outcome;
      }
      if (now >= deadline) return err;
    }
    const auto pause = std::chrono::duration_cast<Clock::duration>(backoff * jitter(rng));
    if (Clock::now() + pause >= deadline) {
      std::this_thread::sleep_until(deadline);
      return report.last_error != 0 ? report.last_error : ETIMEDOUT;
    }
    std::this_thread::sleep_for(pause);
    backoff = std::min(backoff * 2, std::chrono::milliseconds(1000));
  }
}

}  // namespace ringmaster::net

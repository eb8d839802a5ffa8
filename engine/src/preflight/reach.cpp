// probe_reach: many non-blocking connects polled together, each classified
// as Socket::connect classifies one; PortListeners: wildcard listeners
// drained by one thread.
#include <fmt/format.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <map>
#include <mutex>
#include <thread>

#include "net/port_use.h"
#include "net/socket.h"
#include "ringmaster/tools/preflight.h"

namespace ringmaster {
namespace {

using Clock = std::chrono::steady_clock;

constexpr std::size_t kOpenAtOnce = 512;

Reach reach_of(net::ConnectOutcome outcome) {
  switch (outcome) {
    case net::ConnectOutcome::connected:
      return Reach::ok;
    case net::ConnectOutcome::refused:
      return Reach::refused;
    case net::ConnectOutcome::unanswered:
      return Reach::dropped;
    case net::ConnectOutcome::rejected:
      return Reach::rejected;
    case net::ConnectOutcome::no_route:
      return Reach::no_route;
    case net::ConnectOutcome::other:
      break;
  }
  return Reach::error;
}

int path_mtu(int fd, int family) {
  int mtu = 0;
  socklen_t length = sizeof(mtu);
  const int level = family == AF_INET6 ? IPPROTO_IPV6 : IPPROTO_IP;
  const int name = family == AF_INET6 ? IPV6_MTU : IP_MTU;
  return ::getsockopt(fd, level, name, &mtu, &length) == 0 ? mtu : 0;
}

// Closes with a RST rather than a FIN: a probe's connection leaves no
// TIME_WAIT behind, on the prober (whose ephemeral ports a large preflight
// would otherwise use up) or on the listener (whose port a job's store
// binds next).
void close_at_once(int fd) {
  const linger now{1, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_LINGER, &now, sizeof(now));
  ::close(fd);
}

// Why a port would not listen: "in use" by a listener (which still
// answers probes of the path), or the source port of a connection, where
// nothing answers and a probe would read as a refusing firewall.
constexpr std::string_view kInUse = "in use";
std::string in_use_note(std::uint16_t port) {
  const auto holder = net::outbound_holder(net::sockets_on_port(port));
  if (!holder) return std::string(kInUse);
  return fmt::format("in use by an outbound connection ({} to {})", holder->state, holder->remote);
}

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// One batch: every target connecting at once until answered or the window ends.
void probe_batch(const std::vector<ReachTarget>& targets, std::size_t first, std::size_t end,
                 std::chrono::milliseconds window, std::map<std::string, net::ResolveResult>& resolved,
                 std::vector<ReachResult>& out) {
  struct Pending {
    int fd;
    int family;
    std::size_t index;
  };
  std::vector<Pending> pending;
  const auto started = Clock::now();
  for (std::size_t i = first; i < end; ++i) {
    const ReachTarget& t = targets[i];
    auto it = resolved.find(t.host);
    if (it == resolved.end()) it = resolved.emplace(t.host, net::resolve(t.host, 0)).first;
    if (!it->second.ok()) {
      out[i] = {Reach::unresolved, 0, 0, fmt::format("{} does not resolve: {}", t.host, it->second.error)};
      continue;
    }
    net::SocketAddress to = it->second.addresses.front();
    to.set_port(t.port);
    const int fd = ::socket(to.family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
      out[i] = {Reach::error, 0, 0, fmt::format("socket: {}", net::errno_text(errno))};
      continue;
    }
    if (::connect(fd, reinterpret_cast<const sockaddr*>(&to.storage), to.length) == 0) {
      out[i] = {Reach::ok, ms_since(started), path_mtu(fd, to.family()), {}};
      close_at_once(fd);
      continue;
    }
    if (errno != EINPROGRESS) {
      const int err = errno;
      out[i] = {reach_of(net::outcome_of_immediate(err)), ms_since(started), 0, net::errno_text(err)};
      ::close(fd);
      continue;
    }
    pending.push_back({fd, to.family(), i});
  }
  const auto deadline = started + window;
  while (!pending.empty()) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) break;
    std::vector<pollfd> fds;
    fds.reserve(pending.size());
    for (const auto& p : pending)
      fds.push_back({p.fd, POLLOUT, 0});
    const int n = ::poll(fds.data(), fds.size(), static_cast<int>(std::min<long long>(left.count(), 100)));
    if (n < 0 && errno != EINTR) break;
    std::vector<Pending> still;
    for (std::size_t k = 0; k < pending.size(); ++k) {
      const Pending& p = pending[k];
      if (fds[k].revents == 0) {
        still.push_back(p);
        continue;
      }
      int so_error = 0;
      socklen_t length = sizeof(so_error);
      ::getsockopt(p.fd, SOL_SOCKET, SO_ERROR, &so_error, &length);
      ReachResult& r = out[p.index];
      r.reach = reach_of(net::outcome_of_answer(so_error));
      r.ms = ms_since(started);
      if (so_error == 0) {
        r.path_mtu = path_mtu(p.fd, p.family);
      } else {
        r.detail = net::errno_text(so_error);
      }
      close_at_once(p.fd);
    }
    pending = std::move(still);
  }
  for (const auto& p : pending) {
    ReachResult& r = out[p.index];
    r.ms = ms_since(started);
    if (net::awaiting_syn_ack(p.fd)) {
      r.reach = Reach::dropped;
      r.detail = fmt::format("no SYN-ACK in {} ms", window.count());
    } else {
      r.reach = Reach::error;
      r.detail = fmt::format("no answer in {} ms, past the SYN", window.count());
    }
    ::close(p.fd);
  }
}

}  // namespace

const char* name_of(Reach reach) noexcept {
  switch (reach) {
    case Reach::ok:
      return "ok";
    case Reach::refused:
      return "refused";
    case Reach::dropped:
      return "dropped";
    case Reach::rejected:
      return "rejected";
    case Reach::no_route:
      return "no_route";
    case Reach::unresolved:
      return "unresolved";
    case Reach::error:
      return "error";
    case Reach::untested:
      return "untested";
  }
  return "?";
}

std::optional<Reach> reach_from_name(std::string_view name) noexcept {
  for (int r = 0; r <= static_cast<int>(Reach::untested); ++r) {
    if (name == name_of(static_cast<Reach>(r))) return static_cast<Reach>(r);
  }
  return std::nullopt;
}

std::vector<ReachResult> probe_reach(const std::vector<ReachTarget>& targets, std::chrono::milliseconds window) {
  std::vector<ReachResult> out(targets.size());
  std::map<std::string, net::ResolveResult> resolved;
  for (std::size_t first = 0; first < targets.size(); first += kOpenAtOnce)
    probe_batch(targets, first, std::min(targets.size(), first + kOpenAtOnce), window, resolved, out);
  // A refusal is asked once more, 100 ms later: a firewall's reset comes
  // again, a passing one (a listener that was not yet accepting) does not.
  std::vector<ReachTarget> again;
  std::vector<std::size_t> where;
  for (std::size_t i = 0; i < out.size(); ++i) {
    if (out[i].reach != Reach::refused) continue;
    again.push_back(targets[i]);
    where.push_back(i);
  }
  if (again.empty()) return out;
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  std::vector<ReachResult> second(again.size());
  for (std::size_t first = 0; first < again.size(); first += kOpenAtOnce)
    probe_batch(again, first, std::min(again.size(), first + kOpenAtOnce), window, resolved, second);
  for (std::size_t k = 0; k < again.size(); ++k) {
    if (second[k].reach == Reach::refused) continue;
    out[where[k]] = second[k];
    out[where[k]].detail += (out[where[k]].detail.empty() ? "" : "; ") + std::string("refused at the first try");
  }
  return out;
}

struct PortListeners::Impl {
  std::mutex mutex;
  std::vector<net::Socket> sockets;
  int wake = -1;  // an eventfd: a new socket, or stop
  std::atomic<bool> stopping{false};
  std::atomic<std::uint64_t> accepted{0};
  std::thread thread;

  Impl() : wake(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {
    thread = std::thread([this] { drain(); });
  }
  ~Impl() {
    stopping = true;
    poke();
    thread.join();
    if (wake >= 0) ::close(wake);
  }
  void poke() const {
    const std::uint64_t one = 1;
    [[maybe_unused]] const auto n = ::write(wake, &one, sizeof(one));
  }

  // Accepted connections wait for the prober's RST (it closes first, so
  // neither side keeps a TIME_WAIT and the prober reads its path MTU from a
  // connection still up); one the prober does not close goes after 2 s.
  void drain() {
    constexpr std::size_t kHeldAtMost = 4096;
    constexpr auto kHoldFor = std::chrono::seconds(2);
    std::vector<std::pair<int, Clock::time_point>> held;
    while (!stopping) {
      std::vector<pollfd> fds{{wake, POLLIN, 0}};
      std::size_t listening = 0;
      {
        std::lock_guard lock(mutex);
        for (const auto& s : sockets)
          fds.push_back({s.fd(), POLLIN, 0});
        listening = sockets.size();
      }
      for (const auto& [fd, since] : held)
        fds.push_back({fd, POLLIN, 0});
      const int ready = ::poll(fds.data(), fds.size(), held.empty() ? 1000 : 200);
      const auto now = Clock::now();
      std::vector<std::pair<int, Clock::time_point>> still;
      for (std::size_t k = 0; k < held.size(); ++k) {
        const auto [fd, since] = held[k];
        if (fds[1 + listening + k].revents != 0 || now - since > kHoldFor) {
          close_at_once(fd);
        } else {
          still.emplace_back(fd, since);
        }
      }
      held = std::move(still);
      if (ready <= 0) continue;
      if (fds[0].revents != 0) {
        std::uint64_t count = 0;
        [[maybe_unused]] const auto n = ::read(wake, &count, sizeof(count));
      }
      for (std::size_t k = 1; k <= listening; ++k) {
        if (fds[k].revents == 0) continue;
        for (;;) {
          const int fd = ::accept4(fds[k].fd, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
          if (fd < 0) break;
          ++accepted;
          if (held.size() < kHeldAtMost) {
            held.emplace_back(fd, now);
          } else {
            close_at_once(fd);
          }
        }
      }
    }
    for (const auto& [fd, since] : held)
      close_at_once(fd);
  }

  // Listens on `port` on every address (dual-stack where IPv6 is on). A
  // port in use is explained (who holds it, from /proc/net/tcp) only when
  // asked: a walk past taken ports explains the last one alone, as one
  // reading of the table costs milliseconds where many agents share a
  // host, and each try read it twice (64 agents' preflight took 76 s).
  PortListeners::Port listen(std::uint16_t port, bool explain = true) {
    Port out{port, false, {}};
    int err = 0;
    net::Socket s;
    for (const char* any : {"[::]:0", "0.0.0.0:0"}) {
      auto address = net::SocketAddress::parse(any);
      address->set_port(port);
      const int fd = ::socket(address->family(), SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
      if (fd < 0) {
        err = errno;
        continue;
      }
      net::Socket candidate(fd);
      const int one = 1, zero = 0;
      ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
      if (address->family() == AF_INET6) ::setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
      if (::bind(fd, reinterpret_cast<const sockaddr*>(&address->storage), address->length) == 0 &&
          ::listen(fd, 4096) == 0) {
        s = std::move(candidate);
        break;
      }
      err = errno;
      if (err == EADDRINUSE) break;  // the IPv4 wildcard would meet the same listener
    }
    if (!s.valid()) {
      out.note = err != EADDRINUSE ? net::errno_text(err) : explain ? in_use_note(port) : std::string(kInUse);
      return out;
    }
    out.listening = true;
    {
      std::lock_guard lock(mutex);
      sockets.push_back(std::move(s));
    }
    poke();
    return out;
  }
};

PortListeners::PortListeners() : impl_(std::make_unique<Impl>()) {}
PortListeners::~PortListeners() = default;

PortListeners::Port PortListeners::listen_on(std::uint16_t port) {
  return impl_->listen(port);
}

std::vector<PortListeners::Port> PortListeners::listen_in(std::uint16_t lo, std::uint16_t hi, int count) {
  std::vector<Port> out;
  if (hi < lo || count <= 0) return out;
  const long long span = static_cast<long long>(hi) - lo + 1;
  count = static_cast<int>(std::min<long long>(count, span));
  // Aim at the middle of each of `count` equal parts, and walk up from
  // there past ports already taken, at most 64 of them.
  for (int k = 0; k < count; ++k) {
    const long long part_lo = lo + span * k / count, part_hi = lo + span * (k + 1) / count - 1;
    Port last;
    for (long long p = (part_lo + part_hi) / 2, tries = 0; p <= part_hi && tries < 64; ++p, ++tries) {
      last = impl_->listen(static_cast<std::uint16_t>(p), false);
      if (last.listening) break;
    }
    if (!last.listening && last.note == kInUse) last.note = in_use_note(last.port);
    out.push_back(last);
  }
  return out;
}

std::uint64_t PortListeners::accepted() const noexcept {
  return impl_->accepted.load();
}

}  // namespace ringmaster

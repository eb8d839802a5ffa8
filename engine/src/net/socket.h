// Thin RAII wrappers over POSIX TCP sockets with deadlines.
//
// Every blocking call takes a deadline and reports failure as an errno
// value (or kPeerClosed), never by throwing, so callers can turn the
// failure into an error that names their stage, peer and hint. Socket
// objects are not thread-safe; distinct sockets may be used from distinct
// threads.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ringmaster::net {

using Clock = std::chrono::steady_clock;

// Returned instead of an errno when the peer closed the connection.
inline constexpr int kPeerClosed = -1;

// "Connection refused (ECONNREFUSED)", or "connection closed by peer".
std::string errno_text(int err);

struct SocketAddress {
  sockaddr_storage storage{};
  socklen_t length = 0;

  int family() const noexcept { return storage.ss_family; }
  std::uint16_t port() const noexcept;
  void set_port(std::uint16_t port) noexcept;
  bool is_loopback() const noexcept;
  // Numeric host: "10.0.0.5" or "fe80::1".
  std::string host() const;
  // "10.0.0.5:29500" or "[fe80::1]:29500".
  std::string to_string() const;

  static SocketAddress from_sockaddr(const sockaddr* sa, socklen_t len);
  // Parses a numeric "host:port" or "[v6]:port".
  static std::optional<SocketAddress> parse(std::string_view text);
};

struct ResolveResult {
  std::vector<SocketAddress> addresses;
  int gai_error = 0;  // getaddrinfo's code when resolution failed
  std::string error;  // its text
  bool ok() const noexcept { return gai_error == 0 && !addresses.empty(); }
};

// Whether a numeric host ("127.0.1.1", "::1") is a loopback address;
// false for anything that does not parse.
bool is_loopback_host(const std::string& host);

// Resolves a host name or numeric address; family AF_UNSPEC, AF_INET or AF_INET6.
ResolveResult resolve(const std::string& host, std::uint16_t port, int family = AF_UNSPEC);
// Whether a failed resolution may succeed when asked again (the name is
// missing or the resolver did not answer), rather than never (a bad family).
bool may_resolve_later(int gai_error) noexcept;

// What one connect attempt met, from the errno and the socket's state.
enum class ConnectOutcome : std::uint8_t {
  connected,
  refused,     // RST: nothing listens there
  unanswered,  // SYN sent (and resent), no SYN-ACK: dropped on the way
  rejected,    // ICMP unreachable or administratively prohibited
  no_route,    // this host has no route to the address
  other,
};
// "refused", "unanswered", "rejected", "no_route", ...
const char* name_of(ConnectOutcome outcome) noexcept;

// What a non-blocking connect's own errno says (not EINPROGRESS): refused
// or no route without a packet sent, else other.
ConnectOutcome outcome_of_immediate(int err) noexcept;
// What SO_ERROR says once the socket is writable: connected (0), refused
// (a RST), rejected (an ICMP error for the SYN) or other.
ConnectOutcome outcome_of_answer(int so_error) noexcept;
// Whether a connecting socket still waits for its SYN-ACK (TCP_INFO).
bool awaiting_syn_ack(int fd) noexcept;

class Socket {
 public:
  Socket() = default;
  explicit Socket(int fd) noexcept : fd_(fd) {}
  ~Socket() { close(); }
  Socket(Socket&& other) noexcept : fd_(other.release()) {}
  Socket& operator=(Socket&& other) noexcept;
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;

  int fd() const noexcept { return fd_; }
  bool valid() const noexcept { return fd_ >= 0; }
  int release() noexcept {
    const int fd = fd_;
    fd_ = -1;
    return fd;
  }
  void close() noexcept;

  // Binds and listens; on failure returns an invalid socket and sets err.
  static Socket listen(const SocketAddress& address, int backlog, int& err);
  // Connects before the deadline. Returns 0 or an errno (ETIMEDOUT when the
  // deadline passed). Honours the in-engine connect filter.
  static int connect(const SocketAddress& to, Clock::time_point deadline, Socket& out);
  // The same, saying what the attempt met.
  static int connect(const SocketAddress& to, Clock::time_point deadline, Socket& out, ConnectOutcome& outcome);

  // Accepts one connection before the deadline; err is 0 or an errno.
  Socket accept(Clock::time_point deadline, int& err) const;

  int send_all(const void* data, std::size_t size, Clock::time_point deadline) const;
  int recv_all(void* data, std::size_t size, Clock::time_point deadline) const;
  // Receives what has arrived, at least one byte and at most `size`, waiting
  // until the deadline for the first; `got` says how many.
  int recv_some(void* data, std::size_t size, Clock::time_point deadline, std::size_t& got) const;

  SocketAddress local_address() const;
  SocketAddress peer_address() const;
  void set_nodelay() const noexcept;
  void set_buffer_sizes(int bytes) const noexcept;

 private:
  int fd_ = -1;
};

struct ConnectAttempts {
  int attempts = 0;
  int last_error = 0;  // errno of the last failed attempt
  SocketAddress last_address;
  ConnectOutcome last_outcome = ConnectOutcome::other;
  // Attempts by outcome, and when the first unanswered SYN went out.
  int refused = 0, unanswered = 0, rejected = 0, no_route = 0;
  Clock::time_point first_attempt, first_unanswered;
  // "4 attempt(s): 3 unanswered, 1 refused" ("4 attempt(s)" when none was classified).
  std::string summary() const;
};

// How long one attempt waits for a SYN-ACK before it counts as unanswered
// and a fresh one starts: the kernel has sent the SYN twice by then (at 0
// and 1 s), so a dropped SYN is known within about 2 s rather than at the
// stage's deadline.
inline constexpr std::chrono::milliseconds kConnectAttemptWindow{2000};

// Called after a failed attempt, at most about once a second and whenever
// the outcome changes, while connect_with_backoff keeps trying.
using ConnectProgress = std::function<void(const ConnectAttempts&)>;

// Connects to one of `addresses` (tried in order each round), each attempt
// allowed kConnectAttemptWindow, retrying with exponential backoff (from 10
// ms, doubling, at most 1 s) and +-25% jitter until the deadline. Each failed
// attempt is classified (ConnectOutcome), counted in `report` and logged at
// INFO. Returns 0 or the last errno (ETIMEDOUT when time ran out without any
// other answer).
int connect_with_backoff(const std::vector<SocketAddress>& addresses, Clock::time_point deadline, Socket& out,
                         ConnectAttempts& report, const ConnectProgress& progress = {});

}  // namespace ringmaster::net

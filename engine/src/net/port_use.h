// Who holds a local TCP port, as the kernel lists it (/proc/net/tcp and
// tcp6 of this network namespace), and the kernel's ephemeral range: for
// telling "another process listens on MASTER_PORT" from "an outbound
// connection was handed MASTER_PORT as its source port".
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace ringmaster::net {

struct PortUse {
  bool listening = false;
  std::string state;   // "LISTEN", "ESTABLISHED", "TIME_WAIT", ...
  std::string remote;  // "198.18.0.2:29600"; empty for a listener
};

// One row of /proc/net/tcp{,6}: a TCP socket of that network namespace.
struct TcpSocket {
  std::string local, remote;  // addresses ("10.0.0.5", "[fd77::1]")
  std::uint16_t local_port = 0, remote_port = 0;
  std::string state;        // "SYN_SENT", "LISTEN", ...
  int retransmits = 0;      // unanswered retransmissions so far (a SYN's)
  std::uint64_t inode = 0;  // what /proc/PID/fd/N names as socket:[inode]
};

// Every row of one of those files' text; rows that do not parse are skipped.
std::vector<TcpSocket> parse_tcp_table(const std::string& text, bool ipv6);

// The sockets bound to local port `port`, from /proc/net/tcp{,6}.
std::vector<PortUse> sockets_on_port(std::uint16_t port);

// Parses one of those files' text (for tests): the sockets on `port`.
std::vector<PortUse> parse_proc_net_tcp(const std::string& text, std::uint16_t port, bool ipv6);

// The connection that holds the port when nothing listens there (what
// the kernel handed to an outbound connect()); nothing when a listener
// holds it, or nothing does.
std::optional<PortUse> outbound_holder(const std::vector<PortUse>& uses);

// net.ipv4.ip_local_port_range: the ports the kernel gives connect() and
// bind(0). Nothing when it cannot be read.
std::optional<std::pair<int, int>> ephemeral_port_range();

}  // namespace ringmaster::net

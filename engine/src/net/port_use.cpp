#include "net/port_use.h"

#include <arpa/inet.h>

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <tuple>

namespace ringmaster::net {
namespace {

// The states of include/net/tcp_states.h, in their order from 1.
constexpr std::array<const char*, 12> kStates = {"ESTABLISHED", "SYN_SENT",  "SYN_RECV", "FIN_WAIT1",
                                                 "FIN_WAIT2",   "TIME_WAIT", "CLOSE",    "CLOSE_WAIT",
                                                 "LAST_ACK",    "LISTEN",    "CLOSING",  "NEW_SYN_RECV"};
constexpr int kListen = 10;

// "0100007F:7530" (address in the kernel's byte order, port in hex).
std::optional<std::pair<std::string, std::uint16_t>> endpoint(const std::string& field, bool ipv6) {
  const auto colon = field.find(':');
  if (colon == std::string::npos) return std::nullopt;
  const std::string hex = field.substr(0, colon);
  unsigned port = 0;
  if (std::sscanf(field.c_str() + colon + 1, "%x", &port) != 1 || port > 0xffff) return std::nullopt;
  char text[INET6_ADDRSTRLEN] = {};
  if (!ipv6) {
    unsigned a = 0;
    if (hex.size() != 8 || std::sscanf(hex.c_str(), "%x", &a) != 1) return std::nullopt;
    in_addr addr{};
    addr.s_addr = a;  // printed in host order of the kernel's 32-bit word: the bytes as they are
    ::inet_ntop(AF_INET, &addr, text, sizeof(text));
    return std::pair{std::string(text), static_cast<std::uint16_t>(port)};
  }
  if (hex.size() != 32) return std::nullopt;
  in6_addr addr{};
  for (int word = 0; word < 4; ++word) {
    unsigned w = 0;
    if (std::sscanf(hex.substr(static_cast<std::size_t>(word) * 8, 8).c_str(), "%x", &w) != 1) return std::nullopt;
    std::memcpy(addr.s6_addr + word * 4, &w, 4);
  }
  ::inet_ntop(AF_INET6, &addr, text, sizeof(text));
  return std::pair{"[" + std::string(text) + "]", static_cast<std::uint16_t>(port)};
}

}  // namespace

std::vector<TcpSocket> parse_tcp_table(const std::string& text, bool ipv6) {
  std::vector<TcpSocket> out;
  std::istringstream lines(text);
  std::string line;
  std::getline(lines, line);  // the header
  while (std::getline(lines, line)) {
    // sl local remote st tx_queue:rx_queue tr:tm->when retrnsmt uid timeout inode
    std::istringstream fields(line);
    std::string slot, local, remote, state_hex, queues, timer, retransmits_hex, uid, timeout;
    std::uint64_t inode = 0;
    if (!(fields >> slot >> local >> remote >> state_hex)) continue;
    const auto l = endpoint(local, ipv6);
    const auto r = endpoint(remote, ipv6);
    unsigned state = 0;
    if (!l || !r || std::sscanf(state_hex.c_str(), "%x", &state) != 1) continue;
    TcpSocket s;
    std::tie(s.local, s.local_port) = *l;
    std::tie(s.remote, s.remote_port) = *r;
    s.state = state >= 1 && state <= kStates.size() ? kStates[state - 1] : fmt::format("state {}", state);
    unsigned retransmits = 0;
    if (fields >> queues >> timer >> retransmits_hex >> uid >> timeout >> inode &&
        std::sscanf(retransmits_hex.c_str(), "%x", &retransmits) == 1) {
      s.retransmits = static_cast<int>(retransmits);
      s.inode = inode;
    }
    out.push_back(std::move(s));
  }
  return out;
}

std::vector<PortUse> parse_proc_net_tcp(const std::string& text, std::uint16_t port, bool ipv6) {
  std::vector<PortUse> out;
  for (const auto& s : parse_tcp_table(text, ipv6)) {
    if (s.local_port != port) continue;
    PortUse use;
    use.listening = s.state == kStates[kListen - 1];
    use.state = s.state;
    if (!use.listening) use.remote = fmt::format("{}:{}", s.remote, s.remote_port);
    out.push_back(std::move(use));
  }
  return out;
}

std::vector<PortUse> sockets_on_port(std::uint16_t port) {
  std::vector<PortUse> out;
  for (const auto& [file, ipv6] : {std::pair{"/proc/net/tcp", false}, std::pair{"/proc/net/tcp6", true}}) {
    std::ifstream in(file);
    if (!in) continue;
    std::stringstream text;
    text << in.rdbuf();
    const auto found = parse_proc_net_tcp(text.str(), port, ipv6);
    out.insert(out.end(), found.begin(), found.end());
  }
  return out;
}

std::optional<PortUse> outbound_holder(const std::vector<PortUse>& uses) {
  if (uses.empty() || std::any_of(uses.begin(), uses.end(), [](const PortUse& u) { return u.listening; })) {
    return std::nullopt;
  }
  return uses.front();
}

std::optional<std::pair<int, int>> ephemeral_port_range() {
  std::ifstream in("/proc/sys/net/ipv4/ip_local_port_range");
  int low = 0, high = 0;
  if (!(in >> low >> high)) return std::nullopt;
  return std::pair{low, high};
}

}  // namespace ringmaster::net

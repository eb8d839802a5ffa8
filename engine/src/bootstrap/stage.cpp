#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <map>

#include "net/socket.h"
#include "ringmaster/tools/bootstrap.h"

namespace ringmaster {

std::string_view name_of(Stage stage) noexcept {
  static constexpr std::array<std::string_view, 11> names = {
      "RESOLVE_MASTER", "STORE_CONNECT",    "STORE_HANDSHAKE", "STORE_BARRIER",     "BOOTSTRAP_LISTEN",
      "BOOTSTRAP_RING", "ADDRESS_EXCHANGE", "TOPOLOGY",        "TRANSPORT_CONNECT", "CALIBRATE",
      "READY"};
  return names[static_cast<std::size_t>(stage)];
}

std::string StageFailure::joined_text() const {
  if (joined < 0) return {};
  std::string text = fmt::format("{}/{} joined", joined, world_size);
  if (!missing.empty()) {
    text += "; missing: ";
    for (std::size_t i = 0; i < missing.size(); ++i) {
      if (i == 8 && missing.size() > 10) {
        text += fmt::format(", ... ({} more)", missing.size() - 8);
        break;
      }
      text += (i > 0 ? ", " : "") + std::to_string(missing[i]);
    }
  }
  return text;
}

std::string StageFailure::to_string() const {
  std::string out = fmt::format("{} failed on rank {}: {}", name_of(stage), rank, summary);
  if (peer_rank >= 0) out += fmt::format("\n  peer rank:  {}", peer_rank);
  if (!local_address.empty()) out += fmt::format("\n  local:      {}", local_address);
  if (!remote_address.empty()) out += fmt::format("\n  remote:     {}", remote_address);
  if (!errno_text.empty()) out += fmt::format("\n  error:      {}", errno_text);
  if (timeout.count() > 0) {
    out +=
        fmt::format("\n  waited:     {:.3f} s of {:.3f} s allowed", elapsed.count() / 1000.0, timeout.count() / 1000.0);
  }
  if (joined >= 0) out += fmt::format("\n  ranks:      {}", joined_text());
  if (!hint.empty()) out += fmt::format("\n  hint:       {}", hint);
  return out;
}

namespace {

// "198.18.0.1:29500" -> "198.18.0.1", "[fd00::1]:29500" -> "fd00::1";
// "*:29500" (every address) -> "*".
std::string host_of(const std::string& address) {
  if (const auto a = net::SocketAddress::parse(address)) return a->host();
  return address.substr(0, address.rfind(':'));
}

std::string ranks_text(const std::vector<int>& ranks) {
  return fmt::format("rank{} {}", ranks.size() == 1 ? "" : "s", fmt::join(ranks, ", "));
}

// When the hosts ranks looked for the store at are of both address
// families: what that means and what to do, else empty.
std::string families_note(const std::vector<std::string>& hosts) {
  const auto v6 = [](const std::string& h) { return h.find(':') != std::string::npos; };
  if (std::all_of(hosts.begin(), hosts.end(), v6) || std::none_of(hosts.begin(), hosts.end(), v6)) return {};
  return " The ranks mix IPv4 and IPv6 (MASTER_ADDR resolves to an IPv6 address on some hosts and an IPv4 one on "
         "others: torch's Gloo asserts on this, 'ss_family 2 vs 10'). Give MASTER_ADDR as an address of one "
         "family, or set NCCL_SOCKET_FAMILY=AF_INET (or AF_INET6) on every rank.";
}

// Ranks whose hosts' connection-tracking tables were full, read against
// the ranks that got no answer from those hosts: one sentence a full host.
std::vector<std::string> full_conntrack_tables(const std::vector<StageFailure>& failures) {
  std::vector<std::string> out;
  for (const auto& full : failures) {
    if (full.conntrack.empty()) continue;
    const std::string host = full.local_address.empty() ? std::string() : host_of(full.local_address);
    std::vector<int> unanswered;  // other ranks whose connects to that host timed out
    for (const auto& f : failures) {
      if (f.rank != full.rank && !host.empty() && !f.remote_address.empty() && host_of(f.remote_address) == host &&
          f.errno_text.find("ETIMEDOUT") != std::string::npos)
        unanswered.push_back(f.rank);
    }
    out.push_back(fmt::format(
        "rank {}'s host{} drops new connections: its connection-tracking table is full ({}){}. Raise "
        "net.netfilter.nf_conntrack_max there, or find what holds the entries (conntrack -S); no firewall rule "
        "is needed to explain it.",
        full.rank, host.empty() || host == "*" ? "" : " (" + host + ")", full.conntrack,
        unanswered.empty() ? "" : fmt::format(", so {} got no answer there", ranks_text(unanswered))));
  }
  return out;
}

}  // namespace

std::vector<std::string> read_together(const std::vector<StageFailure>& failures) {
  std::vector<std::string> out = full_conntrack_tables(failures);
  // The rank that served the store: it timed out at the barrier and says
  // where it listened.
  const auto server = std::find_if(failures.begin(), failures.end(), [](const StageFailure& f) {
    return f.stage == Stage::store_barrier && !f.local_address.empty();
  });
  std::map<std::string, std::vector<int>> reached;  // where ranks looked for the store -> those ranks
  std::map<std::string, std::vector<int>> refused;  // of those, the ones refused there
  for (const auto& f : failures) {
    if (f.stage != Stage::store_connect || f.remote_address.empty()) continue;
    const std::string host = host_of(f.remote_address);
    reached[host].push_back(f.rank);
    // A reset, or an ICMP "administratively prohibited" (firewalld's
    // default reject, read as "No route to host").
    if (f.errno_text.find("ECONNREFUSED") != std::string::npos ||
        f.errno_text.find("EHOSTUNREACH") != std::string::npos)
      refused[host].push_back(f.rank);
  }
  if (server == failures.end()) {
    if (reached.size() > 1) {
      std::vector<std::string> where, hosts;
      for (const auto& [host, ranks] : reached) {
        where.push_back(fmt::format("{} at {}", ranks_text(ranks), host));
        hosts.push_back(host);
      }
      out.push_back(fmt::format(
          "the ranks looked for the store at different addresses ({}): MASTER_ADDR resolves differently on "
          "different hosts. Compare getent hosts MASTER_ADDR on each node (/etc/hosts, DNS), or give rank 0's IP "
          "address.{}",
          fmt::join(where, "; "), families_note(hosts)));
    }
    return out;
  }
  const std::string listen_host = host_of(server->local_address);
  const auto port = server->local_address.substr(server->local_address.rfind(':') + 1);
  for (const auto& [host, ranks] : reached) {
    if (listen_host == "*" || host == listen_host) {
      if (const auto it = refused.find(host); it != refused.end()) {
        out.push_back(fmt::format(
            "rank {} listened on {} for the store the whole time, yet {} {} refused there: a firewall rule "
            "rejects their connections (a REJECT rule: a TCP reset reads as 'connection refused', firewalld's ICMP "
            "answer as 'no route to host'), not a missing listener. Allow {}/tcp from the other nodes.",
            server->rank, server->local_address, ranks_text(it->second), it->second.size() == 1 ? "was" : "were",
            port));
      }
      continue;
    }
    out.push_back(fmt::format(
        "{} looked for the store at {}, but rank {} serves it at {}{}: MASTER_ADDR resolves to different addresses "
        "on different hosts. Compare getent hosts MASTER_ADDR on each node (/etc/hosts, DNS), or give rank 0's IP "
        "address.{}",
        ranks_text(ranks), host, server->rank, server->local_address,
        net::is_loopback_host(listen_host) ? ", a loopback address no other host can reach (Debian's /etc/hosts maps a "
                                             "host's own name to 127.0.1.1)"
                                           : "",
        families_note({host, listen_host})));
  }
  return out;
}

StageError::StageError(StageFailure failure)
    : Error(failure.category, failure.to_string()), failure_(std::move(failure)) {}

}  // namespace ringmaster

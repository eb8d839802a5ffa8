#include "bootstrap/hints.h"

#include <fmt/format.h>

#include <cerrno>

#include "net/socket.h"

namespace ringmaster {

std::string hint_unresolvable_master(const std::string& master_addr) {
  return fmt::format(
      "MASTER_ADDR '{}' has no address. In Kubernetes it is usually the name of a headless Service: check that the "
      "Service exists and has a ready Pod (kubectl get svc,endpoints {}). Elsewhere check the name in DNS or "
      "/etc/hosts, or use rank 0's IP address.",
      master_addr, master_addr);
}

std::string hint_store_port_in_use(std::uint16_t port, const std::vector<net::PortUse>& holders,
                                   std::optional<std::pair<int, int>> ephemeral) {
  const bool in_range = ephemeral && port >= ephemeral->first && port <= ephemeral->second;
  const std::string range = ephemeral ? fmt::format("{}-{}", ephemeral->first, ephemeral->second) : std::string();
  if (const auto first = net::outbound_holder(holders)) {
    return fmt::format(
        "MASTER_PORT {0} is the source port of an outbound connection here ({1} to {2}{3}), not a listener: "
        "{4}. Reserve the port for the job (sysctl -w net.ipv4.ip_local_reserved_ports={0}), or pick a "
        "MASTER_PORT outside the range.",
        port, first->state, first->remote, holders.size() > 1 ? fmt::format(", and {} more", holders.size() - 1) : "",
        in_range ? fmt::format("the kernel hands out ports {} to connect() (net.ipv4.ip_local_port_range) and gave it "
                               "this one before rank 0 could listen",
                               range)
                 : "a process bound it for a connection of its own");
  }
  std::string hint = fmt::format(
      "MASTER_PORT {} is already taken on this host: another job or a stale process listens there (ss -ltnp "
      "'sport = :{}'). Pick another MASTER_PORT for every rank, or stop the old process.",
      port, port);
  if (in_range) {
    hint += fmt::format(
        " The port also lies inside net.ipv4.ip_local_port_range {}, where any outbound connection can be handed it.",
        range);
  }
  return hint;
}

std::string hint_store_port_in_use(std::uint16_t port) {
  return hint_store_port_in_use(port, net::sockets_on_port(port), net::ephemeral_port_range());
}

std::string hint_store_connect(int err, std::uint16_t master_port) {
  switch (err) {
    case ETIMEDOUT:
      return fmt::format(
          "Connection attempts to MASTER_PORT {} got no answer at all: packets are being dropped on the way, by a "
          "firewall or a cloud security group. On EKS check that the node security group still allows "
          "1025-65535/tcp from itself (the self-referencing rule): MASTER_PORT {} lies inside that range, so losing "
          "the rule breaks the store connect before any collective stage starts.",
          master_port, master_port);
    case ECONNREFUSED:
      return fmt::format(
          "MASTER_ADDR answered MASTER_PORT {0} with a reset: nothing listens there (rank 0 has not started yet or "
          "has exited, or the ranks disagree on MASTER_PORT/MASTER_ADDR), or a firewall rule on the way rejects "
          "the connection (REJECT with tcp-reset reads the same here). If rank 0 says it listens on {0} and waits "
          "for this rank, it is a rule: allow {0}/tcp from the other nodes.",
          master_port);
    case EHOSTUNREACH:
    case ENETUNREACH:
      return "There is no route from this host to MASTER_ADDR: check that both hosts share a network and that "
             "MASTER_ADDR is rank 0's address on it (ip route get <MASTER_ADDR>). When that host is up, a firewall "
             "that rejects with ICMP (firewalld's default) reads the same: check its rules for MASTER_PORT.";
    default:
      return "The TCP connection to the store failed; check MASTER_ADDR/MASTER_PORT and the network between the hosts.";
  }
}

std::string hint_store_rejected(std::uint16_t master_port, int host_rank, int host_pid) {
  return fmt::format(
      "Rank {} (pid {}) listens on MASTER_PORT {} and this rank's connects to it are answered with a reset: a "
      "firewall rule rejects them (nftables/iptables REJECT with tcp-reset, a host firewall, a network policy). Allow "
      "{}/tcp from the other ranks' hosts.",
      host_rank, host_pid, master_port, master_port);
}

std::string hint_store_handshake() {
  return "A TCP connection to MASTER_PORT was accepted but no TCPStore answered: the port belongs to another "
         "service, or the store's process is hung. Check what listens there (ss -ltnp) and rank 0's state.";
}

std::string hint_world_size_mismatch() {
  return "Every rank must be started with the same WORLD_SIZE (torchrun: --nnodes x --nproc-per-node). Compare the "
         "launch commands of all nodes.";
}

std::string hint_duplicate_rank(int rank) {
  return fmt::format(
      "Two processes were started as RANK={}: check --node-rank / RANK on every node, and that an old job with the "
      "same MASTER_ADDR:MASTER_PORT is not still running.",
      rank);
}

std::string hint_barrier_timeout(const std::vector<int>& missing, const std::string& store_listen,
                                 std::size_t connections) {
  std::string ranks;
  for (std::size_t i = 0; i < missing.size() && i < 16; ++i)
    ranks += (i > 0 ? ", " : "") + std::to_string(missing[i]);
  std::string hint = fmt::format(
      "{} {} never reached the store. Either they were never started (WORLD_SIZE larger than the processes "
      "launched; a Pod still Pending), or they crashed or are stuck before init: check their logs. If they log a "
      "STORE_CONNECT failure, their path to MASTER_PORT is blocked.",
      missing.size() == 1 ? "Rank" : "Ranks", ranks);
  if (!store_listen.empty()) {
    hint += fmt::format(
        " This rank hosted the store and listened on {} the whole time ({} connection{} open to it at the end): "
        "if they were refused there, a firewall rule rejects them (a TCP reset), since a listener was there; if "
        "they timed out, a rule drops them.",
        store_listen, connections, connections == 1 ? "" : "s");
    if (const auto at = net::SocketAddress::parse(store_listen); at && at->is_loopback()) {
      hint += fmt::format(
          " {} is a loopback address: MASTER_ADDR resolves to loopback on this host (Debian's /etc/hosts maps the "
          "host's own name to 127.0.1.1), so no other host can reach the store. Set MASTER_ADDR to this host's "
          "address on the job's network.",
          store_listen);
    }
  }
  return hint;
}

std::string hint_address_never_published(int rank) {
  return fmt::format(
      "Rank {0} joined the store but did not publish the address it listens on: it failed or stuck before it could "
      "listen (its BOOTSTRAP_LISTEN: no port free in RINGMASTER_PORT_RANGE, no interface named by "
      "NCCL_SOCKET_IFNAME). Check rank {0}'s log.",
      rank);
}

std::string hint_store_lost() {
  return "The connection to the store broke: the store's host (rank 0) probably exited or was killed. Check rank 0.";
}

std::string hint_etcd_unresolvable(const std::string& host) {
  return fmt::format(
      "RINGMASTER_STORE names the etcd host '{}', which this host cannot resolve: check the name (getent hosts {}) "
      "or give an address.",
      host, host);
}

std::string hint_etcd_connect(int err, const std::string& host, std::uint16_t port) {
  switch (err) {
    case ETIMEDOUT:
      return fmt::format(
          "Connection attempts to etcd at {}:{} got no answer at all: a firewall or security group drops them. "
          "etcd's client port must be open from every node.",
          host, port);
    case ECONNREFUSED:
      return fmt::format(
          "Nothing listens at {}:{}: etcd is not running there, or RINGMASTER_STORE names another port than its "
          "client port (2379 unless --listen-client-urls says otherwise). etcdctl --endpoints {}:{} endpoint health "
          "tells.",
          host, port, host, port);
    default:
      return "The TCP connection to etcd failed; check RINGMASTER_STORE's host and port and the network to it.";
  }
}

std::string hint_etcd_handshake() {
  return "A TCP connection to RINGMASTER_STORE's port was accepted but no etcd v3 JSON gateway answered /version: the "
         "port belongs to another service (etcd's peer port, 2380, is not its client port, 2379), or the server is "
         "hung. etcdctl endpoint status tells.";
}

std::string hint_etcd_lost() {
  return "The connection to etcd broke or etcd stopped answering: check its health (etcdctl endpoint health) and its "
         "log. Keys of ranks that died expire with their leases.";
}

std::string hint_no_interface(const std::string& ifname_spec) {
  if (ifname_spec.empty()) return "No usable network interface was found; set NCCL_SOCKET_IFNAME to one that exists.";
  return "Set NCCL_SOCKET_IFNAME to one of the interfaces listed (prefixes match: 'eth' matches eth0; '=eth0' is "
         "exact; '^docker' excludes). Interface names differ between instance types and container runtimes.";
}

std::string hint_listen_failed(std::uint16_t lo, std::uint16_t hi) {
  if (lo == 0)
    return "Could not open a listening socket; check the interface address and the process's limits (ulimit -n).";
  // What holds the range's ports: outbound connections the kernel handed
  // them (the range inside ip_local_port_range), or listeners.
  int outbound = 0, listeners = 0;
  std::string example;
  for (int port = lo; port <= hi && port < lo + 64; ++port) {
    const auto uses = net::sockets_on_port(static_cast<std::uint16_t>(port));
    if (const auto holder = net::outbound_holder(uses)) {
      if (outbound++ == 0)
        example = fmt::format("port {} by a connection {} to {}", port, holder->state, holder->remote);
    } else if (!uses.empty()) {
      ++listeners;
    }
  }
  const auto ephemeral = net::ephemeral_port_range();
  const bool overlaps = ephemeral && lo <= ephemeral->second && hi >= ephemeral->first;
  std::string hint = fmt::format("Every port in RINGMASTER_PORT_RANGE={}-{} is taken on this interface", lo, hi);
  if (outbound > 0) {
    hint += fmt::format(": {} by outbound connections ({}), {} by listeners", outbound, example, listeners);
  }
  if (overlaps) {
    hint += fmt::format(
        ". The range lies inside net.ipv4.ip_local_port_range {}-{}, where the kernel hands ports to outbound "
        "connections: reserve it for the job (sysctl -w net.ipv4.ip_local_reserved_ports={}-{}) or move it outside",
        ephemeral->first, ephemeral->second, lo, hi);
  }
  return hint + "; or widen the range.";
}

std::string hint_ring_connect(int err, std::uint16_t master_port, const std::string& ifname) {
  switch (err) {
    case ETIMEDOUT:
      return fmt::format(
          "The store on MASTER_PORT {} works, but connections to the peer's bootstrap port got no answer: ephemeral "
          "ports are blocked between the hosts while MASTER_PORT is allowed (a security group or firewall that "
          "opens only MASTER_PORT). Allow 1025-65535/tcp between the nodes, or set RINGMASTER_PORT_RANGE and open "
          "exactly that range.",
          master_port);
    case ECONNREFUSED:
      return "The peer's bootstrap listener is gone: that rank probably crashed after publishing its address. "
             "Check its log.";
    case EHOSTUNREACH:
    case ENETUNREACH:
      return fmt::format(
          "The interface chosen here ({}) has no route to the peer's address. Set NCCL_SOCKET_IFNAME to the "
          "interface on the network the nodes share.",
          ifname);
    default:
      return "The bootstrap connection to the next rank failed; check the network between the hosts.";
  }
}

std::string hint_ring_accept(int prev) {
  return fmt::format(
      "Rank {} never connected to this rank's bootstrap port: its outbound connect is failing (see its log for a "
      "BOOTSTRAP_RING error), or inbound traffic to this port is blocked here.",
      prev);
}

std::string hint_exchange_broken(int prev) {
  return fmt::format("Rank {} stopped talking during the address exchange: it probably died. Check its log.", prev);
}

}  // namespace ringmaster

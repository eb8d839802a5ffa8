// The hints attached to init failures: the likely cause and the next step,
// in the words of the setups where they happen (Kubernetes headless
// Services, EKS security groups, torchrun's environment).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "net/port_use.h"

namespace ringmaster {

std::string hint_unresolvable_master(const std::string& master_addr);
// `holders`: the sockets on the port here; `ephemeral`: the kernel's
// ip_local_port_range. An outbound connection that was handed the port
// is told apart from another listener.
std::string hint_store_port_in_use(std::uint16_t port, const std::vector<net::PortUse>& holders,
                                   std::optional<std::pair<int, int>> ephemeral);
// The same, with this host's sockets and range.
std::string hint_store_port_in_use(std::uint16_t port);
std::string hint_store_connect(int err, std::uint16_t master_port);
// A connect reset although the store's host is seen listening on
// MASTER_PORT (a watched job): a rule rejects it.
std::string hint_store_rejected(std::uint16_t master_port, int host_rank, int host_pid);
std::string hint_store_handshake();
std::string hint_world_size_mismatch();
std::string hint_duplicate_rank(int rank);
// `store_listen`: where this rank listened as the store's host (empty on
// the other ranks), with `connections` open to it at the end.
std::string hint_barrier_timeout(const std::vector<int>& missing, const std::string& store_listen = {},
                                 std::size_t connections = 0);
std::string hint_store_lost();
// The same moments with the keys in etcd (RINGMASTER_STORE=etcd://...).
std::string hint_etcd_unresolvable(const std::string& host);
std::string hint_etcd_connect(int err, const std::string& host, std::uint16_t port);
std::string hint_etcd_handshake();
std::string hint_etcd_lost();
std::string hint_no_interface(const std::string& ifname_spec);
std::string hint_listen_failed(std::uint16_t lo, std::uint16_t hi);
// A rank that joined the store and never published its bootstrap address
// while the store still answered (a wait that timed out, or this rank
// hosts the store): it failed or stuck before it listened.
std::string hint_address_never_published(int rank);
std::string hint_ring_connect(int err, std::uint16_t master_port, const std::string& ifname);
std::string hint_ring_accept(int prev);
std::string hint_exchange_broken(int prev);

}  // namespace ringmaster

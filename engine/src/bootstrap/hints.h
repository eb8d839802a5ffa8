// The hints attached to init failures: the likely cause and the next step,
// in the words of the setups where they happen (Kubernetes headless
// Services, EKS security groups, torchrun's environment).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ringmaster {

std::string hint_unresolvable_master(const std::string& master_addr);
std::string hint_store_port_in_use(std::uint16_t port);
std::string hint_store_connect(int err, std::uint16_t master_port);
std::string hint_store_handshake();
std::string hint_world_size_mismatch();
std::string hint_duplicate_rank(int rank);
std::string hint_barrier_timeout(const std::vector<int>& missing);
std::string hint_store_lost();
// The same moments with the keys in etcd (RINGMASTER_STORE=etcd://...).
std::string hint_etcd_unresolvable(const std::string& host);
std::string hint_etcd_connect(int err, const std::string& host, std::uint16_t port);
std::string hint_etcd_handshake();
std::string hint_etcd_lost();
std::string hint_no_interface(const std::string& ifname_spec);
std::string hint_listen_failed(std::uint16_t lo, std::uint16_t hi);
std::string hint_ring_connect(int err, std::uint16_t master_port, const std::string& ifname);
std::string hint_ring_accept(int prev);
std::string hint_exchange_broken(int prev);

}  // namespace ringmaster

// How a rank finds its peers: torchrun's environment, or set explicitly.
//
// Config::from_env reads RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE,
// MASTER_ADDR, MASTER_PORT as torchrun sets them, plus NCCL_SOCKET_IFNAME,
// NCCL_SOCKET_FAMILY, RINGMASTER_PORT_RANGE, RINGMASTER_STORE_TIMEOUT and
// RINGMASTER_BOOTSTRAP_TIMEOUT (seconds), RINGMASTER_HOST_STORE and
// RINGMASTER_RUN_ID. Every value is validated; a bad one throws
// Error(config) naming the variable. A Config is a plain value.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace ringmaster {

enum class StoreHosting : std::uint8_t {
  automatic,  // rank 0 hosts when MASTER_ADDR is one of its own addresses (as torchrun)
  host,       // this process hosts the store (only meaningful on rank 0)
  connect,    // the store is elsewhere (a torchrun agent, `ringmaster-cli store serve`)
};

struct Config {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  int local_world_size = 1;
  std::string master_addr = "127.0.0.1";
  std::uint16_t master_port = 29500;
  StoreHosting store_hosting = StoreHosting::automatic;
  std::chrono::milliseconds store_timeout{std::chrono::seconds(300)};
  std::chrono::milliseconds bootstrap_timeout{std::chrono::seconds(120)};
  std::string socket_ifname;        // NCCL_SOCKET_IFNAME; empty: choose automatically
  std::string socket_family;        // "", "AF_INET" or "AF_INET6"
  std::uint16_t port_range_lo = 0;  // RINGMASTER_PORT_RANGE=lo-hi for bootstrap listeners;
  std::uint16_t port_range_hi = 0;  // 0-0: ephemeral
  std::string run_id = "default";   // prefixes every store key, so runs sharing a store stay apart

  // Reads the environment; throws Error(config) naming a missing or bad variable.
  static Config from_env();
  // Throws Error(config) when fields disagree (rank >= world size, ...).
  void validate() const;
};

}  // namespace ringmaster

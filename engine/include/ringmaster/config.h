// How a rank finds its peers: torchrun's environment, a launcher's
// (Open MPI, PMI, Slurm), or set explicitly.
//
// Config::from_env reads RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE,
// MASTER_ADDR, MASTER_PORT as torchrun sets them. Without RANK and
// WORLD_SIZE it takes them from the launcher that started the process, in
// this order: Open MPI (OMPI_COMM_WORLD_*), PMI (PMI_RANK, PMI_SIZE, as
// MPICH, Intel MPI and srun --mpi=pmi2 set them), Slurm's srun
// (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID; MASTER_ADDR, when unset, is
// the first host of the step's node list). A process that a launcher
// counts among several but that cannot tell its rank (a Slurm batch
// script outside srun) is refused rather than run as one rank. Under
// torchrun's agent store (TORCHELASTIC_USE_AGENT_STORE=True) rank 0 never
// hosts the store, and store keys carry torchrun's run id and restart
// count, as torch's own process groups do. It also reads NCCL_SOCKET_IFNAME,
// NCCL_SOCKET_FAMILY, RINGMASTER_PORT_RANGE, RINGMASTER_STORE_TIMEOUT and
// RINGMASTER_BOOTSTRAP_TIMEOUT (seconds), RINGMASTER_HOST_STORE,
// RINGMASTER_RUN_ID and RINGMASTER_STORE (etcd://host:port/prefix puts the
// rendezvous keys in etcd instead). Every value is validated; a bad one throws
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
  int group_rank = 0;               // the node's index among the job's nodes (GROUP_RANK, SLURM_NODEID)
  // RINGMASTER_STORE=etcd://host[:port][/prefix][?lease=S]: the keys live in
  // etcd (v3) under the prefix, each rank's under a lease of its own, and
  // MASTER_ADDR/MASTER_PORT are not used. An empty etcd_host: a TCPStore.
  std::string etcd_host;
  std::uint16_t etcd_port = 2379;
  std::string etcd_prefix = "/ringmaster";
  std::chrono::seconds etcd_lease{60};
  // Where rank and size came from, for the log: "RANK/WORLD_SIZE",
  // "Open MPI", "PMI", "Slurm", or "none" (one rank by default).
  std::string launcher = "none";
  std::string master_addr_from = "default";  // "MASTER_ADDR", "SLURM_STEP_NODELIST", ...

  // Reads the environment; throws Error(config) naming a missing or bad variable.
  static Config from_env();
  // Throws Error(config) when fields disagree (rank >= world size, ...).
  void validate() const;
  // One line for the log: rank, size, launcher, store address and run id.
  std::string describe() const;
};

// The first host of a Slurm node list ("gpu-[03-05,9],login" gives
// "gpu-03"); throws Error(config) naming the variable when it cannot parse.
std::string first_slurm_host(const std::string& variable, const std::string& nodelist);
// A node's task count from SLURM_TASKS_PER_NODE ("2(x3),1"); 0 when the
// node index is past the list.
int slurm_tasks_on_node(const std::string& tasks_per_node, int node);

}  // namespace ringmaster

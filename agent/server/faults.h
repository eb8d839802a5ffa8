// Fault injection (opt-in, --allow-fault-injection): the ways clouds break
// connectivity, made real in the agent's network namespace.
//
//   drop_ports    {ports: "1025-65535", direction: in|out|both}   nftables
//   drop_address  {address: "198.18.0.3", direction: in|out|both} nftables
//   delay         {interface: "eth0", ms: 50}                     tc netem
//   loss          {interface: "eth0", percent: 2}                 nftables numgen (what it sends)
//   rate          {interface: "eth0", mbit: 100}                  tc htb (what it sends; ACKs pass)
//   shm_size      {bytes: 65536}                                  tmpfs over /dev/shm
//   limit         {resource: nofile|memlock, value: 64}           setrlimit in each new rank
//
// shm_size shrinks /dev/shm as a container runtime's default does
// (Docker's 64 MiB): only inside the mount namespace the agent makes for
// itself when fault injection is allowed (fails closed when it cannot),
// never for a whole machine.
//
// nftables rules live in a table of this agent's own
// (inet ringmaster_agent_<pid>_<start time>); the agent's control and metrics ports are
// exempt so clients keep reaching it. Without CAP_NET_ADMIN (or without
// nft) the drops fall back to the engine's connect filter in the
// environment of ranks started afterwards, which is said in the reply.
// Every fault is reverted on fault_clear, when a run that started under it
// ends, and when the agent exits; tables left by a killed agent are removed
// when the next agent starts.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ringmaster/agent/events.h"
#include "ringmaster/agent/fault.h"
#include "ringmaster/agent/requests.h"
#include "spawn.h"

namespace ringmaster::agent {

// The handle of every root qdisc the agent adds ("RG"): at start only
// qdiscs with it are removed, never one somebody else put there.
inline constexpr const char* kQdiscHandle = "5247:";

// Deletes DEV's root qdisc only if it is ours: the kernel refuses a delete
// naming a handle that is not the root's ("Invalid handle"), so an
// operator's qdisc there is never touched. True when one was deleted.
bool delete_our_qdisc(const std::string& dev);

class FaultManager {
 public:
  // enabled: --allow-fault-injection. Probes nft, removes stale tables,
  // and removes the qdiscs an agent that died left behind, as recorded in
  // STATE_DIR/faults.json (only qdiscs with our handle, kQdiscHandle).
  FaultManager(bool enabled, std::vector<std::uint16_t> exempt_ports, std::string state_dir = {});
  ~FaultManager();
  FaultManager(const FaultManager&) = delete;
  FaultManager& operator=(const FaultManager&) = delete;

  // Applies a fault (checked by parse_fault); returns what to tell the
  // client and the subscribers. Throws Error(config) naming what the host
  // lacks or what clashes with a fault already there.
  events::FaultApplied add(const FaultSpec& fault);
  // Reverts one fault, or all; returns what it reverted. Throws
  // Error(config) for an unknown id.
  std::vector<events::FaultReverted> clear(std::optional<int> id);
  // A run starts: the active faults are now tied to it.
  void run_started(const std::string& run_id);
  // That run ended: revert the faults tied to it, and return them.
  std::vector<events::FaultReverted> run_ended(const std::string& run_id);
  // For inventory.
  std::vector<ActiveFault> active() const;
  // RINGMASTER_CONNECT_FILTER for new ranks when drops fell back to it.
  std::string connect_filter() const;
  // The resource limits new ranks start under (limit faults).
  std::vector<RankLimit> rank_limits() const;
  // The memory new ranks may use (a memory_limit fault); none without one.
  std::optional<std::int64_t> rank_memory_limit() const;
  std::string table_name() const { return table_; }

 private:
  struct Fault {
    int id = 0;
    FaultSpec spec;
    std::string mechanism;  // nftables, netem, htb, connect_filter, tmpfs, rlimit
    std::vector<std::string> runs;
  };
  void apply_nft();
  // A limit fault's note, once it is known to clash with no other and to
  // lower what ranks inherit; throws Error(config) otherwise.
  std::string check_limit(const Limit& limit) const;
  // Likewise for a memory_limit fault: one at a time, and a memory cgroup
  // the agent can make.
  std::string check_memory_limit(const MemoryLimit& limit) const;
  void revert(const Fault& f);
  // The interface of a tc fault (delay, rate); empty for the others.
  static std::string tc_interface(const Fault& f);
  // STATE_DIR/faults.json: the interfaces that carry a qdisc of ours now.
  void record_qdiscs() const;

 public:
  // What agents that are no longer running left behind: their nftables
  // tables and the qdiscs STATE_DIR/faults.json records. Returns what it
  // removed, one line each. The agent does it at start; systemd's
  // ExecStopPost does it after a stop (ringmaster-agent --clear-faults).
  static std::vector<std::string> remove_left_behind(const std::string& state_dir);

 private:
  std::string state_dir_;
  bool enabled_ = false;
  bool own_mounts_ = false;  // the agent made a mount namespace of its own
  std::string mount_problem_;
  bool nft_ = false;
  std::string nft_problem_;
  std::string table_;
  std::vector<std::uint16_t> exempt_;
  std::map<int, Fault> faults_;
  int next_id_ = 1;
  bool table_exists_ = false;
};

}  // namespace ringmaster::agent

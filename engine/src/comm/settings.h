// Internal: the settings every rank of a communicator must share, and how
// the ranks agree on them.
//
// Each rank resolves its own from CommOptions and the environment before
// the bootstrap (LocalSettings::resolve, which throws Error(config) naming
// the variable), sends them with its address during ADDRESS_EXCHANGE
// (PeerInfo::settings), and every rank then computes the same agreement
// from all of them (agree):
//
// - channels: the smallest maximum wins, as NCCL takes the minimum channel
//   count; the floor is the largest minimum, capped by that;
// - NCCL_BUFFSIZE and RINGMASTER_PAIR_BYTES: the smallest wins;
// - RINGMASTER_CUDA_IPC: on only when every rank asks and all are on one
//   host;
// - NCCL_ALGO, NCCL_PROTO (or --algo, --proto) and RINGMASTER_TREE_NODES
//   cannot be reconciled: ranks that differ fail at init, naming the
//   variable and two ranks that differ.
//
// Without this, a rank with NCCL_MAX_NCHANNELS=1 and one with 2 waited for
// each other's channels until the bootstrap timeout.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ringmaster/comm.h"
#include "ringmaster/tools/bootstrap.h"
#include "ringmaster/tools/tuner.h"

namespace ringmaster::comm {

// What one rank asks for.
struct LocalSettings {
  int min_channels = 1;
  int max_channels = 1;
  // Neither NCCL_MAX_NCHANNELS nor the option set the maximum and the host
  // has two cores or more: over the network it may be raised to 2.
  bool may_raise_channels = false;
  std::size_t buffsize = 4 << 20;
  std::size_t pair_bytes = 16384;
  bool pair_bytes_given = false;  // RINGMASTER_PAIR_BYTES is set
  bool shm_disabled = false;      // the job's NCCL_SHM_DISABLE
  bool cuda_ipc = false;          // CommOptions::cuda_ipc, else RINGMASTER_CUDA_IPC
  std::string tree_nodes = "auto";
  // A fingerprint of the NCCL_TOPO_FILE this rank reads, empty without
  // one: rings follow the topology search only when every rank has the
  // same (comm/topology_stage.cpp).
  std::string topology_key;
  tune::Selection algorithms;
  tune::Selection protocols;

  // This rank's own, not exchanged:
  bool shared_memory = true;                     // CommOptions::shared_memory, else NCCL_SHM_DISABLE unset
  std::string net;                               // NCCL_NET (or the option) in lower case: "", "socket" or "ofi"
  std::string spin_yield = "auto";               // RINGMASTER_SPIN_YIELD: auto, 0 or 1
  std::chrono::microseconds spin{50};            // RINGMASTER_SOCKET_SPIN
  bool spin_given = false;                       // RINGMASTER_SOCKET_SPIN is set
  std::size_t inline_bytes = 65536;              // RINGMASTER_INLINE_BYTES
  bool inline_bytes_given = false;               // RINGMASTER_INLINE_BYTES is set
  std::uint32_t sockets_per_channel = 1;         // RINGMASTER_NSOCKS_PER_CHANNEL, 1 to 8
  std::size_t shm_fifo_bytes = 1 << 20;          // RINGMASTER_SHM_FIFO_BYTES, at least 4096
  std::chrono::milliseconds timeout{60000};      // CommOptions::timeout, else RINGMASTER_COLL_TIMEOUT
  std::chrono::milliseconds stall_after{10000};  // CommOptions::stall_after, else RINGMASTER_STALL_S
  std::optional<std::uint64_t> hold_at_call;     // RINGMASTER_FAULT_HOLD_AT_CALL

  // From the options, falling back on the environment; throws
  // Error(config) naming the variable for a value out of range.
  static LocalSettings resolve(const CommOptions& options);

  // One word of printable characters (PeerInfo::settings) and back;
  // decode returns nothing for a malformed word.
  std::string encode() const;
  struct Wire;
  static std::optional<Wire> decode(const std::string& word);
};

// What a rank sent: numbers as they were, the selections as their
// allowed_key() and their text.
struct LocalSettings::Wire {
  int min_channels = 1;
  int max_channels = 1;
  bool may_raise_channels = false;
  std::size_t buffsize = 0;
  std::size_t pair_bytes = 0;
  bool pair_bytes_given = false;
  bool shm_disabled = false;
  bool cuda_ipc = false;  // absent from an older rank's word: not asked
  std::string net;        // NCCL_NET: "", "socket" or "ofi"
  std::string tree_nodes;
  std::string topology_key;
  std::string algorithms_key, algorithms_text;
  std::string protocols_key, protocols_text;
};

// What every rank uses.
struct AgreedSettings {
  int min_channels = 1;
  int max_channels = 1;
  std::size_t buffsize = 0;
  std::size_t pair_bytes = 0;
  bool pair_bytes_given = false;  // by any rank: then it is not raised for 2-rank sockets
  bool same_topology = false;     // every rank read the same NCCL_TOPO_FILE
  bool cuda_ipc = false;          // every rank asked for it, all on one host
  // Where ranks asked for different values and which won, for the log;
  // empty when they all asked alike.
  std::vector<std::string> reconciled;
};

// The agreement from every rank's PeerInfo::settings: `firsts` holds the
// lowest rank of each different settings word, in rank order (rank 0
// first), of `nranks` ranks. Throws Error(config) when ranks differ on
// what cannot be reconciled, or a rank's settings cannot be read.
AgreedSettings agree(const std::vector<PeerInfo>& firsts, int nranks, bool several_hosts);
// The same from a bootstrap's settings groups, their PeerInfo read from
// the store (one record, for one settings word, when all ranks agree).
AgreedSettings agree(Bootstrap& bootstrap);

// NCCL_NET's value as NCCL and its plugins spell it ("AWS Libfabric", IB,
// Socket, ...) mapped to "", "socket" or "ofi"; Error(config) otherwise.
std::string network_named(const std::string& given);

}  // namespace ringmaster::comm

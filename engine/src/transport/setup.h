// Connection set-up (the TRANSPORT_CONNECT stage): the connections of a
// communicator's rings and what carries each.
//
// Every connection starts as a socket through the peer's bootstrap
// listener. The opening rank says a Hello and an Offer: each transport in
// the table (transports.h, in priority order: shared memory, libfabric,
// sockets) adds what it can offer to this peer. The accepting rank asks
// each transport in the same order whether it takes the offer; the first
// that does makes the connection, and the Answer says which (and, on one
// host, why shared memory was not used). Answers go back only after a
// rank has accepted all of its connections, so no rank waits on another
// that is itself still connecting. Direct connections (trees, all_to_all,
// point-to-point) are made the same way by DirectConnections (direct.h)
// when first needed. docs/transports.md describes the exchange.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "ringmaster/tools/bootstrap.h"
#include "transport/link.h"

namespace ringmaster::transport {

// What this rank allows; resolved and checked before the bootstrap.
struct SetupOptions {
  bool shared_memory = true;              // NCCL_SHM_DISABLE unset (or CommOptions::shared_memory)
  std::string net;                        // NCCL_NET in lower case: "", "socket" or "ofi"
  std::uint32_t sockets_per_channel = 1;  // RINGMASTER_NSOCKS_PER_CHANNEL, 1 to 8
  std::size_t fifo_bytes = 1 << 20;       // a shared-memory segment's FIFO
};

// One connection of this rank.
struct Connected {
  int channel = -1;      // ring channel; -1: the direct connection
  int peer = -1;         // the rank at the other end
  bool outgoing = true;  // this rank opened it
  TransportKind kind = TransportKind::socket;
  std::string address;   // the peer's bootstrap address
  std::string fallback;  // why not shared memory, when both ranks are on one host and it was not used
  int sockets = 1;       // over sockets: how many carry it
};

// A channel's ring neighbours of this rank: it sends to next and
// receives from prev.
struct RingNeighbours {
  int next = 0;
  int prev = 0;
};

class DirectConnections;

// Connects channel c's ring (channels[c]->next to rings[c].next, prev
// from rings[c].prev), each step on the bootstrap's timeline; a direct
// connection's offer that comes meanwhile goes to `direct`. Throws
// StageError naming the peer and what failed.
std::vector<Connected> connect(Bootstrap& bootstrap, const std::vector<ChannelLink*>& channels,
                               const std::vector<RingNeighbours>& rings, const SetupOptions& options,
                               DirectConnections& direct);

}  // namespace ringmaster::transport

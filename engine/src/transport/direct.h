// Direct connections (ChannelLink::mesh), made when a call first needs
// them, as NCCL connects point-to-point peers on first use.
//
// A job whose ranks each opened a connection to every other rank at init
// held N - 1 sockets (or shared-memory segments) a rank and read every
// rank's address from the store: N² for the job whether or not a call
// ever used them. Now init connects the rings and all_reduce's trees; a
// rooted tree, all_to_all, gather, scatter or a point-to-point transfer
// connects the peers it needs when it first runs.
//
// The calls that need a direct connection are made alike by both of its
// ranks (a tree's parent and child, a transfer's two ends), so both reach
// the connection in the same call. The lower rank opens it through the
// higher rank's bootstrap listener with the same hello, offer and answer
// as the rings (transports.h picks the transport). A rank first sends
// its offers to the higher ranks it needs, then accepts the offers of
// the lower ones, then reads its answers: no rank waits for one that is
// itself waiting. An offer that comes before its call runs here (its
// opener is ahead) waits in a queue until that call needs it.
#pragma once

#include <initializer_list>
#include <map>
#include <mutex>
#include <span>
#include <vector>

#include "transport/link.h"
#include "transport/setup.h"
#include "transport/transports.h"

namespace ringmaster::transport {

class DirectConnections final : public MeshConnector {
 public:
  // `store_mutex` guards the bootstrap's store connection and its record
  // of peers, which other threads use after init.
  DirectConnections(Bootstrap& bootstrap, const SetupOptions& options, std::mutex& store_mutex);
  ~DirectConnections() override;

  // Once the bootstrap's listener is shared with the rings' set-up: loads
  // libfabric when it may be used (throws StageError when NCCL_NET=OFI
  // asks for it and it is unusable).
  void start();

  void connect(ChannelLink& link, std::initializer_list<int> peers, const StepHeader& call) override;
  // At init: connects `link` to `peers` as connect does, failures
  // reported as the TRANSPORT_CONNECT stage's.
  void connect_at_init(ChannelLink& link, const std::vector<int>& peers);

  // A direct connection's hello that came to the listener while the rings
  // were set up: its offer is read and kept until a call needs it.
  void keep(const Hello& hello, net::Socket socket, StrayConnections& stray);

  // The connections made so far.
  std::vector<Connected> made() const;
  // " (N stray connection(s) dropped, the last from A)" when the listener
  // dropped any while waiting for direct connections; else empty.
  std::string stray_note() const { return stray_.note(); }

 private:
  // Of `peers`, those link has no connection to yet (once each).
  std::vector<int> missing(const ChannelLink& link, std::span<const int> peers) const;
  void connect_peers(ChannelLink& link, const std::vector<int>& need, const StepHeader* call);
  // Accepts what has come to the listener until `until`; true when a
  // connection came.
  bool accept_one(ChannelLink& link, net::Clock::time_point until);
  // Fails when the wait for `peer` cannot end: abort, deadline, the peer
  // running this call over the ring.
  void check_waiting(ChannelLink& link, int peer, const StepHeader* call, net::Clock::time_point deadline,
                     const char* waiting_for) const;

  Bootstrap& bootstrap_;
  SetupOptions options_;
  std::mutex& store_mutex_;
  Setup setup_;
  StrayConnections stray_;
  // Offers from lower ranks not yet needed here, by rank.
  std::map<int, Incoming> waiting_;
  mutable std::mutex made_mutex_;
  std::vector<Connected> made_;
};

}  // namespace ringmaster::transport

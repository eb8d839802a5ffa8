// Internal: the table of transports that connection set-up goes through
// (setup.cpp for the rings at init, direct.cpp for direct connections when
// first used), and what one set-up shares.
//
// A transport joins the table with four functions: offer (the opening
// rank's part of the Offer, keeping what it made for it), accept (the
// accepting rank takes the offer, filling in its part of the Answer, or
// declines), and once the answer has gone out, accepted and complete (each
// side makes its end of the connection). Sockets come last and always
// accept.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>

#include "bootstrap/views.h"
#include "net/socket.h"
#include "transport/offer.h"
#include "transport/setup.h"

namespace ringmaster::transport {

namespace shm {
class Segment;
struct HostIdentity;
}  // namespace shm
namespace ofi {
class Endpoint;
struct Availability;
}  // namespace ofi

inline constexpr int kSocketBufferBytes = 4 << 20;  // a ring connection's socket buffers

// What every connection of one set-up shares.
struct Setup {
  Bootstrap& bootstrap;
  BootstrapListener listener;  // this rank's bootstrap listener
  const SetupOptions& options;
  int rank = 0;
  net::Clock::time_point deadline;
  const shm::HostIdentity& identity;
  const ofi::Availability* fabric = nullptr;  // loaded only when libfabric may be used
  bool ofi_wanted = false;
  // Failures during init are the TRANSPORT_CONNECT stage's (StageError);
  // later, when a direct connection is made on first use, the call's
  // (Error naming the peer).
  bool during_init = true;

  Setup(Bootstrap& bootstrap, const SetupOptions& options, net::Clock::time_point deadline);
  // Decides whether libfabric may carry connections (loading it only when
  // it may): asked for, or by default when some peer is on another host
  // and the provider is RDMA. Throws StageError when it was asked for and
  // is unusable, or when an RDMA provider (which pins what it registers)
  // has no room under RLIMIT_MEMLOCK for the buffers of this rank's
  // connections to other hosts in `rings` (the soft limit raised first as
  // far as the hard one allows), naming the need and the limit.
  void choose_fabric(const std::vector<RingNeighbours>& rings = {});
  void room_for_registered_memory(const std::vector<RingNeighbours>& rings) const;
  // libfabric or nothing to `peer`: NCCL_NET=OFI (or an RDMA provider
  // chosen by default) and the peer on another host. Such a connection
  // never falls back to sockets: a run at sockets' speed on a cluster
  // built for EFA is a failure to name, not to finish.
  bool ofi_required(int peer) const { return ofi_wanted && !same_host(peer); }
  // Why this rank does not use libfabric ("NCCL_NET=Socket", "NCCL_NET is
  // unset and libfabric's provider here, tcp, is not RDMA"...).
  std::string why_no_ofi() const;

  const PeerInfo& peer(int r) const { return bootstrap.peer(r); }
  bool same_host(int r) const { return bootstrap.host_of(r) == bootstrap.host_of(rank); }
  std::string where(int r) const;
  static std::string connection_name(std::uint32_t connection);

  [[noreturn]] void fail(std::string what, int peer_rank, int err, std::string hint) const;

  // A socket to `peer`'s bootstrap listener that has said `hello`.
  net::Socket open_socket(int peer_rank, const Hello& hello, int& err) const;
};

// What the opening rank made for one connection, until its answer comes.
struct Pending {
  Pending();
  Pending(Pending&&) noexcept;
  Pending& operator=(Pending&&) noexcept;
  ~Pending();
  int peer = -1;
  std::uint32_t connection = 0;
  net::Socket socket;
  Peer* slot = nullptr;
  std::unique_ptr<shm::Segment> segment;    // shared memory's
  std::shared_ptr<ofi::Endpoint> endpoint;  // libfabric's
  std::string why_no_ofi;                   // why the offer has no endpoint
};

// What the accepting rank knows of an offer it is deciding on.
struct Incoming {
  Incoming();
  Incoming(Incoming&&) noexcept;
  Incoming& operator=(Incoming&&) noexcept;
  ~Incoming();
  int peer = -1;
  bool direct = false;
  Offer offer;
  net::Socket socket;
  std::string why_not_shm;                  // set by shared memory when it declines
  std::string why_not_ofi;                  // set by libfabric when it declines
  std::unique_ptr<shm::Segment> segment;    // shared memory's
  std::shared_ptr<ofi::Endpoint> endpoint;  // libfabric's
};

// One row of the table.
struct TransportEntry {
  TransportKind kind;
  void (*offer)(const Setup&, Pending&, Offer&);
  // True when this transport takes the offer (its part of the answer
  // filled in, what it needs kept in Incoming).
  bool (*accept)(const Setup&, Incoming&, Answer&);
  // Each side's end of the connection, once the answer has gone out (the
  // accepting rank) or come in (the opening rank).
  std::unique_ptr<Connection> (*accepted)(const Setup&, Incoming&, const Answer&);
  std::unique_ptr<Connection> (*complete)(const Setup&, Pending&, const Answer&);
};

// In priority order: shared memory, libfabric, sockets.
const TransportEntry* entry_of(TransportKind kind);

// Opens the connection for `p` (peer, connection and slot set): the hello
// and every transport's offer. Throws naming the peer when it cannot.
void open_connection(const Setup& s, Pending& p);

// Answers the offer in `in` (its socket and offer read) with the first
// transport that takes it and makes this side's end. Returns the answer.
Answer answer_offer(const Setup& s, Incoming& in, std::unique_ptr<Connection>& made);

// Reads the answer to `p`'s offer and makes this side's end through the
// transport the peer chose. Returns the answer (its reason terminated).
Answer complete_connection(const Setup& s, Pending& p, std::unique_ptr<Connection>& made);

// Connections on the bootstrap port that are not a rank's (no hello in
// time, or one that does not fit): dropped and counted, so a port scanner
// or a stale rank of an earlier job cannot stop init.
struct StrayConnections {
  int count = 0;
  std::string last;
  void drop(net::Socket& socket, int err);
  std::string note() const;
};

}  // namespace ringmaster::transport

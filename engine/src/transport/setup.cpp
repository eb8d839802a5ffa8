// Connection set-up through the table of transports (transport/setup.h).
//
// A transport joins the table with four functions: offer (the opening
// rank's part of the Offer, keeping what it made for it), accept (the
// accepting rank takes the offer, filling in its part of the Answer, or
// declines), and once the answer has gone out, accepted and complete (each
// side makes its end of the connection). Sockets come last and always
// accept.
#include "transport/setup.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "base/log.h"
#include "bootstrap/bootstrap_impl.h"
#include "transport/offer.h"
#include "transport/ofi/ofi.h"
#include "transport/shm/shm.h"
#include "transport/socket/socket_connection.h"

namespace ringmaster::transport {
namespace {

constexpr int kSocketBufferBytes = 4 << 20;  // a ring connection's socket buffers

// What every connection of one set-up shares.
struct Setup {
  Bootstrap& bootstrap;
  Bootstrap::Impl& b;
  const SetupOptions& options;
  int rank = 0;
  net::Clock::time_point deadline;
  const shm::HostIdentity& identity = shm::host_identity();
  const ofi::Availability* fabric = nullptr;  // loaded only when libfabric may be used
  bool ofi_wanted = false;

  const PeerInfo& peer(int r) const { return bootstrap.peer(r); }
  bool same_host(int r) const { return bootstrap.host_of(r) == bootstrap.host_of(rank); }
  std::string where(int r) const { return fmt::format("{}[{}]", r, peer(r).host); }
  static std::string connection_name(std::uint32_t connection) {
    return connection == kDirectConnection ? std::string("p2p") : fmt::format("Channel {:02d}", connection);
  }

  [[noreturn]] void fail(std::string what, int peer_rank, int err, std::string hint) const {
    auto f = bootstrap.failure(Stage::transport_connect, std::move(what));
    f.peer_rank = peer_rank;
    if (peer_rank >= 0) f.remote_address = peer(peer_rank).address;
    if (err != 0) f.errno_text = err == EPROTO ? std::string("unexpected answer") : net::errno_text(err);
    f.timeout = b.config.bootstrap_timeout;
    f.hint = std::move(hint);
    throw StageError(f);
  }

  // A socket to `peer`'s bootstrap listener that has said `hello`.
  net::Socket open_socket(int peer_rank, const Hello& hello, int& err) const {
    const auto address = net::SocketAddress::parse(peer(peer_rank).address);
    net::Socket s;
    net::ConnectAttempts report;
    err = net::connect_with_backoff({*address}, deadline, s, report,
                                    connect_progress(bootstrap.impl(), Stage::transport_connect));
    if (err == 0) err = s.send_all(&hello, sizeof(hello), deadline);
    return s;
  }
};

// What the opening rank made for one connection, until its answer comes.
struct Pending {
  int peer = -1;
  std::uint32_t connection = 0;
  net::Socket socket;
  Peer* slot = nullptr;
  std::unique_ptr<shm::Segment> segment;    // shared memory's
  std::shared_ptr<ofi::Endpoint> endpoint;  // libfabric's
};

// What the accepting rank knows of an offer it is deciding on.
struct Incoming {
  int peer = -1;
  bool direct = false;
  Offer offer;
  net::Socket socket;
  std::string why_not_shm;                  // set by shared memory when it declines
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

// Shared memory: to a rank on this host, when both allow it and the
// segment the opener created maps here.
void shm_offer(const Setup& s, Pending& p, Offer& offer) {
  offer.shm_enabled = s.options.shared_memory ? 1 : 0;
  offer.host_key = s.identity.key;
  if (!s.options.shared_memory || !s.same_host(p.peer)) return;
  try {
    p.segment = shm::Segment::create(s.rank, p.peer, s.options.fifo_bytes);
    std::snprintf(offer.segment, sizeof(offer.segment), "%s", p.segment->name().c_str());
  } catch (const Error& e) {
    RM_WARN(init, "{} : {} -> {} cannot use shared memory, falling back to sockets: {}",
            Setup::connection_name(p.connection), s.where(s.rank), s.where(p.peer), e.status().message());
    std::snprintf(offer.problem, sizeof(offer.problem), "%s", e.status().message().c_str());
  }
}

bool shm_accept(const Setup& s, Incoming& in, Answer& answer) {
  Offer& offer = in.offer;
  std::string& why = in.why_not_shm;
  Refusal refusal = Refusal::failed;
  auto& segment = in.segment;
  if (offer.host_key != s.identity.key) {
    why = "different hosts";
    refusal = Refusal::different_hosts;
  } else if (!s.options.shared_memory) {
    why = fmt::format("rank {} has NCCL_SHM_DISABLE=1", s.rank);
    refusal = Refusal::disabled;
  } else if (offer.shm_enabled == 0) {
    why = fmt::format("rank {} has NCCL_SHM_DISABLE=1", in.peer);
    refusal = Refusal::disabled;
  } else if (offer.segment[0] == '\0') {
    offer.problem[sizeof(offer.problem) - 1] = '\0';
    why = fmt::format("rank {} could not create a segment: {}", in.peer,
                      offer.problem[0] != '\0' ? offer.problem : "see its log");
  } else {
    offer.segment[sizeof(offer.segment) - 1] = '\0';
    segment = shm::Segment::open(offer.segment, why);
  }
  answer.refusal = segment ? Refusal::none : refusal;
  std::snprintf(answer.reason, sizeof(answer.reason), "%s", why.c_str());
  return segment != nullptr;
}

std::unique_ptr<Connection> shm_accepted(const Setup&, Incoming& in, const Answer&) {
  return std::make_unique<shm::ShmConnection>(std::move(in.segment), 1, std::move(in.socket));
}

std::unique_ptr<Connection> shm_complete(const Setup&, Pending& p, const Answer&) {
  return std::make_unique<shm::ShmConnection>(std::move(p.segment), 0, std::move(p.socket));
}

// libfabric: to other hosts when asked for (NCCL_NET=OFI) or when the
// provider is RDMA; offered beside a segment too, as the peer may not
// take the segment.
std::shared_ptr<ofi::Endpoint> open_endpoint(const Setup& s, int peer, char* name, std::uint32_t& length) {
  std::string why;
  auto e = ofi::open_endpoint(s.peer(s.rank).ifname, why);
  if (!e) {
    RM_WARN(init, "{} -> {}: no libfabric endpoint ({}), falling back to sockets", s.where(s.rank), s.where(peer), why);
    return e;
  }
  const std::string address = ofi::endpoint_name(*e);
  if (address.size() > sizeof(Offer::ofi_name)) {
    RM_WARN(init, "libfabric address of {} bytes does not fit the offer; sockets instead", address.size());
    return nullptr;
  }
  std::memcpy(name, address.data(), address.size());
  length = static_cast<std::uint32_t>(address.size());
  return e;
}

void ofi_offer(const Setup& s, Pending& p, Offer& offer) {
  if (!s.ofi_wanted) return;
  p.endpoint = open_endpoint(s, p.peer, offer.ofi_name, offer.ofi_name_length);
  offer.ofi = p.endpoint ? 1 : 0;
}

std::unique_ptr<Connection> ofi_connect(const Setup& s, std::shared_ptr<ofi::Endpoint> endpoint, const char* name,
                                        std::uint32_t length, net::Socket socket, int peer, bool outgoing) {
  std::string why;
  auto c = ofi::connect(std::move(endpoint), std::string(name, length), std::move(socket), why);
  if (!c) {
    s.fail(fmt::format("libfabric connection {} rank {} failed: {}", outgoing ? "to" : "from", peer, why), peer, 0,
           "Set NCCL_NET=Socket to run over sockets, or FI_PROVIDER to try another provider.");
  }
  return c;
}

bool ofi_accept(const Setup& s, Incoming& in, Answer& answer) {
  if (in.offer.ofi == 0 || !s.ofi_wanted || in.offer.ofi_name_length > sizeof(in.offer.ofi_name)) return false;
  in.endpoint = open_endpoint(s, in.peer, answer.ofi_name, answer.ofi_name_length);
  return in.endpoint != nullptr;
}

std::unique_ptr<Connection> ofi_accepted(const Setup& s, Incoming& in, const Answer&) {
  return ofi_connect(s, std::move(in.endpoint), in.offer.ofi_name, in.offer.ofi_name_length, std::move(in.socket),
                     in.peer, false);
}

std::unique_ptr<Connection> ofi_complete(const Setup& s, Pending& p, const Answer& answer) {
  if (!p.endpoint || answer.ofi_name_length > sizeof(answer.ofi_name)) {
    s.fail(fmt::format("rank {} answered libfabric that this rank did not offer", p.peer), p.peer, EPROTO,
           "Both ranks must run the same build.");
  }
  return ofi_connect(s, std::move(p.endpoint), answer.ofi_name, answer.ofi_name_length, std::move(p.socket), p.peer,
                     true);
}

// Sockets: always. A ring connection may stripe over several
// (RINGMASTER_NSOCKS_PER_CHANNEL); the opener connects the further ones
// once it has the answer.
void socket_offer(const Setup& s, Pending& p, Offer& offer) {
  offer.sockets = p.connection == kDirectConnection ? 1 : s.options.sockets_per_channel;
}

bool socket_accept(const Setup& s, Incoming& in, Answer& answer) {
  answer.sockets = in.direct ? 1 : std::clamp(in.offer.sockets, 1u, s.options.sockets_per_channel);
  return true;
}

std::unique_ptr<Connection> socket_accepted(const Setup&, Incoming& in, const Answer&) {
  if (!in.direct) in.socket.set_buffer_sizes(kSocketBufferBytes);
  return std::make_unique<SocketConnection>(std::move(in.socket));
}

std::unique_ptr<Connection> socket_complete(const Setup& s, Pending& p, const Answer& answer) {
  auto c = std::make_unique<SocketConnection>(std::move(p.socket));
  for (std::uint32_t i = 1; i < std::min(answer.sockets, 8u); ++i) {
    int err = 0;
    net::Socket extra =
        s.open_socket(p.peer, Hello{kExtraSocketHello, static_cast<std::uint32_t>(s.rank), p.connection, i}, err);
    if (err != 0) {
      s.fail(fmt::format("channel {}: cannot open socket {} to rank {}", p.connection, i, p.peer), p.peer, err,
             "The channel's first socket to this rank connected moments ago; rank " + std::to_string(p.peer) +
                 " probably died during init. Check its log.");
    }
    extra.set_nodelay();
    extra.set_buffer_sizes(kSocketBufferBytes);
    c->add_socket(std::move(extra));
  }
  return c;
}

// In priority order.
constexpr std::array<TransportEntry, 3> kTransports{{
    {TransportKind::shm, shm_offer, shm_accept, shm_accepted, shm_complete},
    {TransportKind::ofi, ofi_offer, ofi_accept, ofi_accepted, ofi_complete},
    {TransportKind::socket, socket_offer, socket_accept, socket_accepted, socket_complete},
}};

const TransportEntry* entry_of(TransportKind kind) {
  for (const auto& t : kTransports) {
    if (t.kind == kind) return &t;
  }
  return nullptr;
}

// Connections on the bootstrap port that are not a rank's (no hello in
// time, or one that does not fit): dropped and counted, so a port scanner
// or a stale rank of an earlier job cannot stop init.
struct StrayConnections {
  int count = 0;
  std::string last;
  void drop(net::Socket& socket, int err) {
    ++count;
    last = fmt::format("{} ({})", socket.peer_address().to_string(),
                       err == EPROTO ? std::string("not a channel hello of this job") : net::errno_text(err));
    RM_INFO(init, "dropped a connection on the bootstrap port from {}", last);
    socket = net::Socket();
  }
  std::string note() const {
    return count == 0 ? std::string() : fmt::format(" ({} stray connection(s) dropped, the last from {})", count, last);
  }
};

}  // namespace

std::vector<Connected> connect(Bootstrap& bootstrap, const std::vector<ChannelLink*>& channels,
                               const std::vector<RingNeighbours>& rings, const SetupOptions& options) {
  auto& b = bootstrap.impl();
  const int rank = b.config.rank;
  const int nranks = b.config.world_size;
  // The ranks that open this rank's ring connections: one per channel,
  // the same one unless the rings follow the topology.
  std::vector<int> prevs;
  for (const auto& r : rings) {
    if (std::find(prevs.begin(), prevs.end(), r.prev) == prevs.end()) prevs.push_back(r.prev);
  }
  const int prev = prevs.front();
  const std::string prev_text =
      prevs.size() == 1 ? fmt::format("rank {}", prev) : fmt::format("ranks {}", fmt::join(prevs, ", "));
  Setup s{bootstrap, b, options, rank, net::Clock::now() + b.config.bootstrap_timeout};
  // libfabric is loaded (tens of ms) only when it may be used: asked for,
  // or by default when some peer is on another host.
  const bool other_hosts = bootstrap.host_count() > 1;
  static const ofi::Availability kNotLoaded{};
  s.fabric = options.net == "ofi" || (options.net.empty() && other_hosts) ? &ofi::availability(s.peer(rank).ifname)
                                                                          : &kNotLoaded;
  s.ofi_wanted = options.net == "ofi" || (options.net.empty() && s.fabric->usable && s.fabric->rdma);
  if (options.net == "ofi" && !s.fabric->usable) {
    const auto& fabric = *s.fabric;
    auto f = bootstrap.failure(Stage::transport_connect, "NCCL_NET=OFI but libfabric is unusable: " + fabric.why);
    f.category = ErrorCategory::config;
    const char* forced = std::getenv("FI_PROVIDER");
    f.hint = forced != nullptr && *forced != '\0'
                 ? fmt::format(
                       "FI_PROVIDER={} hides every other libfabric provider; unset it to let libfabric "
                       "choose (fi_info -l lists them), or unset NCCL_NET to run over sockets.",
                       forced)
             : fabric.providers.empty()
                 ? "libfabric lists no provider with RDM endpoints here; unset NCCL_NET to run over sockets."
                 : fmt::format(
                       "Providers here: {}. Set FI_PROVIDER to one of them, or unset NCCL_NET to run over "
                       "sockets.",
                       fmt::join(fabric.providers, ", "));
    throw StageError(f);
  }
  std::vector<Connected> made;
  // Every other rank's PeerInfo (address, host name), in one read from
  // the store: the direct connections reach every rank.
  bootstrap.run_stage(Stage::transport_connect, [&] {
    std::vector<int> others;
    for (int r = 0; r < nranks; ++r) {
      if (r != rank) others.push_back(r);
    }
    bootstrap.fetch_peers(others);
    return fmt::format("addresses of {} rank(s) read from the store", others.size());
  });

  // Opening: a hello and every transport's offer on each connection.
  std::vector<Pending> opened;
  auto open_to = [&](int peer, std::uint32_t connection, Peer* slot) {
    Pending p;
    p.peer = peer;
    p.connection = connection;
    p.slot = slot;
    int err = 0;
    p.socket = s.open_socket(peer, Hello{kChannelHello, static_cast<std::uint32_t>(rank), connection, 0}, err);
    Offer offer;
    offer.magic = kOfferMagic;
    if (err == 0) {
      for (const auto& t : kTransports)
        t.offer(s, p, offer);
      err = p.socket.send_all(&offer, sizeof(offer), s.deadline);
    }
    if (err != 0) {
      s.fail(connection == kDirectConnection ? fmt::format("cannot connect to rank {}", peer)
                                             : fmt::format("channel {}: cannot connect to rank {}", connection, peer),
             peer, err,
             "The bootstrap worked moments ago on the same port: rank " + std::to_string(peer) +
                 " probably died during init, or traffic between these two hosts is blocked. Check its log.");
    }
    p.socket.set_nodelay();
    if (connection != kDirectConnection) p.socket.set_buffer_sizes(kSocketBufferBytes);
    opened.push_back(std::move(p));
  };
  for (std::uint32_t index = 0; index < channels.size(); ++index) {
    bootstrap.run_stage(Stage::transport_connect, [&] {
      const int next = rings[index].next;
      open_to(next, index, &channels[index]->next);
      return fmt::format("channel {:02d} : {} -> {} connected to {}", index, s.where(rank), s.where(next),
                         s.peer(next).address);
    });
  }
  // Direct connections for trees, all_to_all and point-to-point: each rank
  // connects to every higher rank.
  auto& mesh = channels[0]->mesh;
  mesh.resize(static_cast<std::size_t>(nranks));
  for (int peer = rank + 1; peer < nranks; ++peer) {
    bootstrap.run_stage(Stage::transport_connect, [&] {
      open_to(peer, kDirectConnection, &mesh[static_cast<std::size_t>(peer)]);
      return fmt::format("p2p : {} -> {} connected to {}", s.where(rank), s.where(peer), s.peer(peer).address);
    });
  }

  // Accepting: every channel's connection from prev and the direct ones
  // from lower ranks, in whatever order they come; each offer is answered
  // by the first transport that takes it.
  StrayConnections stray;
  auto accept_failed = [&](const std::string& what, int err) {
    auto f = bootstrap.failure(Stage::transport_connect, what);
    f.peer_rank = prev;
    f.local_address = b.listener.local_address().to_string();
    f.errno_text = net::errno_text(err);
    f.timeout = b.config.bootstrap_timeout;
    f.hint = "Rank " + std::to_string(prev) + " failed while opening its channels; check its log.";
    if (prevs.size() > 1) f.hint = "The " + prev_text + " open this rank's channels; one failed, check their logs.";
    throw StageError(f);
  };
  std::vector<std::string> accepted;
  // Accepted socket connections that get further sockets.
  struct Striped {
    int peer;
    std::uint32_t connection;
    SocketConnection* socket;
    std::uint32_t sockets;
  };
  std::vector<Striped> striped;
  // A further socket that came before another rank's first connection.
  std::vector<std::pair<Hello, net::Socket>> early_sockets;
  bootstrap.run_stage(Stage::transport_connect, [&] {
    const std::size_t expected = channels.size() + static_cast<std::size_t>(rank);
    for (std::size_t got = 0; got < expected;) {
      int err = 0;
      Incoming in;
      Hello hello;
      const auto hello_deadline = std::min(s.deadline, net::Clock::now() + kHelloWait);
      if (!b.early_connections.empty()) {
        // Accepted, hello read, during the address exchange.
        auto& [said, socket] = b.early_connections.back();
        hello.magic = said[0];
        hello.rank = said[1];
        hello.connection = said[2];
        hello.socket = said[3];
        in.socket = std::move(socket);
        b.early_connections.pop_back();
      } else {
        in.socket = b.listener.accept(s.deadline, err);
        if (err != 0) {
          accept_failed(
              fmt::format("{} did not open all {} channels to this rank{}", prev_text, channels.size(), stray.note()),
              err);
        }
        // A connection that does not say a hello and an offer at once is
        // dropped, and the listener keeps accepting.
        err = in.socket.recv_all(&hello, sizeof(hello), hello_deadline);
      }
      if (err == 0 && hello.magic == kExtraSocketHello) {
        early_sockets.emplace_back(hello, std::move(in.socket));
        continue;
      }
      if (err == 0 && hello.magic != kChannelHello) err = EPROTO;  // before waiting for an offer
      if (err == 0) err = in.socket.recv_all(&in.offer, sizeof(in.offer), hello_deadline);
      in.direct = hello.connection == kDirectConnection;
      if (err == 0 && in.offer.magic != kOfferMagic) err = EPROTO;
      if (err == 0 && in.direct && (static_cast<int>(hello.rank) >= rank || mesh[hello.rank].valid())) err = EPROTO;
      if (err == 0 && !in.direct &&
          (hello.connection >= channels.size() || static_cast<int>(hello.rank) != rings[hello.connection].prev ||
           channels[hello.connection]->prev.valid())) {
        err = EPROTO;
      }
      if (err != 0) {
        stray.drop(in.socket, err);
        continue;
      }
      ++got;
      in.socket.set_nodelay();
      in.peer = static_cast<int>(hello.rank);
      const int peer = in.peer;
      Answer answer;
      answer.magic = kAnswerMagic;
      // The first transport that takes the offer; sockets always do.
      const TransportEntry* chosen = &kTransports.back();
      for (const auto& t : kTransports) {
        if (t.accept(s, in, answer)) {
          chosen = &t;
          break;
        }
      }
      answer.transport = chosen->kind;
      err = in.socket.send_all(&answer, sizeof(answer), s.deadline);
      if (err != 0) {
        s.fail(fmt::format("rank {} left while connecting", peer), peer, err,
               "Rank " + std::to_string(peer) + " failed while opening its connections; check its log.");
      }
      // The connection keeps the socket (shared memory and libfabric to
      // notice a peer that died).
      auto connection = chosen->accepted(s, in, answer);
      Peer* slot = in.direct ? &mesh[hello.rank] : &channels[hello.connection]->prev;
      if (answer.transport == TransportKind::socket && answer.sockets > 1) {
        striped.push_back({peer, hello.connection, static_cast<SocketConnection*>(connection.get()), answer.sockets});
      }
      slot->connection = std::move(connection);
      slot->rank = peer;
      slot->address = s.peer(peer).address;
      const bool shm = answer.transport == TransportKind::shm;
      made.push_back({in.direct ? -1 : static_cast<int>(hello.connection), peer, false, answer.transport,
                      s.peer(peer).address,
                      answer.refusal == Refusal::different_hosts || shm ? std::string() : in.why_not_shm,
                      static_cast<int>(answer.sockets)});
      accepted.push_back(fmt::format("{} : {} <- {} via {}", Setup::connection_name(hello.connection), s.where(rank),
                                     s.where(peer), name_of(answer.transport)));
    }
    return fmt::format("{} channel(s) from {}, direct connections from {} lower rank(s)", channels.size(), prev_text,
                       rank);
  });

  // The answers to this rank's offers: each connection made by the
  // transport the peer chose, logged as NCCL does.
  bootstrap.run_stage(Stage::transport_connect, [&] {
    std::string detail;
    for (auto& p : opened) {
      Answer answer;
      int err = p.socket.recv_all(&answer, sizeof(answer), s.deadline);
      const TransportEntry* chosen = entry_of(answer.transport);
      if (err == 0 && (answer.magic != kAnswerMagic || chosen == nullptr)) err = EPROTO;
      if (err == 0 && answer.transport == TransportKind::shm && !p.segment) err = EPROTO;
      if (err != 0) {
        s.fail(fmt::format("rank {} did not answer the connection offer", p.peer), p.peer, err,
               "Rank " + std::to_string(p.peer) + " failed while accepting its connections; check its log.");
      }
      answer.reason[sizeof(answer.reason) - 1] = '\0';
      const std::string why = answer.reason;
      if (p.segment) p.segment->unlink();  // mapped on both sides, or not wanted
      auto connection = chosen->complete(s, p, answer);
      p.segment.reset();
      p.slot->connection = std::move(connection);
      p.slot->rank = p.peer;
      p.slot->address = s.peer(p.peer).address;
      const bool shm = answer.transport == TransportKind::shm;
      const std::string line = fmt::format("{} : {} -> {} via {}", Setup::connection_name(p.connection), s.where(rank),
                                           s.where(p.peer), name_of(answer.transport));
      const auto refusal = shm ? Refusal::none : answer.refusal;
      const bool same_host = refusal != Refusal::different_hosts;
      const std::string& address = s.peer(p.peer).address;
      if (shm) {
        RM_INFO(init, "{}", line);
      } else if (refusal == Refusal::failed) {
        RM_WARN(init, "{}/{} (shared memory not used: {})", line, address, why);
      } else if (same_host) {
        RM_INFO(init, "{}/{} (shared memory not used: {})", line, address, why);
      } else {
        RM_INFO(init, "{}/{}", line, address);
      }
      made.push_back({p.connection == kDirectConnection ? -1 : static_cast<int>(p.connection), p.peer, true,
                      answer.transport, address, shm || !same_host ? std::string() : why,
                      static_cast<int>(answer.transport == TransportKind::socket ? answer.sockets : 1)});
      detail += (detail.empty() ? "" : "; ") + line + (shm ? "" : "/" + address) +
                (!shm && same_host ? " (shared memory not used: " + why + ")" : "");
    }
    for (const auto& a : accepted)
      detail += "; " + a;
    return detail;
  });

  // The further sockets of the ring connections accepted here, added in
  // their order whatever order they arrive in.
  std::size_t extra = 0;
  for (const auto& c : striped)
    extra += c.sockets - 1;
  if (extra == 0) return made;
  bootstrap.run_stage(Stage::transport_connect, [&] {
    std::vector<std::vector<net::Socket>> sockets(striped.size());
    for (std::size_t i = 0; i < striped.size(); ++i)
      sockets[i].resize(striped[i].sockets);
    std::size_t early = 0;
    for (std::size_t got = 0; got < extra;) {
      int err = 0;
      Hello hello;
      net::Socket in;
      if (early < early_sockets.size()) {
        hello = early_sockets[early].first;
        in = std::move(early_sockets[early].second);
        ++early;
      } else {
        in = b.listener.accept(s.deadline, err);
        if (err != 0) {
          accept_failed(fmt::format("{} did not open all {} sockets of its channels to this rank{}", prev_text,
                                    striped.front().sockets, stray.note()),
                        err);
        }
        err = in.recv_all(&hello, sizeof(hello), std::min(s.deadline, net::Clock::now() + kHelloWait));
      }
      std::size_t which = striped.size();
      for (std::size_t i = 0; err == 0 && i < striped.size(); ++i) {
        if (static_cast<int>(hello.rank) == striped[i].peer && hello.connection == striped[i].connection) which = i;
      }
      if (err == 0 && (hello.magic != kExtraSocketHello || which == striped.size() || hello.socket == 0 ||
                       hello.socket >= striped[which].sockets || sockets[which][hello.socket].valid())) {
        err = EPROTO;
      }
      if (err != 0) {
        stray.drop(in, err);
        continue;
      }
      ++got;
      in.set_nodelay();
      in.set_buffer_sizes(kSocketBufferBytes);
      sockets[which][hello.socket] = std::move(in);
    }
    for (std::size_t i = 0; i < striped.size(); ++i) {
      for (std::uint32_t k = 1; k < striped[i].sockets; ++k)
        striped[i].socket->add_socket(std::move(sockets[i][k]));
    }
    return fmt::format("{} further socket(s) from {} (RINGMASTER_NSOCKS_PER_CHANNEL={})", extra, prev_text,
                       options.sockets_per_channel);
  });
  return made;
}

}  // namespace ringmaster::transport

// Connection set-up of the rings (transport/setup.h) through the table of
// transports (transports.h); direct connections that come meanwhile go to
// DirectConnections (direct.h).
#include "transport/setup.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cerrno>
#include <memory>
#include <string>
#include <vector>

#include "base/log.h"
#include "bootstrap/views.h"
#include "transport/direct.h"
#include "transport/offer.h"
#include "transport/socket/socket_connection.h"
#include "transport/transports.h"

namespace ringmaster::transport {

std::vector<Connected> connect(Bootstrap& bootstrap, const std::vector<ChannelLink*>& channels,
                               const std::vector<RingNeighbours>& rings, const SetupOptions& options,
                               DirectConnections& direct) {
  const Config& config = bootstrap.config();
  const int rank = config.rank;
  // The ranks that open this rank's ring connections: one per channel,
  // the same one unless the rings follow the topology.
  std::vector<int> prevs;
  for (const auto& r : rings) {
    if (std::find(prevs.begin(), prevs.end(), r.prev) == prevs.end()) prevs.push_back(r.prev);
  }
  const int prev = prevs.front();
  const std::string prev_text =
      prevs.size() == 1 ? fmt::format("rank {}", prev) : fmt::format("ranks {}", fmt::join(prevs, ", "));
  Setup s(bootstrap, options, net::Clock::now() + config.bootstrap_timeout);
  s.choose_fabric(rings);
  std::vector<Connected> made;
  // The PeerInfo (address, host name) of the ranks this rank's rings
  // reach, in one read from the store.
  bootstrap.run_stage(Stage::transport_connect, [&] {
    std::vector<int> neighbours;
    for (const auto& r : rings) {
      for (const int peer : {r.next, r.prev}) {
        if (peer != rank && std::find(neighbours.begin(), neighbours.end(), peer) == neighbours.end())
          neighbours.push_back(peer);
      }
    }
    bootstrap.fetch_peers(neighbours);
    return fmt::format("addresses of {} rank(s) read from the store", neighbours.size());
  });

  // Opening: a hello and every transport's offer on each connection.
  std::vector<Pending> opened;
  auto open_to = [&](int peer, std::uint32_t connection, Peer* slot) {
    Pending p;
    p.peer = peer;
    p.connection = connection;
    p.slot = slot;
    open_connection(s, p);
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
  // Accepting: every channel's connection from prev, in whatever order
  // they come; each offer is answered by the first transport that takes
  // it. A direct connection that comes meanwhile (its opener is done with
  // its rings) waits for the call that needs it.
  StrayConnections stray;
  auto accept_failed = [&](const std::string& what, int err) {
    auto f = bootstrap.failure(Stage::transport_connect, what);
    f.peer_rank = prev;
    f.local_address = s.listener.local_address().to_string();
    f.errno_text = net::errno_text(err);
    f.timeout = config.bootstrap_timeout;
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
    const std::size_t expected = channels.size();
    for (std::size_t got = 0; got < expected;) {
      int err = 0;
      Incoming in;
      Hello hello;
      const auto hello_deadline = std::min(s.deadline, net::Clock::now() + kHelloWait);
      if (s.listener.has_early()) {
        // Accepted, hello read, during the address exchange.
        std::tie(hello, in.socket) = s.listener.take_early();
      } else {
        in.socket = s.listener.accept(s.deadline, err);
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
      if (err == 0 && hello.connection == kDirectConnection) {
        direct.keep(hello, std::move(in.socket), stray);
        continue;
      }
      if (err == 0) err = in.socket.recv_all(&in.offer, sizeof(in.offer), hello_deadline);
      if (err == 0 && in.offer.magic != kOfferMagic) err = EPROTO;
      if (err == 0 &&
          (hello.connection >= channels.size() || static_cast<int>(hello.rank) != rings[hello.connection].prev ||
           channels[hello.connection]->prev.valid())) {
        err = EPROTO;
      }
      if (err != 0) {
        stray.drop(in.socket, err);
        continue;
      }
      ++got;
      in.peer = static_cast<int>(hello.rank);
      const int peer = in.peer;
      std::unique_ptr<Connection> connection;
      const Answer answer = answer_offer(s, in, connection);
      Peer* slot = &channels[hello.connection]->prev;
      if (answer.transport == TransportKind::socket && answer.sockets > 1) {
        striped.push_back({peer, hello.connection, static_cast<SocketConnection*>(connection.get()), answer.sockets});
      }
      slot->connection = std::move(connection);
      slot->rank = peer;
      slot->address = s.peer(peer).address;
      const bool shm = answer.transport == TransportKind::shm;
      made.push_back({static_cast<int>(hello.connection), peer, false, answer.transport, s.peer(peer).address,
                      answer.refusal == Refusal::different_hosts || shm ? std::string() : in.why_not_shm,
                      static_cast<int>(answer.sockets)});
      accepted.push_back(fmt::format("{} : {} <- {} via {}", Setup::connection_name(hello.connection), s.where(rank),
                                     s.where(peer), name_of(answer.transport)));
    }
    // What else came during the address exchange: direct connections
    // wait for their calls, further sockets for their connections.
    while (s.listener.has_early()) {
      auto [hello, socket] = s.listener.take_early();
      if (hello.magic == kExtraSocketHello) {
        early_sockets.emplace_back(hello, std::move(socket));
      } else if (hello.magic == kChannelHello && hello.connection == kDirectConnection) {
        direct.keep(hello, std::move(socket), stray);
      } else {
        stray.drop(socket, EPROTO);
      }
    }
    return fmt::format("{} channel(s) from {}{}", channels.size(), prev_text, stray.note());
  });

  // The answers to this rank's offers: each connection made by the
  // transport the peer chose, logged as NCCL does.
  bootstrap.run_stage(Stage::transport_connect, [&] {
    std::string detail;
    for (auto& p : opened) {
      std::unique_ptr<Connection> connection;
      const Answer answer = complete_connection(s, p, connection);
      const std::string why = answer.reason;
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
      made.push_back({static_cast<int>(p.connection), p.peer, true, answer.transport, address,
                      shm || !same_host ? std::string() : why,
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
        in = s.listener.accept(s.deadline, err);
        if (err != 0) {
          accept_failed(fmt::format("{} did not open all {} sockets of its channels to this rank{}", prev_text,
                                    striped.front().sockets, stray.note()),
                        err);
        }
        err = in.recv_all(&hello, sizeof(hello), std::min(s.deadline, net::Clock::now() + kHelloWait));
        if (err == 0 && hello.magic == kChannelHello && hello.connection == kDirectConnection) {
          direct.keep(hello, std::move(in), stray);
          continue;
        }
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

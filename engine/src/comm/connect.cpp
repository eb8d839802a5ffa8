// Connections (moving to transport/).
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "base/cycles.h"
#include "base/log.h"
#include "base/params.h"
#include "bootstrap/bootstrap_impl.h"
#include "comm/communicator_impl.h"
#include "store/client.h"
#include "transport/offer.h"
#include "transport/ofi/ofi.h"
#include "transport/shm/shm.h"
#include "transport/socket/socket_connection.h"

namespace ringmaster {

namespace {
constexpr std::uint32_t kChannelHelloMagic = 0x4348414E;      // "CHAN"
constexpr std::uint32_t kMeshConnection = 0xFFFF;             // hello's channel field for a direct connection
constexpr std::uint32_t kExtraSocketHelloMagic = 0x534F434B;  // "SOCK": a ring connection's further socket
}  // namespace

// Every connection starts as a socket through the peer's bootstrap
// listener. The opening rank offers shared memory when the peer looks
// like it is on the same host (and creates the segment); the accepting
// rank checks that it really is, maps the segment and answers. Offers go
// out with the hellos and answers come back only after every rank has
// accepted, so no rank waits on another that is itself still connecting.
void Communicator::Impl::connect_channels() {
  auto& b = bootstrap->impl();
  const int next = (rank + 1) % nranks;
  const int prev = (rank + nranks - 1) % nranks;
  const auto deadline = net::Clock::now() + b.config.bootstrap_timeout;
  // More ranks on this host than CPUs to run them: a rank spinning on a
  // step keeps the rank it waits for off the CPU, so spinning yields.
  const int ranks_here = static_cast<int>(
      std::count_if(b.peers.begin(), b.peers.end(), [&](const auto& p) { return p.host == b.peers[rank].host; }));
  const std::string yield = param_string(Param::SpinYield);
  if (yield != "auto" && yield != "0" && yield != "1") {
    auto f =
        bootstrap->failure(Stage::transport_connect, fmt::format("RINGMASTER_SPIN_YIELD={}: need auto, 0 or 1", yield));
    f.category = ErrorCategory::config;
    throw StageError(f);
  }
  const bool yield_while_spinning = yield == "auto" ? ranks_here > comm::usable_cpus() : yield == "1";
  // A rank that yields while it spins gives its CPU to whoever can use
  // it, so it may spin for longer before it sleeps: a step that waits on
  // two ranks sharing a CPU often takes over 50 us, and each sleep costs
  // a wake-up of 20 us or more. With 4 ranks on 2 CPUs, 8 B all_reduce
  // single calls fell into modes 20 us apart (25, 33, 47, 67 us) and
  // their median jumped between them from one run to the next; spinning
  // for 1 ms, they sit at 31-33 us.
  const std::chrono::microseconds link_spin =
      yield_while_spinning && !param_env(Param::SocketSpin) ? std::chrono::microseconds(1000) : spin;
  // Nor is a CPU free for a progress thread to overlap a collective
  // with the caller's work: waking one only makes it wait for a CPU (and
  // preempt a rank that has one), so unless RINGMASTER_INLINE_BYTES says
  // otherwise every collective on one channel waits for its caller
  // (4 ranks on 2 CPUs, 256 KiB: 180-310 us a call handed over, 100 here).
  if (ranks_here > comm::usable_cpus() && !param_env(Param::InlineBytes)) {
    inline_bytes = std::numeric_limits<std::size_t>::max();
  }
  (void)cycles::ns_per_tick();  // the steps' timer, measured now rather than in the first step
  for (auto& channel : channels) {
    channel->link.rank = rank;
    channel->link.timeout = timeout;
    channel->link.spin = link_spin;
    channel->link.yield_while_spinning = yield_while_spinning;
    channel->link.aborted = &aborted;
    channel->link.counters = &channel->stats;
    channel->stats.from_peer = std::make_unique<transport::ChannelStats::FromPeer[]>(static_cast<std::size_t>(nranks));
    channel->stats.peers = nranks;
  }
  if (nranks == 1) return;
  const bool shm_enabled = shared_memory.value_or(param_int(Param::ShmDisable) == 0);
  const auto fifo_bytes = static_cast<std::size_t>(std::max<std::int64_t>(4096, param_int(Param::ShmFifoBytes)));
  const auto& identity = transport::shm::host_identity();
  const auto nsocks = static_cast<std::uint32_t>(param_int(Param::NSocksPerChannel));
  if (nsocks < 1 || nsocks > 8) {
    auto f = bootstrap->failure(Stage::transport_connect,
                                fmt::format("RINGMASTER_NSOCKS_PER_CHANNEL={}: need 1 to 8", nsocks));
    f.category = ErrorCategory::config;
    throw StageError(f);
  }
  // libfabric to other hosts: asked for (NCCL_NET=OFI, checked usable at
  // create), or by default when the provider is RDMA (efa, verbs).
  const std::string& interface = b.peers[rank].ifname;
  // libfabric is loaded (tens of ms) only when it may be used: asked for,
  // or by default when some peer is on another host.
  const bool other_hosts =
      std::any_of(b.peers.begin(), b.peers.end(), [&](const auto& p) { return p.host != b.peers[rank].host; });
  static const transport::ofi::Availability kNotLoaded{};
  const auto& fabric =
      net == "ofi" || (net.empty() && other_hosts) ? transport::ofi::availability(interface) : kNotLoaded;
  const bool ofi_wanted = net == "ofi" || (net.empty() && fabric.usable && fabric.rdma);
  if (net == "ofi" && !fabric.usable) {
    auto f = bootstrap->failure(Stage::transport_connect, "NCCL_NET=OFI but libfabric is unusable: " + fabric.why);
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
  auto where = [&](int r) { return fmt::format("{}[{}]", r, b.peers[r].host); };
  auto connection_name = [&](std::uint32_t connection) {
    return connection == kMeshConnection ? std::string("p2p") : fmt::format("Channel {:02d}", connection);
  };

  // What this rank opened, until the answer says how it is carried.
  struct Opened {
    int peer;
    std::uint32_t connection;
    net::Socket socket;
    std::unique_ptr<transport::shm::Segment> segment;
    std::shared_ptr<transport::ofi::Endpoint> endpoint;
    transport::Peer* slot;
  };
  // An endpoint for a connection to another host, its address in `name`.
  auto open_endpoint = [&](int peer, char* name, std::uint32_t& length) {
    std::string why;
    auto e = transport::ofi::open_endpoint(interface, why);
    if (!e) {
      RM_WARN(init, "{} -> {}: no libfabric endpoint ({}), falling back to sockets", where(rank), where(peer), why);
      return e;
    }
    const std::string address = transport::ofi::endpoint_name(*e);
    if (address.size() > sizeof(transport::Offer::ofi_name)) {
      RM_WARN(init, "libfabric address of {} bytes does not fit the offer; sockets instead", address.size());
      return std::shared_ptr<transport::ofi::Endpoint>();
    }
    std::memcpy(name, address.data(), address.size());
    length = static_cast<std::uint32_t>(address.size());
    return e;
  };
  std::vector<Opened> opened;
  auto open_to = [&](int peer, std::uint32_t connection, transport::Peer* slot) {
    const auto address = net::SocketAddress::parse(b.peers[peer].address);
    net::Socket s;
    store::ConnectAttempts report;
    int err = store::connect_with_backoff({*address}, deadline, s, report);
    transport::Offer offer;
    offer.magic = transport::kOfferMagic;
    offer.shm_enabled = shm_enabled ? 1 : 0;
    offer.host_key = identity.key;
    std::unique_ptr<transport::shm::Segment> segment;
    if (err == 0 && shm_enabled && b.peers[peer].host == b.peers[rank].host) {
      try {
        segment = transport::shm::Segment::create(rank, peer, fifo_bytes);
        std::snprintf(offer.segment, sizeof(offer.segment), "%s", segment->name().c_str());
      } catch (const Error& e) {
        RM_WARN(init, "{} : {} -> {} cannot use shared memory, falling back to sockets: {}",
                connection_name(connection), where(rank), where(peer), e.status().message());
        std::snprintf(offer.problem, sizeof(offer.problem), "%s", e.status().message().c_str());
      }
    }
    std::shared_ptr<transport::ofi::Endpoint> endpoint;
    // Offered beside a segment too: the peer may not take the segment.
    if (err == 0 && ofi_wanted) {
      endpoint = open_endpoint(peer, offer.ofi_name, offer.ofi_name_length);
      offer.ofi = endpoint ? 1 : 0;
    }
    offer.sockets = connection == kMeshConnection ? 1 : nsocks;
    const std::uint32_t hello[3] = {kChannelHelloMagic, static_cast<std::uint32_t>(rank), connection};
    if (err == 0) err = s.send_all(hello, sizeof(hello), deadline);
    if (err == 0) err = s.send_all(&offer, sizeof(offer), deadline);
    if (err != 0) {
      auto f = bootstrap->failure(Stage::transport_connect,
                                  connection == kMeshConnection
                                      ? fmt::format("cannot connect to rank {}", peer)
                                      : fmt::format("channel {}: cannot connect to rank {}", connection, peer));
      f.peer_rank = peer;
      f.remote_address = b.peers[peer].address;
      f.errno_text = net::errno_text(err);
      f.timeout = b.config.bootstrap_timeout;
      f.hint = "The bootstrap worked moments ago on the same port: rank " + std::to_string(peer) +
               " probably died during init, or traffic between these two hosts is blocked. Check its log.";
      throw StageError(f);
    }
    s.set_nodelay();
    if (connection != kMeshConnection) s.set_buffer_sizes(4 << 20);
    opened.push_back({peer, connection, std::move(s), std::move(segment), std::move(endpoint), slot});
  };
  for (auto& channel : channels) {
    bootstrap->run_stage(Stage::transport_connect, [&] {
      open_to(next, static_cast<std::uint32_t>(channel->index), &channel->link.next);
      return fmt::format("channel {:02d} : {} -> {} connected to {}", channel->index, where(rank), where(next),
                         b.peers[next].address);
    });
  }
  // Direct connections for all_to_all and point-to-point: each rank
  // connects to every higher rank.
  auto& mesh = channels[0]->link.mesh;
  mesh.resize(static_cast<std::size_t>(nranks));
  for (int peer = rank + 1; peer < nranks; ++peer) {
    bootstrap->run_stage(Stage::transport_connect, [&] {
      open_to(peer, kMeshConnection, &mesh[static_cast<std::size_t>(peer)]);
      return fmt::format("p2p : {} -> {} connected to {}", where(rank), where(peer), b.peers[peer].address);
    });
  }
  // Connections on the bootstrap port that are not a rank's (no hello in
  // time, or one that does not fit): dropped and counted, so a port
  // scanner or a stale rank of an earlier job cannot stop init.
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
      return count == 0 ? std::string()
                        : fmt::format(" ({} stray connection(s) dropped, the last from {})", count, last);
    }
  } stray;
  // What failed while accepting this rank's connections.
  auto accept_failed = [&](const std::string& what, int err) {
    auto f = bootstrap->failure(Stage::transport_connect, what);
    f.peer_rank = prev;
    f.local_address = b.listener.local_address().to_string();
    f.errno_text = net::errno_text(err);
    f.timeout = b.config.bootstrap_timeout;
    f.hint = "Rank " + std::to_string(prev) + " failed while opening its channels; check its log.";
    throw StageError(f);
  };
  // Accept every channel's connection from prev and the direct ones from
  // lower ranks, in whatever order they come, and answer their offers.
  std::vector<std::string> accepted;
  // Accepted socket connections that get further sockets (opened by the
  // peer once it has the answer).
  struct Striped {
    int peer;
    std::uint32_t connection;
    transport::SocketConnection* socket;
    std::uint32_t sockets;
  };
  std::vector<Striped> striped;
  struct EarlySocket {
    std::array<std::uint32_t, 4> hello;
    net::Socket socket;
  };
  std::vector<EarlySocket> early_sockets;
  bootstrap->run_stage(Stage::transport_connect, [&] {
    const std::size_t expected = channels.size() + static_cast<std::size_t>(rank);
    for (std::size_t got = 0; got < expected; ++got) {
      int err = 0;
      net::Socket in = b.listener.accept(deadline, err);
      if (err != 0) {
        accept_failed(
            fmt::format("rank {} did not open all {} channels to this rank{}", prev, channels.size(), stray.note()),
            err);
      }
      // A connection that does not say a hello and an offer at once is
      // dropped (stray.drop), and the listener keeps accepting.
      const auto hello_deadline = std::min(deadline, net::Clock::now() + kHelloWait);
      std::uint32_t hello[3] = {};
      transport::Offer offer;
      err = in.recv_all(hello, sizeof(hello), hello_deadline);
      if (err == 0 && hello[0] == kExtraSocketHelloMagic) {
        // A further socket of a connection answered already, come before
        // another rank's first one: kept for the stage below.
        std::uint32_t index = 0;
        err = in.recv_all(&index, sizeof(index), hello_deadline);
        if (err == 0) {
          early_sockets.push_back({{hello[0], hello[1], hello[2], index}, std::move(in)});
          --got;
          continue;
        }
      }
      if (err == 0 && hello[0] != kChannelHelloMagic) err = EPROTO;  // before waiting for an offer
      if (err == 0) err = in.recv_all(&offer, sizeof(offer), hello_deadline);
      const bool direct = hello[2] == kMeshConnection;
      if (err == 0 && offer.magic != transport::kOfferMagic) err = EPROTO;
      if (err == 0 && direct &&
          (hello[0] != kChannelHelloMagic || static_cast<int>(hello[1]) >= rank || mesh[hello[1]].valid())) {
        err = EPROTO;
      }
      if (err == 0 && !direct &&
          (hello[0] != kChannelHelloMagic || static_cast<int>(hello[1]) != prev || hello[2] >= channels.size() ||
           channels[hello[2]]->link.prev.valid())) {
        err = EPROTO;
      }
      if (err != 0) {
        stray.drop(in, err);
        --got;
        continue;
      }
      in.set_nodelay();
      const int peer = static_cast<int>(hello[1]);
      // Shared memory when both ranks allow it, they are on one host and
      // the segment maps here; otherwise why not.
      transport::Answer answer;
      answer.magic = transport::kAnswerMagic;
      std::unique_ptr<transport::shm::Segment> segment;
      using transport::Refusal;
      std::string why;
      Refusal refusal = Refusal::failed;
      if (offer.host_key != identity.key) {
        why = "different hosts";
        refusal = Refusal::different_hosts;
      } else if (!shm_enabled) {
        why = fmt::format("rank {} has NCCL_SHM_DISABLE=1", rank);
        refusal = Refusal::disabled;
      } else if (offer.shm_enabled == 0) {
        why = fmt::format("rank {} has NCCL_SHM_DISABLE=1", peer);
        refusal = Refusal::disabled;
      } else if (offer.segment[0] == '\0') {
        offer.problem[sizeof(offer.problem) - 1] = '\0';
        why = fmt::format("rank {} could not create a segment: {}", peer,
                          offer.problem[0] != '\0' ? offer.problem : "see its log");
      } else {
        offer.segment[sizeof(offer.segment) - 1] = '\0';
        segment = transport::shm::Segment::open(offer.segment, why);
      }
      answer.use_shm = segment ? 1 : 0;
      answer.refusal = segment ? Refusal::none : refusal;
      std::snprintf(answer.reason, sizeof(answer.reason), "%s", why.c_str());
      // libfabric when shared memory is out and both ranks want it.
      std::shared_ptr<transport::ofi::Endpoint> endpoint;
      if (!segment && offer.ofi != 0 && ofi_wanted && offer.ofi_name_length <= sizeof(offer.ofi_name)) {
        endpoint = open_endpoint(peer, answer.ofi_name, answer.ofi_name_length);
      }
      answer.use_ofi = endpoint ? 1 : 0;
      answer.sockets = !segment && !endpoint && !direct ? std::clamp(offer.sockets, 1u, nsocks) : 1;
      err = in.send_all(&answer, sizeof(answer), deadline);
      if (err != 0) {
        auto f = bootstrap->failure(Stage::transport_connect, fmt::format("rank {} left while connecting", peer));
        f.peer_rank = peer;
        f.errno_text = net::errno_text(err);
        f.hint = "Rank " + std::to_string(peer) + " failed while opening its connections; check its log.";
        throw StageError(f);
      }
      transport::Peer* slot = direct ? &mesh[hello[1]] : &channels[hello[2]]->link.prev;
      const std::string name = direct ? "p2p" : fmt::format("Channel {:02d}", hello[2]);
      const bool shm = segment != nullptr;
      if (shm) {
        slot->connection = std::make_unique<transport::shm::ShmConnection>(std::move(segment), 1, std::move(in));
      } else if (endpoint) {
        std::string ofi_why;
        slot->connection = transport::ofi::connect(endpoint, std::string(offer.ofi_name, offer.ofi_name_length),
                                                   std::move(in), ofi_why);
        if (!slot->connection) {
          auto f = bootstrap->failure(Stage::transport_connect,
                                      fmt::format("libfabric connection from rank {} failed: {}", peer, ofi_why));
          f.peer_rank = peer;
          f.hint = "Set NCCL_NET=Socket to run over sockets, or FI_PROVIDER to try another provider.";
          throw StageError(f);
        }
      } else {
        if (!direct) in.set_buffer_sizes(4 << 20);
        auto c = std::make_unique<transport::SocketConnection>(std::move(in));
        if (answer.sockets > 1) striped.push_back({peer, hello[2], c.get(), answer.sockets});
        slot->connection = std::move(c);
      }
      slot->rank = peer;
      slot->address = b.peers[peer].address;
      connection_infos.push_back({direct ? -1 : static_cast<int>(hello[2]), peer, false,
                                  std::string(transport::name_of(slot->kind())), b.peers[peer].address,
                                  answer.refusal == Refusal::different_hosts || shm ? std::string() : why,
                                  static_cast<int>(answer.sockets)});
      accepted.push_back(
          fmt::format("{} : {} <- {} via {}", name, where(rank), where(peer), transport::name_of(slot->kind())));
    }
    return fmt::format("{} channel(s) from rank {}, direct connections from {} lower rank(s)", channels.size(), prev,
                       rank);
  });
  // A ring connection's socket number `index` (RINGMASTER_NSOCKS_PER_CHANNEL),
  // to the same listener as its first.
  auto open_extra_socket = [&](int peer, std::uint32_t connection, std::uint32_t index) {
    const auto address = net::SocketAddress::parse(b.peers[peer].address);
    net::Socket s;
    store::ConnectAttempts report;
    int err = store::connect_with_backoff({*address}, deadline, s, report);
    const std::uint32_t hello[4] = {kExtraSocketHelloMagic, static_cast<std::uint32_t>(rank), connection, index};
    if (err == 0) err = s.send_all(hello, sizeof(hello), deadline);
    if (err != 0) {
      auto f = bootstrap->failure(Stage::transport_connect,
                                  fmt::format("channel {}: cannot open socket {} to rank {}", connection, index, peer));
      f.peer_rank = peer;
      f.remote_address = b.peers[peer].address;
      f.errno_text = net::errno_text(err);
      f.hint = "The channel's first socket to this rank connected moments ago; rank " + std::to_string(peer) +
               " probably died during init. Check its log.";
      throw StageError(f);
    }
    s.set_nodelay();
    s.set_buffer_sizes(4 << 20);
    return s;
  };
  // The answers to this rank's offers: the transport of each connection
  // it opened, logged as NCCL does.
  bootstrap->run_stage(Stage::transport_connect, [&] {
    std::string detail;
    for (auto& o : opened) {
      transport::Answer answer;
      int err = o.socket.recv_all(&answer, sizeof(answer), deadline);
      if (err == 0 && answer.magic != transport::kAnswerMagic) err = EPROTO;
      if (err != 0) {
        auto f = bootstrap->failure(Stage::transport_connect,
                                    fmt::format("rank {} did not answer the connection offer", o.peer));
        f.peer_rank = o.peer;
        f.remote_address = b.peers[o.peer].address;
        f.errno_text = err == EPROTO ? "unexpected answer" : net::errno_text(err);
        f.hint = "Rank " + std::to_string(o.peer) + " failed while accepting its connections; check its log.";
        throw StageError(f);
      }
      answer.reason[sizeof(answer.reason) - 1] = '\0';
      const std::string why = answer.reason;
      const bool shm = answer.use_shm != 0 && o.segment != nullptr;
      if (o.segment) o.segment->unlink();  // mapped on both sides, or not wanted
      if (shm) {
        o.slot->connection =
            std::make_unique<transport::shm::ShmConnection>(std::move(o.segment), 0, std::move(o.socket));
      } else if (answer.use_ofi != 0 && o.endpoint && answer.ofi_name_length <= sizeof(answer.ofi_name)) {
        std::string ofi_why;
        o.slot->connection = transport::ofi::connect(o.endpoint, std::string(answer.ofi_name, answer.ofi_name_length),
                                                     std::move(o.socket), ofi_why);
        if (!o.slot->connection) {
          auto f = bootstrap->failure(Stage::transport_connect,
                                      fmt::format("libfabric connection to rank {} failed: {}", o.peer, ofi_why));
          f.peer_rank = o.peer;
          f.hint = "Set NCCL_NET=Socket to run over sockets, or FI_PROVIDER to try another provider.";
          throw StageError(f);
        }
      } else {
        o.segment.reset();
        auto c = std::make_unique<transport::SocketConnection>(std::move(o.socket));
        for (std::uint32_t i = 1; i < std::min(answer.sockets, 8u); ++i)
          c->add_socket(open_extra_socket(o.peer, o.connection, i));
        o.slot->connection = std::move(c);
      }
      o.slot->rank = o.peer;
      o.slot->address = b.peers[o.peer].address;
      const std::string line = fmt::format("{} : {} -> {} via {}", connection_name(o.connection), where(rank),
                                           where(o.peer), transport::name_of(o.slot->kind()));
      const auto refusal = shm ? transport::Refusal::none : answer.refusal;
      const bool same_host = refusal != transport::Refusal::different_hosts;
      if (shm) {
        RM_INFO(init, "{}", line);
      } else if (refusal == transport::Refusal::failed) {
        RM_WARN(init, "{}/{} (shared memory not used: {})", line, b.peers[o.peer].address, why);
      } else if (same_host) {
        RM_INFO(init, "{}/{} (shared memory not used: {})", line, b.peers[o.peer].address, why);
      } else {
        RM_INFO(init, "{}/{}", line, b.peers[o.peer].address);
      }
      connection_infos.push_back(
          {o.connection == kMeshConnection ? -1 : static_cast<int>(o.connection), o.peer, true,
           std::string(transport::name_of(o.slot->kind())), b.peers[o.peer].address,
           shm || !same_host ? std::string() : why,
           static_cast<int>(o.slot->kind() == transport::TransportKind::socket ? answer.sockets : 1)});
      detail += (detail.empty() ? "" : "; ") + line + (shm ? "" : "/" + b.peers[o.peer].address) +
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
  if (extra == 0) return;
  bootstrap->run_stage(Stage::transport_connect, [&] {
    std::vector<std::vector<net::Socket>> sockets(striped.size());
    for (std::size_t i = 0; i < striped.size(); ++i)
      sockets[i].resize(striped[i].sockets);
    for (std::size_t got = 0; got < extra; ++got) {
      int err = 0;
      std::array<std::uint32_t, 4> hello{};
      net::Socket in;
      if (got < early_sockets.size()) {
        hello = early_sockets[got].hello;
        in = std::move(early_sockets[got].socket);
      } else {
        in = b.listener.accept(deadline, err);
        if (err != 0) {
          accept_failed(fmt::format("rank {} did not open all {} sockets of its channels to this rank{}", prev,
                                    striped.front().sockets, stray.note()),
                        err);
        }
        err = in.recv_all(hello.data(), sizeof(hello), std::min(deadline, net::Clock::now() + kHelloWait));
      }
      std::size_t which = striped.size();
      for (std::size_t i = 0; err == 0 && i < striped.size(); ++i) {
        if (static_cast<int>(hello[1]) == striped[i].peer && hello[2] == striped[i].connection) which = i;
      }
      if (err == 0 && (hello[0] != kExtraSocketHelloMagic || which == striped.size() || hello[3] == 0 ||
                       hello[3] >= striped[which].sockets || sockets[which][hello[3]].valid())) {
        err = EPROTO;
      }
      if (err != 0) {
        stray.drop(in, err);
        --got;
        continue;
      }
      in.set_nodelay();
      in.set_buffer_sizes(4 << 20);
      sockets[which][hello[3]] = std::move(in);
    }
    for (std::size_t i = 0; i < striped.size(); ++i) {
      for (std::uint32_t k = 1; k < striped[i].sockets; ++k)
        striped[i].socket->add_socket(std::move(sockets[i][k]));
    }
    return fmt::format("{} further socket(s) from rank {} (RINGMASTER_NSOCKS_PER_CHANNEL={})", extra, prev, nsocks);
  });
}

}  // namespace ringmaster

// The table of transports (transports.h) and what one connection set-up
// shares: each transport's four functions, in priority order.
#include "transport/transports.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <string>

#include "base/descriptors.h"
#include "base/log.h"
#include "transport/ofi/ofi.h"
#include "transport/shm/shm.h"
#include "transport/socket/socket_connection.h"

namespace ringmaster::transport {

Pending::Pending() = default;
Pending::Pending(Pending&&) noexcept = default;
Pending& Pending::operator=(Pending&&) noexcept = default;
Pending::~Pending() = default;
Incoming::Incoming() = default;
Incoming::Incoming(Incoming&&) noexcept = default;
Incoming& Incoming::operator=(Incoming&&) noexcept = default;
Incoming::~Incoming() = default;

Setup::Setup(Bootstrap& bootstrap_, const SetupOptions& options_, net::Clock::time_point deadline_)
    : bootstrap(bootstrap_),
      listener(bootstrap_),
      options(options_),
      rank(bootstrap_.config().rank),
      deadline(deadline_),
      identity(shm::host_identity()) {}

std::string Setup::where(int r) const {
  return fmt::format("{}[{}]", r, peer(r).host);
}

std::string Setup::connection_name(std::uint32_t connection) {
  return connection == kDirectConnection ? std::string("p2p") : fmt::format("Channel {:02d}", connection);
}

void Setup::fail(std::string what, int peer_rank, int err, std::string hint) const {
  const std::string errno_text = err == 0        ? std::string()
                                 : err == EPROTO ? std::string("unexpected answer")
                                                 : net::errno_text(err);
  if (!during_init) {
    throw Error(ErrorCategory::peer,
                fmt::format("rank {}: {}{}{}. {}", rank, what, errno_text.empty() ? "" : ": ", errno_text, hint));
  }
  auto f = bootstrap.failure(Stage::transport_connect, std::move(what));
  f.peer_rank = peer_rank;
  if (peer_rank >= 0) f.remote_address = peer(peer_rank).address;
  f.errno_text = errno_text;
  f.timeout = bootstrap.config().bootstrap_timeout;
  f.hint = std::move(hint);
  throw StageError(f);
}

net::Socket Setup::open_socket(int peer_rank, const Hello& hello, int& err) const {
  const auto address = net::SocketAddress::parse(peer(peer_rank).address);
  net::Socket s;
  net::ConnectAttempts report;
  // Retries are reported as the stage's progress during init; a direct
  // connection made later is a call's, and its errors say so.
  err = net::connect_with_backoff({*address}, deadline, s, report,
                                  during_init ? listener.progress(Stage::transport_connect) : net::ConnectProgress{});
  if (err == 0) err = s.send_all(&hello, sizeof(hello), deadline);
  return s;
}

void Setup::choose_fabric(const std::vector<RingNeighbours>& rings) {
  const bool other_hosts = bootstrap.host_count() > 1;
  static const ofi::Availability kNotLoaded{};
  fabric = options.net == "ofi" || (options.net.empty() && other_hosts) ? &ofi::availability(peer(rank).ifname)
                                                                        : &kNotLoaded;
  ofi_wanted = options.net == "ofi" || (options.net.empty() && fabric->usable && fabric->rdma);
  if (fabric->usable) room_for_registered_memory(rings);
  if (options.net != "ofi" || fabric->usable) return;
  auto f = bootstrap.failure(Stage::transport_connect, "NCCL_NET=OFI but libfabric is unusable: " + fabric->why);
  f.category = ErrorCategory::config;
  const char* forced = std::getenv("FI_PROVIDER");
  f.hint = forced != nullptr && *forced != '\0'
               ? fmt::format(
                     "FI_PROVIDER={} hides every other libfabric provider; unset it to let libfabric "
                     "choose (fi_info -l lists them), or unset NCCL_NET to run over sockets.",
                     forced)
           : fabric->providers.empty()
               ? "libfabric lists no provider with RDM endpoints here; unset NCCL_NET to run over sockets."
               : fmt::format(
                     "Providers here: {}. Set FI_PROVIDER to one of them, or unset NCCL_NET to run over "
                     "sockets.",
                     fmt::join(fabric->providers, ", "));
  throw StageError(f);
}

void Setup::room_for_registered_memory(const std::vector<RingNeighbours>& rings) const {
  if (!ofi_wanted || fabric == nullptr || !fabric->rdma) return;
  std::uint64_t connections = 0;
  for (const auto& r : rings) {
    for (const int peer : {r.next, r.prev})
      connections += peer != rank && !same_host(peer) ? 1 : 0;
  }
  const std::uint64_t each = ofi::registered_bytes_per_connection();
  const std::uint64_t needed = connections * each;
  const auto room = base::make_room_for_locked_bytes(needed);
  const auto mib = [](std::uint64_t bytes) {
    return bytes == std::numeric_limits<std::uint64_t>::max() ? std::string("unlimited")
           : bytes >= (1U << 20)                              ? fmt::format("{} MiB", bytes >> 20)
                                                              : fmt::format("{} KiB", bytes >> 10);
  };
  if (room.raised) {
    RM_INFO(init, "RLIMIT_MEMLOCK raised to {} (hard limit {}) for this rank's registered buffers", mib(room.soft),
            mib(room.hard));
  }
  if (room.enough) return;
  auto f = bootstrap.failure(
      Stage::transport_connect,
      fmt::format("rank {} registers at least {} with libfabric's {} provider, which pins it in RAM, and may lock {} "
                  "(RLIMIT_MEMLOCK, hard limit {}): {} connection(s) to ranks on other hosts, {} of bounce buffers "
                  "each, before what the provider registers of its own",
                  rank, mib(needed), fabric->provider, mib(room.soft), mib(room.hard), connections, mib(each)));
  f.category = ErrorCategory::config;
  f.hint =
      "Raise the locked-memory limit for the ranks to unlimited (ulimit -l unlimited; LimitMEMLOCK=infinity in a "
      "systemd unit; --ulimit memlock=-1 for a container; memlock in /etc/security/limits.conf): EFA and verbs pin "
      "every buffer they move data from. Or run over sockets (NCCL_NET=Socket), at a fraction of the fabric's speed.";
  throw StageError(f);
}

std::string Setup::why_no_ofi() const {
  if (options.net == "socket") return fmt::format("rank {} has NCCL_NET=Socket", rank);
  if (fabric == nullptr || (!fabric->usable && fabric->why.empty()))
    return fmt::format("rank {} has NCCL_NET unset and did not load libfabric", rank);
  if (!fabric->usable)
    return fmt::format("rank {} has NCCL_NET unset and libfabric is unusable there: {}", rank, fabric->why);
  return fmt::format("rank {} has NCCL_NET unset and its libfabric provider ({}) is not RDMA, so it runs over sockets",
                     rank, fabric->provider);
}

namespace {

// "rank A must reach rank B through libfabric, but WHY": one sentence for
// every side of a connection where libfabric was required and not taken.
std::string libfabric_refused(int from, int to, const std::string& why) {
  return fmt::format("rank {} must reach rank {} through libfabric, but {}", from, to, why);
}

constexpr const char* kSameNetHint =
    "Set NCCL_NET alike on every rank: NCCL_NET=OFI where libfabric serves the fabric (EFA), or NCCL_NET=Socket "
    "everywhere to run over sockets on purpose.";

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
// take the segment. Where it is required (Setup::ofi_required), a rank
// that cannot open an endpoint fails rather than fall back to sockets.
std::shared_ptr<ofi::Endpoint> open_endpoint(const Setup& s, int peer, char* name, std::uint32_t& length,
                                             std::string& why) {
  auto e = ofi::open_endpoint(s.peer(s.rank).ifname, why);
  if (!e) {
    why = "it could not open a libfabric endpoint: " + why;
  } else if (const std::string address = ofi::endpoint_name(*e); address.size() > sizeof(Offer::ofi_name)) {
    why = fmt::format("its libfabric address of {} bytes does not fit the offer", address.size());
    e.reset();
  } else {
    std::memcpy(name, address.data(), address.size());
    length = static_cast<std::uint32_t>(address.size());
    return e;
  }
  if (s.ofi_required(peer)) {
    s.fail(libfabric_refused(s.rank, peer, why), peer, 0,
           "Fix libfabric on this host (fi_info -l lists its providers), or set NCCL_NET=Socket on every rank to "
           "run over sockets on purpose.");
  }
  RM_WARN(init, "{} -> {}: {}; sockets instead", s.where(s.rank), s.where(peer), why);
  return e;
}

void ofi_offer(const Setup& s, Pending& p, Offer& offer) {
  offer.ofi_required = s.ofi_required(p.peer) ? 1 : 0;
  if (s.ofi_wanted) p.endpoint = open_endpoint(s, p.peer, offer.ofi_name, offer.ofi_name_length, p.why_no_ofi);
  offer.ofi = p.endpoint ? 1 : 0;
  if (!s.ofi_wanted) p.why_no_ofi = s.why_no_ofi();
  if (!p.endpoint) std::snprintf(offer.no_ofi, sizeof(offer.no_ofi), "%s", p.why_no_ofi.c_str());
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
  if (!s.ofi_wanted) {
    in.why_not_ofi = s.why_no_ofi();
    return false;
  }
  if (in.offer.ofi == 0 || in.offer.ofi_name_length > sizeof(in.offer.ofi_name)) {
    in.offer.no_ofi[sizeof(in.offer.no_ofi) - 1] = '\0';
    in.why_not_ofi = fmt::format("rank {} offered no libfabric endpoint: {}", in.peer,
                                 in.offer.no_ofi[0] != '\0' ? in.offer.no_ofi : "see its log");
    return false;
  }
  in.endpoint = open_endpoint(s, in.peer, answer.ofi_name, answer.ofi_name_length, in.why_not_ofi);
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

}  // namespace

const TransportEntry* entry_of(TransportKind kind) {
  for (const auto& t : kTransports) {
    if (t.kind == kind) return &t;
  }
  return nullptr;
}

void open_connection(const Setup& s, Pending& p) {
  int err = 0;
  p.socket = s.open_socket(p.peer, Hello{kChannelHello, static_cast<std::uint32_t>(s.rank), p.connection, 0}, err);
  Offer offer;
  offer.magic = kOfferMagic;
  if (err == 0) {
    for (const auto& t : kTransports)
      t.offer(s, p, offer);
    err = p.socket.send_all(&offer, sizeof(offer), s.deadline);
  }
  if (err != 0) {
    s.fail(p.connection == kDirectConnection
               ? fmt::format("cannot connect to rank {}", p.peer)
               : fmt::format("channel {}: cannot connect to rank {}", p.connection, p.peer),
           p.peer, err,
           "The bootstrap worked moments ago on the same port: rank " + std::to_string(p.peer) +
               " probably died, or traffic between these two hosts is blocked. Check its log.");
  }
  p.socket.set_nodelay();
  if (p.connection != kDirectConnection) p.socket.set_buffer_sizes(kSocketBufferBytes);
}

Answer answer_offer(const Setup& s, Incoming& in, std::unique_ptr<Connection>& made) {
  in.socket.set_nodelay();
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
  // libfabric required by either side and not taken: the answer says so,
  // then this rank fails (the opener fails too, reading the answer).
  std::string mismatch;
  if (chosen->kind == TransportKind::socket && !s.same_host(in.peer)) {
    if (s.ofi_required(in.peer)) {
      answer.ofi_required = 1;
      mismatch = libfabric_refused(s.rank, in.peer, in.why_not_ofi);
    } else if (in.offer.ofi_required != 0) {
      mismatch = libfabric_refused(in.peer, s.rank, in.why_not_ofi);
    }
    std::snprintf(answer.no_ofi, sizeof(answer.no_ofi), "%s", in.why_not_ofi.c_str());
  }
  if (const int err = in.socket.send_all(&answer, sizeof(answer), s.deadline); err != 0) {
    s.fail(fmt::format("rank {} left while connecting", in.peer), in.peer, err,
           "Rank " + std::to_string(in.peer) + " failed while opening its connections; check its log.");
  }
  if (!mismatch.empty()) s.fail(std::move(mismatch), in.peer, 0, kSameNetHint);
  // The connection keeps the socket (shared memory and libfabric to
  // notice a peer that died).
  made = chosen->accepted(s, in, answer);
  return answer;
}

Answer complete_connection(const Setup& s, Pending& p, std::unique_ptr<Connection>& made) {
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
  answer.no_ofi[sizeof(answer.no_ofi) - 1] = '\0';
  if (answer.transport == TransportKind::socket && !s.same_host(p.peer)) {
    if (s.ofi_required(p.peer)) {
      s.fail(libfabric_refused(s.rank, p.peer, answer.no_ofi[0] != '\0' ? answer.no_ofi : "it answered over sockets"),
             p.peer, 0, kSameNetHint);
    }
    if (answer.ofi_required != 0) {
      s.fail(libfabric_refused(p.peer, s.rank, p.why_no_ofi), p.peer, 0, kSameNetHint);
    }
  }
  if (p.segment) p.segment->unlink();  // mapped on both sides, or not wanted
  made = chosen->complete(s, p, answer);
  p.segment.reset();
  return answer;
}

void StrayConnections::drop(net::Socket& socket, int err) {
  ++count;
  last = fmt::format("{} ({})", socket.peer_address().to_string(),
                     err == EPROTO ? std::string("not a channel hello of this job") : net::errno_text(err));
  RM_INFO(init, "dropped a connection on the bootstrap port from {}", last);
  socket = net::Socket();
}

std::string StrayConnections::note() const {
  return count == 0 ? std::string() : fmt::format(" ({} stray connection(s) dropped, the last from {})", count, last);
}

}  // namespace ringmaster::transport

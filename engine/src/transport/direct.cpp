#include "transport/direct.h"

#include <poll.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <string>

#include "base/log.h"
#include "ringmaster/status.h"

namespace ringmaster::transport {
namespace {

// How long one wait on the listener or an answer lasts before the waiter
// looks at abort, its deadline and the ring again.
constexpr auto kWaitSlice = std::chrono::milliseconds(20);

// True when `fd` has something to read before `until`.
bool readable(int fd, net::Clock::time_point until) {
  const auto ms = std::chrono::ceil<std::chrono::milliseconds>(until - net::Clock::now()).count();
  pollfd p{fd, POLLIN, 0};
  return ::poll(&p, 1, static_cast<int>(std::max<std::int64_t>(ms, 0))) > 0;
}

std::string call_name(const StepHeader* call) {
  if (call == nullptr) return "init";
  return transport::call_name(static_cast<Collective>(call->collective), call->seq);
}

}  // namespace

DirectConnections::DirectConnections(Bootstrap& bootstrap, const SetupOptions& options, std::mutex& store_mutex)
    : bootstrap_(bootstrap),
      options_(options),
      store_mutex_(store_mutex),
      setup_(bootstrap, options_, net::Clock::now() + bootstrap.config().bootstrap_timeout) {}

DirectConnections::~DirectConnections() = default;

void DirectConnections::start() {
  setup_.choose_fabric();
}

void DirectConnections::keep(const Hello& hello, net::Socket socket, StrayConnections& stray) {
  Incoming in;
  in.socket = std::move(socket);
  in.direct = true;
  in.peer = static_cast<int>(hello.rank);
  int err = in.socket.recv_all(&in.offer, sizeof(in.offer), net::Clock::now() + kHelloWait);
  if (err == 0 && (in.offer.magic != kOfferMagic || in.peer >= setup_.rank || waiting_.count(in.peer) != 0)) {
    err = EPROTO;
  }
  if (err != 0) {
    stray.drop(in.socket, err);
    return;
  }
  waiting_.emplace(in.peer, std::move(in));
}

bool DirectConnections::accept_one(ChannelLink& link, net::Clock::time_point until) {
  int err = 0;
  net::Socket socket = setup_.listener.accept(until, err);
  if (err == ETIMEDOUT) return false;
  if (err != 0) {
    setup_.fail(fmt::format("the bootstrap listener failed while waiting for direct connections"), -1, err,
                "This rank's listening socket broke; the communicator cannot make new connections.");
  }
  Hello hello;
  err = socket.recv_all(&hello, sizeof(hello), std::min(setup_.deadline, net::Clock::now() + kHelloWait));
  const auto from = static_cast<std::size_t>(hello.rank);
  if (err == 0 && (hello.magic != kChannelHello || hello.connection != kDirectConnection || from >= link.mesh.size() ||
                   link.mesh[from].valid())) {
    err = EPROTO;
  }
  if (err != 0) {
    stray_.drop(socket, err);
    return true;
  }
  keep(hello, std::move(socket), stray_);
  return true;
}

void DirectConnections::check_waiting(ChannelLink& link, int peer, const StepHeader* call,
                                      net::Clock::time_point deadline, const char* waiting_for) const {
  if (link.aborted != nullptr && link.aborted->load()) {
    throw Error(ErrorCategory::peer, "the communicator was aborted");
  }
  // A peer that runs this call over the ring instead (another algorithm)
  // never opens its side: its step on the ring says so.
  if (call != nullptr) link.look_for_step_elsewhere(*call, peer, &link.mesh[static_cast<std::size_t>(peer)], 0);
  if (net::Clock::now() < deadline) return;
  if (setup_.during_init) {
    setup_.fail(fmt::format("rank {} did not {}{}", peer, waiting_for, stray_.note()), peer, ETIMEDOUT,
                "Rank " + std::to_string(peer) + " failed while connecting; check its log.");
  }
  throw Error(
      ErrorCategory::timeout,
      fmt::format("rank {}: rank {} did not {} for {} within {:.1f} s "
                  "(RINGMASTER_COLL_TIMEOUT){}; it has not reached this call, or it runs another one",
                  setup_.rank, peer, waiting_for, call_name(call), link.timeout.count() / 1000.0, stray_.note()));
}

std::vector<int> DirectConnections::missing(const ChannelLink& link, std::span<const int> peers) const {
  std::vector<int> need;
  for (const int p : peers) {
    if (p < 0 || p == setup_.rank || link.mesh.at(static_cast<std::size_t>(p)).valid()) continue;
    if (std::find(need.begin(), need.end(), p) == need.end()) need.push_back(p);
  }
  return need;
}

void DirectConnections::connect(ChannelLink& link, std::initializer_list<int> peers, const StepHeader& call) {
  const auto need = missing(link, {peers.begin(), peers.size()});
  if (need.empty()) return;
  setup_.during_init = false;
  connect_peers(link, need, &call);
}

void DirectConnections::connect_at_init(ChannelLink& link, const std::vector<int>& peers) {
  setup_.during_init = true;
  connect_peers(link, missing(link, peers), nullptr);
}

void DirectConnections::connect_peers(ChannelLink& link, const std::vector<int>& need, const StepHeader* call) {
  const int rank = setup_.rank;
  // At init the bootstrap's deadline holds; later a call's connections
  // may take as long as one of its steps.
  const auto deadline = call == nullptr ? setup_.deadline : net::Clock::now() + link.timeout;
  setup_.deadline = deadline;
  {
    // Only the addresses of the ranks this call reaches.
    std::lock_guard lock(store_mutex_);
    bootstrap_.fetch_peers(need);
  }
  auto record = [&](int peer, bool outgoing, const Answer& answer, std::unique_ptr<Connection> connection,
                    const std::string& why) {
    const bool shm = answer.transport == TransportKind::shm;
    const auto refusal = shm ? Refusal::none : answer.refusal;
    const bool same_host = refusal != Refusal::different_hosts;
    const std::string& address = setup_.peer(peer).address;
    const std::string line = fmt::format("p2p : {} {} {} via {}{}", setup_.where(rank), outgoing ? "->" : "<-",
                                         setup_.where(peer), name_of(answer.transport), shm ? "" : "/" + address);
    if (!outgoing || shm || !same_host) {
      RM_INFO(init, "{}", line);
    } else if (refusal == Refusal::failed) {
      RM_WARN(init, "{} (shared memory not used: {})", line, why);
    } else {
      RM_INFO(init, "{} (shared memory not used: {})", line, why);
    }
    link.attach_mesh(peer, Peer{std::move(connection), peer, address});
    std::lock_guard lock(made_mutex_);
    made_.push_back({-1, peer, outgoing, answer.transport, address, shm || !same_host ? std::string() : why, 1});
  };

  // Offers to the higher ranks first: they go out without waiting.
  std::vector<Pending> opened;
  for (const int peer : need) {
    if (peer < rank) continue;
    Pending p;
    p.peer = peer;
    p.connection = kDirectConnection;
    open_connection(setup_, p);
    opened.push_back(std::move(p));
  }
  // Then the lower ranks' offers, in whatever order they come.
  for (const int peer : need) {
    if (peer > rank) continue;
    for (auto found = waiting_.find(peer); found == waiting_.end(); found = waiting_.find(peer)) {
      check_waiting(link, peer, call, deadline, "open its direct connection to this rank");
      accept_one(link, std::min(deadline, net::Clock::now() + kWaitSlice));
    }
    Incoming in = std::move(waiting_.at(peer));
    waiting_.erase(peer);
    std::unique_ptr<Connection> connection;
    const Answer answer = answer_offer(setup_, in, connection);
    const bool shm = answer.transport == TransportKind::shm;
    record(peer, false, answer, std::move(connection),
           answer.refusal == Refusal::different_hosts || shm ? std::string() : in.why_not_shm);
  }
  // Then the answers to this rank's offers; a lower rank's offer that
  // comes meanwhile is kept for its call.
  for (auto& p : opened) {
    for (;;) {
      check_waiting(link, p.peer, call, deadline, "answer the direct connection this rank opened");
      if (readable(p.socket.fd(), std::min(deadline, net::Clock::now() + kWaitSlice))) break;
      accept_one(link, net::Clock::now());
    }
    std::unique_ptr<Connection> connection;
    const Answer answer = complete_connection(setup_, p, connection);
    record(p.peer, true, answer, std::move(connection), answer.reason);
  }
}

std::vector<Connected> DirectConnections::made() const {
  std::lock_guard lock(made_mutex_);
  return made_;
}

}  // namespace ringmaster::transport

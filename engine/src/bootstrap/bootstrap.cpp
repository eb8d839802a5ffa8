// The staged init: RESOLVE_MASTER -> STORE_CONNECT -> STORE_HANDSHAKE ->
// STORE_BARRIER -> BOOTSTRAP_LISTEN -> BOOTSTRAP_RING -> ADDRESS_EXCHANGE ->
// READY. Each stage is timed and reported; a failure becomes a StageError
// whose hint is chosen from what failed and how (hints.cpp).
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <optional>
#include <thread>

#include "base/log.h"
#include "base/params.h"
#include "bootstrap/bootstrap_impl.h"
#include "bootstrap/hints.h"
#include "net/interfaces.h"
#include "ringmaster/status.h"
#include "store/client.h"
#include "store/etcd.h"

namespace ringmaster {
namespace {

using Clock = net::Clock;
using std::chrono::duration_cast;
using std::chrono::milliseconds;

constexpr std::uint32_t kRingHelloMagic = 0x52494E47;      // "RING"
constexpr std::uint32_t kExchangeHelloMagic = 0x58434847;  // "GHCX": a later round of the address exchange

// Rounds of Bruck's all-gather over n ranks: ceil(log2 n).
int exchange_rounds(int n) {
  int rounds = 0;
  for (long long have = 1; have < n; have *= 2)
    ++rounds;
  return rounds;
}

std::string hostname() {
  char name[256] = {};
  gethostname(name, sizeof(name) - 1);
  return name;
}

// This rank's host as the other ranks see it: NCCL_HOSTID when set (ranks
// of one machine standing for several nodes), else the hostname.
std::string host_id() {
  const auto id = param_env(Param::HostId);
  if (!id) return hostname();
  if (id->size() > 200 || std::any_of(id->begin(), id->end(), [](unsigned char ch) { return ch <= ' ' || ch > '~'; }))
    throw Error(ErrorCategory::config,
                fmt::format("NCCL_HOSTID is {} characters long or holds a space or control character; give at most "
                            "200 printable characters without spaces",
                            id->size()));
  return *id;
}

int family_of(const std::string& name) {
  if (name == "AF_INET") return AF_INET;
  if (name == "AF_INET6") return AF_INET6;
  return AF_UNSPEC;
}

// Runs the stages in order, timing each and reporting it; turns a failure
// into a reported event plus a StageError.
class StageRunner {
 public:
  explicit StageRunner(Bootstrap::Impl& state) : state_(state) {}

  template <class Body>
  void run(Stage stage, Body&& body) {
    current_ = stage;
    begin_wall_ = std::chrono::system_clock::now();
    begin_ = Clock::now();
    state_.stage_begin = begin_;
    std::string detail;
    try {
      detail = body();
    } catch (const StageError& e) {
      fail(e.failure());
      throw;
    } catch (const Error& e) {
      // An unexpected failure inside a stage still names its stage.
      auto f = failure(e.status().message());
      f.category = e.category();
      fail(f);
      throw StageError(f);
    }
    finish(true, detail);
  }

  milliseconds elapsed() const { return duration_cast<milliseconds>(Clock::now() - begin_); }

  // While a connect of the current stage retries: what its attempts meet,
  // as progress events (never in the final table).
  net::ConnectProgress progress_reporter() { return connect_progress(state_, current_); }
  Clock::time_point stage_begin() const { return begin_; }

  // A failure of the current stage with the fields every failure has.
  StageFailure failure(std::string summary) const {
    StageFailure f;
    f.stage = current_;
    f.rank = state_.config.rank;
    f.world_size = state_.config.world_size;
    f.elapsed = elapsed();
    f.summary = std::move(summary);
    return f;
  }

 private:
  void fail(const StageFailure& f) {
    finish(false, f.summary + (f.hint.empty() ? "" : " | hint: " + f.hint));
    RM_WARN(init, "{}", f.to_string());
  }

  void finish(bool ok, std::string detail) {
    StageEvent event;
    event.stage = current_;
    event.rank = state_.config.rank;
    event.begin = begin_wall_;
    event.duration = Clock::now() - begin_;
    event.ok = ok;
    event.detail = std::move(detail);
    RM_INFO(bootstrap, "{} {} in {:.3f} ms{}{}", name_of(current_), ok ? "done" : "FAILED",
            event.duration.count() / 1e6, event.detail.empty() ? "" : ": ", event.detail);
    state_.events.push_back(event);
    if (state_.on_event) state_.on_event(event);
  }

  Bootstrap::Impl& state_;
  Stage current_ = Stage::resolve_master;
  Clock::time_point begin_;
  std::chrono::system_clock::time_point begin_wall_;
};

std::string key(const Config& c, const std::string& name) {
  return store_key(c, name);
}

// Length-prefixed blobs on the bootstrap ring.
int send_blob(const net::Socket& s, const std::string& blob, Clock::time_point deadline) {
  const std::uint64_t size = blob.size();
  if (const int err = s.send_all(&size, sizeof(size), deadline); err != 0) return err;
  return s.send_all(blob.data(), blob.size(), deadline);
}

int recv_blob(const net::Socket& s, std::string& blob, Clock::time_point deadline,
              std::uint64_t largest = std::uint64_t{1} << 20) {
  std::uint64_t size = 0;
  if (const int err = s.recv_all(&size, sizeof(size), deadline); err != 0) return err;
  if (size > largest) return EPROTO;
  blob.assign(size, '\0');
  return s.recv_all(blob.data(), size, deadline);
}

// "rank host pid address ifname settings"; settings "-" when empty.
std::string encode(const PeerInfo& p) {
  return fmt::format("{} {} {} {} {} {}", p.rank, p.host, p.pid, p.address, p.ifname,
                     p.settings.empty() ? std::string("-") : p.settings);
}

std::optional<PeerInfo> decode(const std::string& text) {
  PeerInfo p;
  char host[256] = {}, address[128] = {}, ifname[64] = {};
  int used = 0;
  if (std::sscanf(text.c_str(), "%d %255s %d %127s %63s %n", &p.rank, host, &p.pid, address, ifname, &used) != 5 ||
      used == 0) {
    return std::nullopt;
  }
  p.host = host;
  p.address = address;
  p.ifname = ifname;
  const std::string_view rest = std::string_view(text).substr(static_cast<std::size_t>(used));
  if (rest.empty() || rest.find_first_of(" \t\n") != std::string_view::npos) return std::nullopt;
  if (rest != "-") p.settings = std::string(rest);
  return p;
}

// True when `address` belongs to this host (binding to it works).
bool is_local_address(const net::SocketAddress& address) {
  net::SocketAddress probe = address;
  probe.set_port(0);
  int err = 0;
  auto s = net::Socket::listen(probe, 1, err);
  return s.valid();
}

}  // namespace

Bootstrap::Bootstrap(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Bootstrap::~Bootstrap() = default;
const Config& Bootstrap::config() const noexcept {
  return impl_->config;
}
const std::vector<PeerInfo>& Bootstrap::peers() const noexcept {
  return impl_->peers;
}
bool Bootstrap::hosts_store() const noexcept {
  return impl_->store_server != nullptr;
}
const std::vector<StageEvent>& Bootstrap::events() const noexcept {
  return impl_->events;
}

namespace {

// Round `round` of the address exchange sends to rank `to`: a connection
// to its bootstrap port (the address it published) that says so.
int connect_exchange_link(Bootstrap::Impl& s, const Config& c, int round, Clock::time_point deadline) {
  const auto found = s.exchange_to.find(round);
  if (found == s.exchange_to.end()) return EPROTO;
  const std::optional<net::SocketAddress> address = found->second;
  net::Socket link;
  net::ConnectAttempts attempts;
  int err = net::connect_with_backoff({*address}, deadline, link, attempts);
  const std::uint32_t hello[3] = {kExchangeHelloMagic, static_cast<std::uint32_t>(c.rank),
                                  static_cast<std::uint32_t>(round)};
  if (err == 0) err = link.send_all(hello, sizeof(hello), deadline);
  if (err != 0) return err;
  link.set_nodelay();
  s.exchange_out[round] = std::move(link);
  return 0;
}

// Waits for round `round`'s connection from rank - 2^round; a connection
// for a later round waits in s.exchange_in for it, any other is dropped.
int accept_exchange_link(Bootstrap::Impl& s, const Config& c, int round, Clock::time_point deadline) {
  const int n = c.world_size;
  const int rounds = exchange_rounds(n);
  while (s.exchange_in.count(round) == 0) {
    int err = 0;
    net::Socket candidate = s.listener.accept(deadline, err);
    if (err != 0) return err;
    std::uint32_t got[4] = {};
    int hello_err = candidate.recv_all(got, 3 * sizeof(got[0]), std::min(deadline, Clock::now() + kHelloWait));
    // A rank done with the exchange connects for its channels: any other
    // connection with a 16-byte hello waits for TRANSPORT_CONNECT, which
    // takes or drops it by that hello.
    if (hello_err == 0 && got[0] != kExchangeHelloMagic) {
      hello_err = candidate.recv_all(&got[3], sizeof(got[3]), std::min(deadline, Clock::now() + kHelloWait));
      if (hello_err == 0) {
        std::array<std::uint32_t, 4> hello{got[0], got[1], got[2], got[3]};
        s.early_connections.emplace_back(hello, std::move(candidate));
        continue;
      }
    }
    const int their_round = static_cast<int>(got[2]);
    if (hello_err == 0 && got[0] == kExchangeHelloMagic && their_round >= 1 && their_round < rounds &&
        static_cast<int>(got[1]) == (c.rank - (1 << their_round) + n) % n && s.exchange_in.count(their_round) == 0) {
      candidate.set_nodelay();
      s.exchange_in[their_round] = std::move(candidate);
      continue;
    }
    RM_INFO(bootstrap, "dropped a connection on the bootstrap port from {} during the address exchange",
            candidate.peer_address().to_string());
  }
  return 0;
}

}  // namespace

std::unique_ptr<Bootstrap> Bootstrap::run(const Config& config, const StageCallback& on_event, bool finish,
                                          std::string settings) {
  config.validate();
  if (settings.find_first_of(" \t\n") != std::string::npos) {
    throw Error(ErrorCategory::internal, "bootstrap settings must be one word: '" + settings + "'");
  }
  auto state = std::make_unique<Impl>();
  state->config = config;
  state->on_event = on_event;
  state->init_begin = Clock::now();
  auto& s = *state;
  const Config& c = s.config;
  log::set_thread_rank(c.rank);
  StageRunner stages(s);
  const int family = family_of(c.socket_family);
  // "[::1]:29500" for an IPv6 literal, as a URL writes it: "::1:29500"
  // does not say where the address ends.
  // With RINGMASTER_STORE=etcd://... the keys live in etcd: its host
  // takes MASTER_ADDR's place and no rank hosts a store.
  const bool on_etcd = !c.etcd_host.empty();
  const std::string& store_host = on_etcd ? c.etcd_host : c.master_addr;
  const std::uint16_t store_port = on_etcd ? c.etcd_port : c.master_port;
  const bool ipv6_literal = store_host.find(':') != std::string::npos && store_host.front() != '[';
  s.master = (ipv6_literal ? "[" + store_host + "]" : store_host) + ":" + std::to_string(store_port);
  if (on_etcd) s.master = "etcd://" + s.master + c.etcd_prefix;
  const std::string& master = s.master;
  auto store_lost_hint = [&] { return on_etcd ? hint_etcd_lost() : hint_store_lost(); };
  std::vector<net::SocketAddress> master_addresses;
  bool host_store = false;

  stages.run(Stage::resolve_master, [&] {
    // A name that does not resolve yet is asked again until the store's
    // timeout, as torch's TCPStore client does: a headless Service's
    // record appears only once its pod is ready, often after the workers
    // started. Each failure is reported live.
    const auto deadline = stages.stage_begin() + c.store_timeout;
    auto resolved = net::resolve(store_host, store_port, family);
    int attempts = 1;
    Clock::time_point last_report{};
    for (auto pause = milliseconds(50); !resolved.ok() && net::may_resolve_later(resolved.gai_error);
         pause = std::min(pause * 2, milliseconds(1000))) {
      if (Clock::now() - last_report >= std::chrono::seconds(1)) {
        last_report = Clock::now();
        report_unresolved(s, master, resolved, attempts);
      }
      if (Clock::now() >= deadline) break;
      std::this_thread::sleep_for(std::min<Clock::duration>(pause, deadline - Clock::now()));
      resolved = net::resolve(store_host, store_port, family);
      ++attempts;
    }
    if (!resolved.ok()) {
      auto f =
          stages.failure(fmt::format("{} '{}' does not resolve ({} attempt(s) in {:.1f} s)",
                                     on_etcd ? "RINGMASTER_STORE's etcd host" : "MASTER_ADDR", store_host, attempts,
                                     std::chrono::duration<double>(Clock::now() - stages.stage_begin()).count()));
      f.category = ErrorCategory::config;
      f.remote_address = master;
      f.errno_text = "getaddrinfo: " + (resolved.error.empty() ? std::string("no address") : resolved.error);
      f.timeout = c.store_timeout;
      f.hint = on_etcd ? hint_etcd_unresolvable(store_host) : hint_unresolvable_master(c.master_addr);
      throw StageError(f);
    }
    master_addresses = resolved.addresses;
    host_store = !on_etcd && c.rank == 0 &&
                 (c.store_hosting == StoreHosting::host ||
                  (c.store_hosting == StoreHosting::automatic && is_local_address(master_addresses[0])));
    return fmt::format("{} -> {}{}", store_host, master_addresses[0].host(),
                       host_store ? " (this rank hosts the store)" : "");
  });

  stages.run(Stage::store_connect, [&] {
    const auto deadline = stages.stage_begin() + c.store_timeout;
    if (host_store) {
      // On MASTER_ADDR's own address when it is this host's, where every
      // rank connects (127.0.0.1 stays on loopback); on every address only
      // when the store is hosted for an address that is not local (a
      // forwarded one).
      const std::string listen_host = is_local_address(master_addresses[0]) ? master_addresses[0].host() : "";
      try {
        s.store_server = std::make_unique<TcpStoreServer>(
            StoreServerOptions{.host = listen_host, .port = c.master_port, .expected_clients = c.world_size});
      } catch (const Error& e) {
        auto f = stages.failure("rank 0 cannot host the store on MASTER_PORT " + std::to_string(c.master_port));
        f.local_address = (listen_host.empty()                          ? std::string("*")
                           : listen_host.find(':') != std::string::npos ? "[" + listen_host + "]"
                                                                        : listen_host) +
                          ":" + std::to_string(c.master_port);
        f.errno_text = e.status().message();
        f.hint = hint_store_port_in_use(c.master_port);
        throw StageError(f);
      }
    }
    net::Socket socket;
    net::ConnectAttempts report;
    const int err = net::connect_with_backoff(master_addresses, deadline, socket, report, stages.progress_reporter());
    if (err != 0) {
      auto f = stages.failure(fmt::format("cannot connect to the store at {} ({})", master, report.summary()));
      f.category = err == ETIMEDOUT ? ErrorCategory::timeout : ErrorCategory::network;
      f.remote_address = report.last_address.to_string();
      f.errno_text = net::errno_text(err);
      f.timeout = c.store_timeout;
      f.hint = on_etcd ? hint_etcd_connect(err, store_host, store_port) : hint_store_connect(err, c.master_port);
      throw StageError(f);
    }
    s.local_address = socket.local_address();
    if (on_etcd) {
      store::EtcdEndpoint endpoint{
          .host = store_host, .address = socket.peer_address(), .prefix = c.etcd_prefix, .lease = c.etcd_lease};
      s.store = std::make_unique<store::EtcdStore>(std::move(socket), std::move(endpoint), c.store_timeout);
    } else {
      s.store = std::make_unique<store::Client>(std::move(socket), c.store_timeout);
    }
    return fmt::format("{} from {} after {} attempt(s)", master, s.local_address.to_string(), report.attempts);
  });

  stages.run(Stage::store_handshake, [&] {
    try {
      SilentPeerReporter silent(s, Stage::store_handshake, master,
                                on_etcd ? "etcd's version and lease" : "the TCPStore handshake");
      s.store->handshake(stages.stage_begin() + c.store_timeout);
    } catch (const Error& e) {
      auto f = stages.failure(on_etcd ? "etcd at " + master + " did not answer its version and a lease"
                                      : "the store at " + master + " did not answer the TCPStore handshake");
      f.category = e.category();
      f.local_address = s.local_address.to_string();
      f.remote_address = master;
      f.errno_text = e.status().message();
      f.timeout = c.store_timeout;
      f.hint = on_etcd ? hint_etcd_handshake() : hint_store_handshake();
      throw StageError(f);
    }
    return s.store->handshake_detail();
  });

  stages.run(Stage::store_barrier, [&] {
    const std::string me = fmt::format("{}:{}", hostname(), getpid());
    try {
      const std::string ws = std::to_string(c.world_size);
      const std::string agreed = s.store->compare_set(key(c, "world_size"), "", ws);
      if (agreed != ws) {
        auto f =
            stages.failure(fmt::format("WORLD_SIZE mismatch: this rank has {}, the store already has {}", ws, agreed));
        f.category = ErrorCategory::config;
        f.remote_address = master;
        f.hint = hint_world_size_mismatch();
        throw StageError(f);
      }
      const std::string owner = s.store->compare_set(key(c, "rank/" + std::to_string(c.rank)), "", me);
      if (owner != me) {
        auto f =
            stages.failure(fmt::format("rank {} is used twice: by {} and by {} (this process)", c.rank, owner, me));
        f.category = ErrorCategory::config;
        f.remote_address = master;
        f.hint = hint_duplicate_rank(c.rank);
        throw StageError(f);
      }
      // The rank that makes the count whole says so under one key, which
      // every rank waits on: O(1) store operations a rank. (Waiting on
      // every rank's key was N keys checked at each of N waits, and each
      // SET woke every waiter to check its N keys again.)
      if (s.store->add(key(c, "joined"), 1) == c.world_size) s.store->set(key(c, "all_joined"), "1");
      auto left = c.store_timeout - stages.elapsed();
      // The rank hosting the store waits a little longer than the others, so
      // that when the barrier times out they can still ask the store who is
      // missing before this process (and the store with it) goes away.
      if (s.store_server) left += std::min(c.store_timeout / 10, milliseconds(5000));
      if (!s.store->wait({key(c, "all_joined")}, std::max(left, milliseconds(1)))) {
        auto f = stages.failure("not every rank reached the store barrier");
        f.category = ErrorCategory::timeout;
        f.remote_address = master;
        f.timeout = c.store_timeout;
        f.joined = 0;
        for (int r = 0; r < c.world_size; ++r) {
          if (s.store->check({key(c, "rank/" + std::to_string(r))})) {
            ++f.joined;
          } else {
            f.missing.push_back(r);
          }
        }
        f.summary += " (" + f.joined_text() + ")";
        f.hint = hint_barrier_timeout(f.missing);
        throw StageError(f);
      }
    } catch (const StageError&) {
      throw;
    } catch (const Error& e) {
      auto f = stages.failure(on_etcd ? "the connection to etcd failed during the barrier"
                                      : "the store connection failed during the barrier");
      f.category = e.category();
      f.remote_address = master;
      f.errno_text = e.status().message();
      f.hint = store_lost_hint();
      throw StageError(f);
    }
    return fmt::format("{}/{} joined", c.world_size, c.world_size);
  });

  stages.run(Stage::bootstrap_listen, [&] {
    net::InterfaceChoice choice;
    try {
      choice = net::choose_interface(c.socket_ifname, family, &master_addresses[0]);
    } catch (const Error& e) {
      auto f = stages.failure(e.status().message());
      f.category = ErrorCategory::config;
      f.hint = hint_no_interface(c.socket_ifname);
      throw StageError(f);
    }
    s.ifname = choice.name;
    int err = 0;
    if (c.port_range_lo != 0) {
      for (int port = c.port_range_lo; port <= c.port_range_hi && !s.listener.valid(); ++port) {
        choice.address.set_port(static_cast<std::uint16_t>(port));
        s.listener = net::Socket::listen(choice.address, 1024, err);
      }
    } else {
      s.listener = net::Socket::listen(choice.address, 1024, err);
    }
    if (!s.listener.valid()) {
      auto f = stages.failure("cannot listen for bootstrap connections on " + choice.name);
      f.local_address = choice.address.to_string();
      f.errno_text = net::errno_text(err);
      f.hint = hint_listen_failed(c.port_range_lo, c.port_range_hi);
      throw StageError(f);
    }
    const auto local = s.listener.local_address();
    PeerInfo me{c.rank, host_id(), static_cast<int>(getpid()), local.to_string(), choice.name, settings};
    s.store->set(key(c, "addr/" + std::to_string(c.rank)), encode(me));
    s.peers.assign(c.world_size, PeerInfo{});
    s.peers[c.rank] = me;
    return fmt::format("{} on {}", local.to_string(), choice.name);
  });

  stages.run(Stage::bootstrap_ring, [&] {
    if (c.world_size == 1) return std::string("single rank: no ring");
    const auto deadline = stages.stage_begin() + c.bootstrap_timeout;
    const int next = (c.rank + 1) % c.world_size;
    const int prev = (c.rank + c.world_size - 1) % c.world_size;
    // The bootstrap address rank `r` published at BOOTSTRAP_LISTEN.
    auto published_address = [&](int r) {
      std::optional<PeerInfo> info;
      try {
        info = decode(s.store->get(key(c, "addr/" + std::to_string(r))));
      } catch (const Error& e) {
        auto f = stages.failure(fmt::format("rank {} never published its bootstrap address", r));
        f.peer_rank = r;
        f.errno_text = e.status().message();
        f.hint = store_lost_hint();
        throw StageError(f);
      }
      auto address = info ? net::SocketAddress::parse(info->address) : std::nullopt;
      if (!address) {
        auto f = stages.failure(fmt::format("rank {} published an unreadable bootstrap address", r));
        f.category = ErrorCategory::protocol;
        f.peer_rank = r;
        throw StageError(f);
      }
      return *address;
    };
    const std::optional<net::SocketAddress> next_address = published_address(next);
    net::Socket out;
    net::ConnectAttempts report;
    int err = net::connect_with_backoff({*next_address}, deadline, out, report, stages.progress_reporter());
    const std::uint32_t hello[2] = {kRingHelloMagic, static_cast<std::uint32_t>(c.rank)};
    if (err == 0) err = out.send_all(hello, sizeof(hello), deadline);
    if (err != 0) {
      auto f = stages.failure(
          fmt::format("cannot connect to rank {} at {} ({})", next, next_address->to_string(), report.summary()));
      f.category = err == ETIMEDOUT ? ErrorCategory::timeout : ErrorCategory::network;
      f.peer_rank = next;
      f.local_address = s.listener.local_address().to_string() + " on " + s.ifname;
      f.remote_address = next_address->to_string();
      f.errno_text = net::errno_text(err);
      f.timeout = c.bootstrap_timeout;
      f.hint = hint_ring_connect(err, c.master_port, s.ifname);
      throw StageError(f);
    }
    out.set_nodelay();
    s.ring_next = std::move(out);
    // A rank already in the address exchange may connect for one of its
    // later rounds before this rank has its ring: such a connection waits
    // for its round (s.exchange_in). The addresses the exchange sends to
    // are read from the store now: the rank hosting it may be done with
    // the exchange, and gone, before this rank is.
    const int n = c.world_size;
    const int rounds = exchange_rounds(n);
    for (int round = 1; round < rounds; ++round)
      s.exchange_to.emplace(round, published_address((c.rank + (1 << round)) % n));
    // A connection that does not say prev's ring hello or an exchange
    // round's hello at once (a port scanner, a health check, a stale rank
    // of an earlier job) is dropped, and the listener keeps accepting
    // until the deadline.
    net::Socket in;
    int dropped = 0;
    std::string last_dropped;
    while (!in.valid()) {
      net::Socket candidate = s.listener.accept(deadline, err);
      if (err != 0) break;
      std::uint32_t got[2] = {};
      int hello_err = candidate.recv_all(got, sizeof(got), std::min(deadline, Clock::now() + kHelloWait));
      if (hello_err == 0 && got[0] == kRingHelloMagic && static_cast<int>(got[1]) == prev && !in.valid()) {
        in = std::move(candidate);
        continue;
      }
      std::uint32_t round = 0;
      if (hello_err == 0 && got[0] == kExchangeHelloMagic)
        hello_err = candidate.recv_all(&round, sizeof(round), std::min(deadline, Clock::now() + kHelloWait));
      if (hello_err == 0 && got[0] == kExchangeHelloMagic && round >= 1 && static_cast<int>(round) < rounds &&
          static_cast<int>(got[1]) == (c.rank - (1 << round) + n) % n &&
          s.exchange_in.count(static_cast<int>(round)) == 0) {
        candidate.set_nodelay();
        s.exchange_in[static_cast<int>(round)] = std::move(candidate);
        continue;
      }
      ++dropped;
      last_dropped = fmt::format(
          "{} ({})", candidate.peer_address().to_string(),
          hello_err != 0 ? net::errno_text(hello_err) : std::string("not the hello of a rank this rank waits for"));
      RM_INFO(bootstrap, "dropped a connection on the bootstrap port from {}", last_dropped);
    }
    if (err != 0) {
      auto f = stages.failure(fmt::format("rank {} did not connect to this rank", prev));
      f.category = err == ETIMEDOUT ? ErrorCategory::timeout : ErrorCategory::network;
      f.peer_rank = prev;
      f.local_address = s.listener.local_address().to_string() + " on " + s.ifname;
      f.errno_text = net::errno_text(err);
      if (dropped > 0) {
        f.errno_text +=
            fmt::format("; {} other connection(s) dropped for a wrong hello, the last from {}", dropped, last_dropped);
      }
      f.timeout = c.bootstrap_timeout;
      f.hint = hint_ring_accept(prev);
      throw StageError(f);
    }
    in.set_nodelay();
    s.ring_prev = std::move(in);
    return fmt::format("next {} at {}, prev {}", next, next_address->to_string(), prev);
  });

  stages.run(Stage::address_exchange, [&] {
    if (c.world_size == 1) return std::string("single rank");
    const auto deadline = stages.stage_begin() + c.bootstrap_timeout;
    const int n = c.world_size;
    const int rounds = exchange_rounds(n);
    // Bruck's all-gather in ceil(log2 n) rounds: after a round this rank
    // holds the `have` ranks up to itself (r, r-1, ...). In the round at
    // distance d = have it sends the entries nearest itself to rank r+d
    // and takes those of r-d and before from rank r-d. The first round
    // goes over the bootstrap ring; each later one over a connection of
    // its own. (The ring all-gather took n-1 steps, each waiting for every
    // rank to be scheduled: with 1,024 ranks as threads on 2 cores, 3 s.)
    int have = 1;
    // Each entry as it arrived, passed on as it is.
    std::vector<std::string> raw(static_cast<std::size_t>(n));
    raw[static_cast<std::size_t>(c.rank)] = encode(s.peers[static_cast<std::size_t>(c.rank)]);
    for (int round = 0; round < rounds; ++round) {
      const int d = have;
      const int count = std::min(have, n - have);
      const int to = (c.rank + d) % n;
      const int from = (c.rank - d + n) % n;
      auto broke = [&](int peer, int err, const std::string& what) {
        auto f = stages.failure(
            fmt::format("address exchange with rank {} broke in round {}/{}: {}", peer, round + 1, rounds, what));
        f.category = err == ETIMEDOUT ? ErrorCategory::timeout : ErrorCategory::peer;
        f.peer_rank = peer;
        f.errno_text = err == EPROTO ? "unexpected data on a bootstrap connection" : net::errno_text(err);
        f.timeout = c.bootstrap_timeout;
        f.hint = hint_exchange_broken(peer);
        throw StageError(f);
      };
      std::string blob;
      for (int i = 0; i < count; ++i) {
        const std::string& entry = raw[static_cast<std::size_t>((c.rank - i + n) % n)];
        const auto length = static_cast<std::uint32_t>(entry.size());
        blob.append(reinterpret_cast<const char*>(&length), sizeof(length));
        blob += entry;
      }
      int err = 0;
      if (round > 0) {
        err = connect_exchange_link(s, c, round, deadline);
        if (err != 0) broke(to, err, "cannot connect to it");
      }
      const net::Socket& out = round == 0 ? s.ring_next : s.exchange_out.at(round);
      // A block larger than the sockets' buffers is sent by a thread of its
      // own: every rank sends before it receives.
      std::thread sender;
      int send_err = 0;
      if (blob.size() > (64u << 10)) {
        sender = std::thread([&, payload = blob] { send_err = send_blob(out, payload, deadline); });
      } else {
        send_err = send_blob(out, blob, deadline);
      }
      if (round > 0) err = accept_exchange_link(s, c, round, deadline);
      if (err == 0) {
        const net::Socket& in = round == 0 ? s.ring_prev : s.exchange_in.at(round);
        err = recv_blob(in, blob, deadline, static_cast<std::uint64_t>(count) * 4096);
      }
      if (sender.joinable()) sender.join();
      if (send_err != 0) broke(to, send_err, "sending to it failed");
      if (err != 0)
        broke(from, err,
              round > 0 && s.exchange_in.count(round) == 0 ? "it did not connect to this rank"
                                                           : "receiving from it failed");
      std::size_t at = 0;
      for (int i = 0; i < count; ++i) {
        std::uint32_t length = 0;
        if (blob.size() - at < sizeof(length)) broke(from, EPROTO, "a short block");
        std::memcpy(&length, blob.data() + at, sizeof(length));
        at += sizeof(length);
        if (blob.size() - at < length) broke(from, EPROTO, "a short block");
        std::string entry = blob.substr(at, length);
        at += length;
        auto info = decode(entry);
        const int expected = (from - i + n) % n;
        if (!info || info->rank != expected) broke(from, EPROTO, fmt::format("not rank {}'s entry", expected));
        s.peers[static_cast<std::size_t>(expected)] = std::move(*info);
        raw[static_cast<std::size_t>(expected)] = std::move(entry);
      }
      have += count;
      s.exchange_out.erase(round);
      s.exchange_in.erase(round);
    }
    s.exchange_in.clear();
    s.exchange_to.clear();
    int hosts = 0;
    std::vector<std::string> seen;
    for (const auto& p : s.peers) {
      if (std::find(seen.begin(), seen.end(), p.host) == seen.end()) {
        seen.push_back(p.host);
        ++hosts;
      }
    }
    return fmt::format("{} ranks on {} host(s), in {} round{}", n, hosts, rounds, rounds == 1 ? "" : "s");
  });

  auto bootstrap = std::unique_ptr<Bootstrap>(new Bootstrap(std::move(state)));
  if (finish) bootstrap->finish();
  return bootstrap;
}

void Bootstrap::run_stage(Stage stage, const std::function<std::string()>& body) {
  log::set_thread_rank(impl_->config.rank);
  StageRunner(*impl_).run(stage, body);
}

StageFailure Bootstrap::failure(Stage stage, std::string summary) const {
  StageFailure f;
  f.stage = stage;
  f.rank = impl_->config.rank;
  f.world_size = impl_->config.world_size;
  f.elapsed = duration_cast<milliseconds>(Clock::now() - impl_->stage_begin);
  f.summary = std::move(summary);
  return f;
}

void Bootstrap::finish() {
  auto& s = *impl_;
  run_stage(Stage::ready, [] { return std::string(); });
  // One line per rank that breaks init down by stage, as NCCL's "Init timings".
  std::string timings;
  for (const auto& e : s.events) {
    timings += fmt::format("{}{} {:.2f}", timings.empty() ? "" : ", ", name_of(e.stage), e.duration.count() / 1e6);
  }
  RM_INFO(init, "Init timings - total {:.2f} ms ({}) ms; {} ranks, store on {}",
          duration_cast<std::chrono::microseconds>(Clock::now() - s.init_begin).count() / 1e3, timings,
          s.config.world_size, s.master);
}

std::string store_key(const Config& c, const std::string& name) {
  return "ringmaster/" + c.run_id + "/" + name;
}

}  // namespace ringmaster

// The staged init: RESOLVE_MASTER -> STORE_CONNECT -> STORE_HANDSHAKE ->
// STORE_BARRIER -> BOOTSTRAP_LISTEN -> BOOTSTRAP_RING -> ADDRESS_EXCHANGE ->
// READY. Each stage is timed and reported; a failure becomes a StageError
// whose hint is chosen from what failed and how (hints.cpp). The address
// exchange's work is in exchange.cpp. This file stays a little past 600
// lines on purpose: Bootstrap::run reads as the stages in their order,
// each with its failure reports beside its work.
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <optional>
#include <thread>
#include <unordered_map>

#include "base/hash.h"
#include "base/log.h"
#include "base/params.h"
#include "bootstrap/bootstrap_impl.h"
#include "bootstrap/exchange.h"
#include "bootstrap/hints.h"
#include "net/conntrack.h"
#include "net/interfaces.h"
#include "ringmaster/status.h"
#include "store/client.h"
#include "store/etcd.h"

namespace ringmaster {
namespace {

using Clock = net::Clock;
using std::chrono::duration_cast;
using std::chrono::milliseconds;

// " (N stray connection(s) dropped, the last from A (why))", or empty.
std::string stray_note(int dropped, const std::string& last) {
  return dropped == 0 ? std::string()
                      : fmt::format(" ({} stray connection(s) dropped, the last from {})", dropped, last);
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
  explicit StageRunner(Bootstrap::Impl& state) : state_(state), conntrack_before_(net::conntrack_table()) {}

  template <class Body>
  void run(Stage stage, Body&& body) {
    current_ = stage;
    begin_ = Clock::now();
    state_.stage_begin = begin_;  // deadlines count from here
    counted_from_ = state_.last_end == Clock::time_point{} ? begin_ : state_.last_end;
    begin_wall_ = std::chrono::system_clock::now() -
                  std::chrono::duration_cast<std::chrono::system_clock::duration>(begin_ - counted_from_);
    std::string detail;
    try {
      detail = body();
    } catch (const StageError& e) {
      auto f = e.failure();
      note_conntrack(f);
      fail(f);
      throw StageError(f);
    } catch (const Error& e) {
      // An unexpected failure inside a stage still names its stage.
      auto f = failure(e.status().message());
      f.category = e.category();
      note_conntrack(f);
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
  // A stage that waited for the network in vain, on a host whose
  // connection-tracking table is full or dropped connections meanwhile:
  // the table is the first suspect, before any firewall.
  void note_conntrack(StageFailure& f) const {
    if (f.category != ErrorCategory::timeout && f.category != ErrorCategory::network) return;
    const auto table = net::conntrack_pressure(conntrack_before_);
    if (!table) return;
    f.conntrack = table->describe();
    const std::string note = net::conntrack_hint(*table);
    f.hint = f.hint.empty() ? note : note + " " + f.hint;
  }

  void fail(const StageFailure& f) {
    finish(false, f.summary + (f.hint.empty() ? "" : " | hint: " + f.hint));
    RM_WARN(init, "{}", f.to_string());
  }

  void finish(bool ok, std::string detail) {
    StageEvent event;
    event.stage = current_;
    event.rank = state_.config.rank;
    const auto now = Clock::now();
    event.begin = begin_wall_;
    event.duration = now - counted_from_;
    // After READY, a connection made by a call is timed on its own.
    state_.last_end = current_ == Stage::ready ? Clock::time_point{} : now;
    event.ok = ok;
    event.detail = std::move(detail);
    RM_INFO(bootstrap, "{} {} in {:.3f} ms{}{}", name_of(current_), ok ? "done" : "FAILED",
            event.duration.count() / 1e6, event.detail.empty() ? "" : ": ", event.detail);
    state_.events.push_back(event);
    if (state_.on_event) state_.on_event(event);
  }

  Bootstrap::Impl& state_;
  std::optional<net::ConntrackTable> conntrack_before_;  // when the stages began
  Stage current_ = Stage::resolve_master;
  Clock::time_point begin_;
  Clock::time_point counted_from_;  // the previous stage's end
  std::chrono::system_clock::time_point begin_wall_;
};

std::string key(const Config& c, const std::string& name) {
  return store_key(c, name);
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

// "host:port" as a listener's address reads: "*" for every address,
// brackets around IPv6.
std::string host_port(const std::string& host, std::uint16_t port) {
  const std::string shown = host.empty() ? "*" : host.find(':') != std::string::npos ? "[" + host + "]" : host;
  return shown + ":" + std::to_string(port);
}

// STORE_BARRIER: this rank claims its number under the store's world
// size and waits until every rank has; on a timeout, the missing ranks
// read from the store. `store_listen`: where this rank serves the store,
// when it does.
std::string store_barrier(StageRunner& stages, Bootstrap::Impl& s, const std::string& store_listen) {
  const Config& c = s.config;
  const bool on_etcd = !c.etcd_host.empty();
  const std::string& master = s.master;
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
      auto f = stages.failure(fmt::format("rank {} is used twice: by {} and by {} (this process)", c.rank, owner, me));
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
      f.local_address = store_listen;  // the store this rank served: the others' view is read against it
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
      f.hint = hint_barrier_timeout(f.missing, store_listen, s.store_server ? s.store_server->num_connections() : 0);
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
    f.hint = (on_etcd ? hint_etcd_lost() : hint_store_lost());
    throw StageError(f);
  }
  return fmt::format("{}/{} joined", c.world_size, c.world_size);
}

}  // namespace

Bootstrap::Bootstrap(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Bootstrap::~Bootstrap() = default;
const Config& Bootstrap::config() const noexcept {
  return impl_->config;
}
const PeerInfo& Bootstrap::self() const noexcept {
  return impl_->self;
}
int Bootstrap::host_of(int rank) const {
  return static_cast<int>(impl_->host_of.at(static_cast<std::size_t>(rank)));
}
int Bootstrap::host_count() const noexcept {
  return impl_->host_count;
}
std::uint64_t Bootstrap::placement() const noexcept {
  return impl_->placement;
}
const std::vector<Bootstrap::SettingsGroup>& Bootstrap::settings_groups() const noexcept {
  return impl_->settings_groups;
}

void Bootstrap::fetch_peers(const std::vector<int>& ranks) {
  auto& s = *impl_;
  std::vector<int> wanted;
  for (const int r : ranks) {
    if (r == s.config.rank || s.peers.count(r) != 0 || std::find(wanted.begin(), wanted.end(), r) != wanted.end())
      continue;
    wanted.push_back(r);
  }
  if (wanted.empty()) return;
  for (auto& info : read_peers(wanted))
    s.peers.emplace(info.rank, std::move(info));
}

std::vector<PeerInfo> Bootstrap::read_peers(const std::vector<int>& ranks) const {
  const auto& s = *impl_;
  std::vector<PeerInfo> out;
  std::vector<int> wanted;
  std::vector<std::string> keys;
  for (const int r : ranks) {
    if (r < 0 || r >= s.config.world_size) {
      throw Error(ErrorCategory::internal,
                  fmt::format("no rank {} among {} ranks to read a PeerInfo of", r, s.config.world_size));
    }
    if (r == s.config.rank) {
      out.push_back(s.self);
      continue;
    }
    wanted.push_back(r);
    keys.push_back(store_key(s.config, "addr/" + std::to_string(r)));
  }
  if (wanted.empty()) return out;
  if (!s.store) throw Error(ErrorCategory::internal, "no store connection to read the ranks' records from");
  const auto values = s.store->get_many(keys);
  for (std::size_t i = 0; i < wanted.size(); ++i) {
    auto info = decode(values[i]);
    if (!info || info->rank != wanted[i]) {
      throw Error(ErrorCategory::protocol,
                  fmt::format("rank {}'s record in the store is unreadable: '{}'", wanted[i], values[i]));
    }
    out.push_back(std::move(*info));
  }
  return out;
}

const PeerInfo& Bootstrap::peer(int rank) {
  if (rank == impl_->config.rank) return impl_->self;
  fetch_peers({rank});
  return impl_->peers.at(rank);
}
const std::vector<StageEvent>& Bootstrap::events() const noexcept {
  return impl_->events;
}

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
  state->last_end = state->init_begin;
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

  std::string store_listen;  // where this rank serves the store, when it does
  stages.run(Stage::store_connect, [&] {
    const auto deadline = stages.stage_begin() + c.store_timeout;
    if (host_store) {
      // On MASTER_ADDR's own address when it is this host's, where every
      // rank connects (127.0.0.1 stays on loopback); on every address only
      // when the store is hosted for an address that is not local (a
      // forwarded one).
      const std::string listen_host = is_local_address(master_addresses[0]) ? master_addresses[0].host() : "";
      store_listen = host_port(listen_host, c.master_port);
      try {
        s.store_server = std::make_unique<TcpStoreServer>(
            StoreServerOptions{.host = listen_host, .port = c.master_port, .expected_clients = c.world_size});
      } catch (const Error& e) {
        auto f = stages.failure("rank 0 cannot host the store on MASTER_PORT " + std::to_string(c.master_port));
        f.local_address = store_listen;
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
      f.local_address = store_listen;  // where this rank serves the store, when it does
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

  stages.run(Stage::store_barrier, [&] { return store_barrier(stages, s, store_listen); });

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
    s.self = std::move(me);
    return fmt::format("{} on {}", local.to_string(), choice.name);
  });

  stages.run(Stage::bootstrap_ring, [&] {
    if (c.world_size == 1) return std::string("single rank: no ring");
    const auto deadline = stages.stage_begin() + c.bootstrap_timeout;
    const int next = (c.rank + 1) % c.world_size;
    const int prev = (c.rank + c.world_size - 1) % c.world_size;
    // The bootstrap addresses this rank connects to, as published at
    // BOOTSTRAP_LISTEN, in one read: next's, and its parent's in the
    // address exchange's tree. They are read now: the rank hosting the
    // store may be done with the exchange, and gone, before this rank is.
    const int n = c.world_size;
    std::vector<int> targets{next};
    if (c.rank != 0 && tree_parent(c.rank) != next) targets.push_back(tree_parent(c.rank));
    std::vector<std::string> keys;
    for (const int r : targets)
      keys.push_back(key(c, "addr/" + std::to_string(r)));
    std::vector<std::string> published;
    try {
      published = s.store->get_many(keys);
    } catch (const Error& e) {
      // Name the first rank whose address is missing, when the store can
      // still say which.
      int missing = next;
      try {
        for (std::size_t i = 0; i < keys.size(); ++i) {
          if (!s.store->check({keys[i]})) {
            missing = targets[i];
            break;
          }
        }
      } catch (const Error&) {
      }
      auto f = stages.failure(fmt::format("rank {} never published its bootstrap address", missing));
      f.peer_rank = missing;
      f.errno_text = e.status().message();
      f.hint = e.category() == ErrorCategory::timeout || host_store ? hint_address_never_published(missing)
                                                                    : store_lost_hint();
      throw StageError(f);
    }
    std::vector<net::SocketAddress> addresses;
    for (std::size_t i = 0; i < published.size(); ++i) {
      const auto info = decode(published[i]);
      auto address = info && info->rank == targets[i] ? net::SocketAddress::parse(info->address) : std::nullopt;
      if (!address) {
        auto f = stages.failure(fmt::format("rank {} published an unreadable bootstrap address", targets[i]));
        f.category = ErrorCategory::protocol;
        f.peer_rank = targets[i];
        throw StageError(f);
      }
      addresses.push_back(*address);
    }
    // A connection to `peer` at `address` that has said `magic` and this
    // rank; both the ring's and the tree's fail alike.
    auto connect_to = [&](int peer, const net::SocketAddress& address, std::uint32_t magic) {
      net::Socket out;
      net::ConnectAttempts report;
      int err = net::connect_with_backoff({address}, deadline, out, report, stages.progress_reporter());
      const std::uint32_t hello[2] = {magic, static_cast<std::uint32_t>(c.rank)};
      if (err == 0) err = out.send_all(hello, sizeof(hello), deadline);
      if (err != 0) {
        auto f = stages.failure(fmt::format("cannot connect to rank {}{} at {} ({})", peer,
                                            magic == kTreeHelloMagic ? " (its parent in the address exchange)" : "",
                                            address.to_string(), report.summary()));
        f.category = err == ETIMEDOUT ? ErrorCategory::timeout : ErrorCategory::network;
        f.peer_rank = peer;
        f.local_address = s.listener.local_address().to_string() + " on " + s.ifname;
        f.remote_address = address.to_string();
        f.errno_text = net::errno_text(err);
        f.timeout = c.bootstrap_timeout;
        f.hint = hint_ring_connect(err, c.master_port, s.ifname);
        throw StageError(f);
      }
      out.set_nodelay();
      return out;
    };
    const std::optional<net::SocketAddress> next_address = addresses[0];
    s.ring_next = connect_to(next, addresses[0], kRingHelloMagic);
    if (c.rank != 0) {
      // The ring's next may be the parent too: a connection of its own.
      s.tree_parent = connect_to(tree_parent(c.rank), addresses.back(), kTreeHelloMagic);
    }
    // A connection that does not say prev's ring hello or a tree child's
    // hello at once (a port scanner, a health check, a stale rank of an
    // earlier job) is dropped, and the listener keeps accepting until the
    // deadline. A child already in the address exchange may connect
    // before this rank has its ring: it waits in s.tree_children.
    int err = 0;
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
      const int child = static_cast<int>(got[1]);
      if (hello_err == 0 && got[0] == kTreeHelloMagic && is_tree_child(child, c.rank, n) &&
          s.tree_children.count(child) == 0) {
        candidate.set_nodelay();
        s.tree_children[child] = std::move(candidate);
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
      f.errno_text += stray_note(dropped, last_dropped);
      f.timeout = c.bootstrap_timeout;
      f.hint = hint_ring_accept(prev);
      throw StageError(f);
    }
    in.set_nodelay();
    s.ring_prev = std::move(in);
    return fmt::format("next {} at {}, prev {}{}", next, next_address->to_string(), prev,
                       stray_note(dropped, last_dropped));
  });

  stages.run(Stage::address_exchange, [&] {
    return exchange_addresses(s, settings, stages.stage_begin() + c.bootstrap_timeout,
                              [&](std::string what) { return stages.failure(std::move(what)); });
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

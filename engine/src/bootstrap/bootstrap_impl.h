// Internal: what a finished bootstrap holds, for the stages that follow it
// (topology, transports) inside the engine.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "bootstrap/views.h"
#include "net/hello.h"
#include "net/socket.h"
#include "ringmaster/store.h"
#include "ringmaster/tools/bootstrap.h"
#include "store/store.h"

namespace ringmaster {

struct Bootstrap::Impl {
  Config config;
  std::unique_ptr<TcpStoreServer> store_server;  // on the rank that hosts the store
  std::unique_ptr<store::Store> store;           // a TCPStore's client, or etcd
  net::Socket listener;                          // bootstrap listener, kept for later connections
  net::Socket ring_next;                         // connected to rank+1, closed after the exchange
  net::Socket ring_prev;                         // accepted from rank-1, closed after the exchange
  // The address exchange's tree (bootstrap.cpp): connected to this
  // rank's parent, accepted from its children by rank; closed once the
  // exchange is done.
  net::Socket tree_parent;
  std::map<int, net::Socket> tree_children;
  // Connections for TRANSPORT_CONNECT accepted during the address
  // exchange (a rank done with it connects at once), with their hello.
  std::vector<std::pair<net::Hello, net::Socket>> early_connections;
  std::string ifname;
  net::SocketAddress local_address;
  PeerInfo self;
  std::vector<std::uint32_t> host_of;  // by rank: hosts numbered by their lowest rank
  int host_count = 1;
  std::uint64_t placement = 0;  // see Bootstrap::placement
  std::vector<Bootstrap::SettingsGroup> settings_groups;
  std::map<int, PeerInfo> peers;  // other ranks' PeerInfo, read from the store when asked for
  std::vector<StageEvent> events;
  StageCallback on_event;
  net::Clock::time_point init_begin;
  std::string master;  // "addr:port", or "etcd://host:port/prefix"
  net::Clock::time_point stage_begin;
  // Where the last stage ended (init_begin before the first): the next
  // stage's time is counted from here, so that the work between two
  // stages belongs to the one it prepares and every millisecond of init
  // is in a stage.
  net::Clock::time_point last_end;
};

// Reports the retries of a connect in `stage` (the stage now running) as
// stage_progress events through the bootstrap's callback: for
// connect_with_backoff in the stages after the bootstrap (TRANSPORT_CONNECT).
net::ConnectProgress connect_progress(Bootstrap::Impl& impl, Stage stage);

// One stage_progress event of `stage` now: `outcome` as the classification
// ("unanswered", "unresolved", ...), `detail` the live line.
void report_progress(Bootstrap::Impl& impl, Stage stage, std::string outcome, std::string remote, int attempts,
                     std::string detail);

// RESOLVE_MASTER's report while MASTER_ADDR (`master`, "name:port") does
// not resolve and is asked again: what getaddrinfo said and what that
// usually means.
void report_unresolved(Bootstrap::Impl& impl, const std::string& master, const net::ResolveResult& failed,
                       int attempts);

// How long a connected peer may stay silent before it is reported: a store
// or a rank answers in milliseconds.
inline constexpr std::chrono::seconds kSilentPeerAfter{2};

// While it lives, a connection to `remote` that has not answered `awaited`
// (e.g. "the TCPStore handshake") is reported as stuck after the TCP
// handshake, after kSilentPeerAfter and then every second, from a thread of
// its own: the waiting call blocks. Destroy it as soon as the answer came.
class SilentPeerReporter {
 public:
  SilentPeerReporter(Bootstrap::Impl& impl, Stage stage, std::string remote, std::string awaited);

 private:
  std::jthread watcher_;
};

}  // namespace ringmaster

// What the layers after the bootstrap see of it, and nothing more: the
// transports its listener (with the connections it accepted before they
// asked) and the reporting of a connect's progress in a stage; the
// communicator its store. The rest of Bootstrap::Impl is reachable from
// engine/src/bootstrap only.
#pragma once

#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include "net/hello.h"
#include "net/socket.h"
#include "ringmaster/config.h"
#include "ringmaster/stage.h"
#include "ringmaster/tools/bootstrap.h"

namespace ringmaster {

class TcpStoreServer;
namespace store {
class Store;
}

// How long a connection accepted on the bootstrap port has to say its
// hello before it is dropped: ranks send theirs right after connecting, so
// only strangers (scanners, health checks, stale ranks) take longer.
inline constexpr std::chrono::seconds kHelloWait{5};

// The store key of `name` for this job's ranks (run_id keeps jobs apart).
std::string store_key(const Config& c, const std::string& name);

// This rank's bootstrap listener, kept for the connections of
// TRANSPORT_CONNECT and the direct connections made later.
class BootstrapListener {
 public:
  explicit BootstrapListener(Bootstrap& bootstrap);

  // The next connection to the listener; err is its errno (ETIMEDOUT at
  // the deadline).
  net::Socket accept(net::Clock::time_point deadline, int& err);
  net::SocketAddress local_address() const;
  // Connections that came, hello read, while the address exchange still
  // ran: each is handed out once.
  bool has_early() const noexcept;
  std::pair<net::Hello, net::Socket> take_early();
  // The stage_progress events of a connect's retries in `stage`.
  net::ConnectProgress progress(Stage stage) const;

 private:
  Bootstrap::Impl& impl_;
};

// The store the ranks met through: the client (null when the connection
// is gone) and, on the rank that hosts it, the server (else null).
struct BootstrapStore {
  store::Store* client = nullptr;
  TcpStoreServer* server = nullptr;
  const Config& config;
};
BootstrapStore store_of(Bootstrap& bootstrap);

}  // namespace ringmaster

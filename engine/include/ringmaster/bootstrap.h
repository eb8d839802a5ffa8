// Staged initialisation: from MASTER_ADDR to a ring of connected ranks.
//
// Every rank walks the same named stages and reports each one (begin,
// duration, outcome, detail) to a callback, in order. A stage that fails
// throws StageError, which says which stage, which rank, against which
// peer and address, the errno text, how long it waited of how long it was
// allowed, which ranks had joined, and a hint naming the likely cause and
// the next thing to check.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "ringmaster/config.h"
#include "ringmaster/status.h"

namespace ringmaster {

enum class Stage : std::uint8_t {
  resolve_master,
  store_connect,
  store_handshake,
  store_barrier,
  bootstrap_listen,
  bootstrap_ring,
  address_exchange,
  topology,
  transport_connect,
  ready,
};

// "RESOLVE_MASTER", "STORE_CONNECT", ...
std::string_view name_of(Stage stage) noexcept;

struct StageEvent {
  Stage stage = Stage::resolve_master;
  int rank = 0;
  std::chrono::system_clock::time_point begin;
  std::chrono::nanoseconds duration{0};
  bool ok = true;
  std::string detail;  // what happened, or the failure's summary and hint
};

using StageCallback = std::function<void(const StageEvent&)>;

struct StageFailure {
  Stage stage = Stage::resolve_master;
  ErrorCategory category = ErrorCategory::network;
  int rank = 0;
  int peer_rank = -1;  // -1: not about one peer (e.g. the store)
  std::string local_address;
  std::string remote_address;
  std::string errno_text;
  std::chrono::milliseconds elapsed{0};
  std::chrono::milliseconds timeout{0};
  int world_size = 0;
  int joined = -1;           // ranks that reached the store barrier; -1 when unknown
  std::vector<int> missing;  // ranks that did not
  std::string summary;       // one line: what failed
  std::string hint;          // likely cause and next step

  // "3/4 joined; missing: 2"
  std::string joined_text() const;
  // Multi-line report with every known field.
  std::string to_string() const;
};

class StageError : public Error {
 public:
  explicit StageError(StageFailure failure);
  const StageFailure& failure() const noexcept { return failure_; }

 private:
  StageFailure failure_;
};

struct PeerInfo {
  int rank = 0;
  std::string host;  // hostname
  int pid = 0;
  std::string address;  // bootstrap listener, "ip:port"
  std::string ifname;   // interface it was chosen on
  // What the layers above must agree on (the communicator's channel
  // counts, buffer size, overrides), carried along unread: one word of
  // printable characters without spaces, empty when none.
  std::string settings;
};

// The outcome of a successful bootstrap: the store connection (and the
// store itself on the rank that hosts it), the bootstrap ring sockets and
// every rank's PeerInfo. Later stages (topology, transports) build on it.
// Not thread-safe.
class Bootstrap {
 public:
  // Runs RESOLVE_MASTER through ADDRESS_EXCHANGE and, when `finish` is
  // true, READY; throws StageError at the first failing stage, after
  // reporting it. With finish = false the caller adds its own stages
  // (TOPOLOGY, TRANSPORT_CONNECT) with run_stage and then calls finish().
  // `settings` travels with this rank's PeerInfo to every rank during
  // ADDRESS_EXCHANGE (see PeerInfo::settings).
  static std::unique_ptr<Bootstrap> run(const Config& config, const StageCallback& on_event = {}, bool finish = true,
                                        std::string settings = {});
  ~Bootstrap();

  // Runs and reports one later stage; `body` returns the stage's detail
  // and throws StageError (or Error, which is wrapped) on failure.
  void run_stage(Stage stage, const std::function<std::string()>& body);
  // Reports READY and logs the init-timings line.
  void finish();
  // A failure of `stage` on this rank, with the common fields filled in.
  StageFailure failure(Stage stage, std::string summary) const;

  const Config& config() const noexcept;
  const std::vector<PeerInfo>& peers() const noexcept;
  bool hosts_store() const noexcept;
  // The per-stage timings of this init, in stage order.
  const std::vector<StageEvent>& events() const noexcept;

  struct Impl;
  Impl& impl() noexcept { return *impl_; }

 private:
  explicit Bootstrap(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace ringmaster

// Staged initialisation, the tool behind a communicator's init: from
// MASTER_ADDR to a ring of connected ranks (ringmaster-cli probe runs it
// alone). Every rank walks the stages of ringmaster/stage.h and reports
// each one to a callback, in order; a stage that fails throws StageError.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "ringmaster/config.h"
#include "ringmaster/stage.h"

namespace ringmaster {

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

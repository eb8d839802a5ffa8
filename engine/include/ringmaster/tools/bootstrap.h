// Staged initialisation, the tool behind a communicator's init: from
// MASTER_ADDR to a ring of connected ranks (ringmaster-cli probe runs it
// alone). Every rank walks the stages of ringmaster/stage.h and reports
// each one to a callback, in order; a stage that fails throws StageError.
#pragma once

#include <cstdint>
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
// store itself on the rank that hosts it), the bootstrap listener and what
// every rank knows of every rank. ADDRESS_EXCHANGE gives every rank a
// record of 12 bytes from each rank (hashes of its host and its settings),
// not its PeerInfo: at thousands of ranks every PeerInfo on every rank
// grows as N^2. A rank's PeerInfo is read from the store when asked for:
// a rank needs those of its ring and tree neighbours, and one for each
// different settings word. Later stages (topology, transports) build on
// it. Not thread-safe.
class BootstrapListener;
struct BootstrapStore;

class Bootstrap {
 public:
  // Runs RESOLVE_MASTER through ADDRESS_EXCHANGE and, when `finish` is
  // true, READY; throws StageError at the first failing stage, after
  // reporting it. With finish = false the caller adds its own stages
  // (TOPOLOGY, TRANSPORT_CONNECT) with run_stage and then calls finish().
  // `settings` travels with this rank's PeerInfo (see PeerInfo::settings);
  // its hash goes to every rank during ADDRESS_EXCHANGE.
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
  // This rank's own PeerInfo.
  const PeerInfo& self() const noexcept;
  // The host each rank runs on, as a number: hosts are numbered 0, 1, ...
  // in the order of their lowest rank, so rank 0's host is 0.
  int host_of(int rank) const;
  int host_count() const noexcept;
  // Which host each rank runs on as one number (a hash of every rank's
  // host name, in rank order): two runs have the same placement only
  // when their ranks run on the same hosts.
  std::uint64_t placement() const noexcept;
  // Rank `rank`'s PeerInfo: this rank's at once, another's read from the
  // store the first time (fetch_peers reads many in one round trip) and
  // kept. Throws Error when the store does not answer or the record is
  // unreadable.
  const PeerInfo& peer(int rank);
  void fetch_peers(const std::vector<int>& ranks);
  // The records of `ranks` (this rank's included), read from the store in
  // one round trip without keeping them. Throws as peer() does.
  std::vector<PeerInfo> read_peers(const std::vector<int>& ranks) const;
  // The ranks whose settings word is the same, by the lowest of them, in
  // rank order: one entry when every rank passed the same settings.
  struct SettingsGroup {
    int first_rank = 0;
    int ranks = 0;
  };
  const std::vector<SettingsGroup>& settings_groups() const noexcept;
  // The per-stage timings of this init, in stage order.
  const std::vector<StageEvent>& events() const noexcept;

  struct Impl;

 private:
  // The layers after the bootstrap see its listener and store through
  // these (engine/src/bootstrap/views.h), nothing else of it.
  friend class BootstrapListener;
  friend BootstrapStore store_of(Bootstrap& bootstrap);

  explicit Bootstrap(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace ringmaster

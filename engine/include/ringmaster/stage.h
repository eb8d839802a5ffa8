// The named stages of a communicator's init, as every rank walks and
// reports them (begin, duration, outcome, detail), and the error a stage
// that fails throws: which stage, which rank, against which peer and
// address, the errno text, how long it waited of how long it was allowed,
// which ranks had joined, and a hint naming the likely cause and the next
// thing to check.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

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
  calibrate,  // the tuner measuring the links it will pick from
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
  // A report while the stage still runs (a name or a connect retrying, a
  // connected peer silent), before
  // the stage's one final event: `detail` says what the attempts meet, e.g.
  // "SYN to 10.0.0.5:29500 unanswered for 3 s (2 attempts) - likely dropped
  // by a firewall or security group". `duration` is the time so far.
  bool in_progress = false;
  // "unresolved", "unanswered", "refused", "rejected", "no_route",
  // "stuck_after_handshake" or "other"
  std::string connect_outcome;
  std::string remote_address;  // what the attempts connect to
  int attempts = 0;
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
  // This host's connection-tracking table when it was full, or dropped
  // connections while the stages ran ("262144 of 262144 entries, 37 new
  // connection(s) dropped"); empty otherwise.
  std::string conntrack;

  // "3/4 joined; missing: 2"
  std::string joined_text() const;
  // Multi-line report with every known field.
  std::string to_string() const;
};

// What the failures of one run's ranks say together that none says
// alone, one sentence each (empty when nothing): the rank hosting the
// store listened on MASTER_PORT while others were refused there (a rule
// that rejects, not a missing listener); ranks that reached for the store
// at different addresses (MASTER_ADDR resolving differently per host).
// The console, `ringmaster-cli remote`, `probe` and `repro` print them.
std::vector<std::string> read_together(const std::vector<StageFailure>& failures);

class StageError : public Error {
 public:
  explicit StageError(StageFailure failure);
  const StageFailure& failure() const noexcept { return failure_; }

 private:
  StageFailure failure_;
};

}  // namespace ringmaster

// The events a run relays, typed: one struct per `type` of docs/protocol.md
// ("Events"), each with its JSON both ways. A rank writes them as JSON
// lines, its agent reads and relays them inside `event` messages, and
// ringmaster-cli, the console and the agent's metrics read them back
// through parse_event(), never by matching type strings or fields of
// their own.
//
// Compatibility (kProtocolVersion): a reader takes events with fields it
// does not know, and a type it does not know arrives as Unknown. A field
// that changes meaning or type, or a required field added, raises the
// version.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "ringmaster/agent/fault.h"
#include "ringmaster/comm.h"
#include "ringmaster/stage.h"
#include "ringmaster/tools/perf.h"
#include "ringmaster/tools/tuner.h"

namespace ringmaster {
struct WatchedRank;  // ringmaster/tools/job_watch.h
}  // namespace ringmaster

namespace ringmaster::agent::events {

// "stage": an init stage ended (TRANSPORT_CONNECT once per connection).
struct StageEnded {
  static constexpr std::string_view kType = "stage";
  Stage stage = Stage::resolve_master;
  int rank = -1;
  bool ok = true;
  long long begin_us = 0;  // wall clock
  double duration_ms = 0;
  std::string detail;
};

// "stage_progress": a stage still retrying, with the live classification.
struct StageProgress {
  static constexpr std::string_view kType = "stage_progress";
  Stage stage = Stage::resolve_master;
  int rank = -1;
  std::string outcome;  // unresolved, refused, unanswered, rejected, no_route, stuck_after_handshake, other
  std::string remote;
  int attempts = 0;
  long long begin_us = 0;
  double elapsed_ms = 0;
  std::string detail;  // the live line
};

// "failure": a stage failed (StageFailure's fields).
struct StageFailed {
  static constexpr std::string_view kType = "failure";
  Stage stage = Stage::resolve_master;
  int rank = -1;
  std::string category;
  int peer_rank = -1;
  std::string local, remote, errno_text;
  long long elapsed_ms = 0, timeout_ms = 0;
  int joined = -1, world_size = 0;
  std::vector<int> missing;
  std::string summary, hint;
  std::string conntrack;  // the rank's host's full connection-tracking table; "" when it had room
};

// "sample": a rank's cumulative counters, every 100 ms from READY.
struct Sample {
  static constexpr std::string_view kType = "sample";
  struct Channel {
    int channel = 0;
    std::uint64_t bytes_sent = 0, bytes_received = 0, busy_ns = 0, steps = 0;
    // The network devices its sends leave the node by and its receives
    // enter it by; empty where the ring stays on the node.
    std::string nic_out, nic_in;
  };
  struct Peer {
    int peer = -1;
    std::uint64_t bytes_received = 0;
  };
  long long t_us = 0;  // the rank's wall clock
  std::vector<Channel> channels;
  std::vector<Peer> peers;
  std::uint64_t calls_started = 0, calls_ended = 0;
};

// "rings": each channel's ring order (rank 0, once after init), and the
// devices it goes through when the engine knows them.
struct Rings {
  static constexpr std::string_view kType = "rings";
  struct Ring {
    int channel = 0;
    std::vector<int> ranks;
    // Per ring position (empty when unknown): the NIC number by which the
    // ring enters or leaves the node there (-1: it stays on the node), and
    // its network device.
    std::vector<int> nics;
    std::vector<std::string> devices;
  };
  std::vector<Ring> rings;
  std::vector<int> gpus;  // per rank: its GPU number on its node (-1 unknown); empty when unknown
};

// "trees": each tree's parent of every rank (-1 at a root).
struct Trees {
  static constexpr std::string_view kType = "trees";
  struct Tree {
    int tree = 0;
    std::vector<int> parents;
  };
  std::vector<Tree> trees;
};

// "connections": what carries each of a rank's connections.
struct Connections {
  static constexpr std::string_view kType = "connections";
  std::vector<ConnectionInfo> connections;
};

// "links": what a rank received from each peer in large transfers.
struct Links {
  static constexpr std::string_view kType = "links";
  struct Link {
    int from = -1;
    std::uint64_t bytes = 0, active_us = 0;
    std::uint64_t ahead = 0;    // transfers that arrived before the rank read them (they set no pace)
    std::optional<double> gbs;  // absent when no transfer was paced
    std::string transport;      // SHM, OFI, SOCKET; empty when unknown
  };
  std::vector<Link> links;
  // What this rank sent on its ring connections, as TCP counted it.
  struct Sent {
    int to = -1;
    std::uint64_t segments = 0, resent = 0;
  };
  std::vector<Sent> sent;  // "sent"; absent from an older agent's event
};

// "decision": the engine's choice for the first call of a size.
struct Decision {
  static constexpr std::string_view kType = "decision";
  std::string collective;
  std::uint64_t bytes = 0;
  std::string algorithm, protocol;
  int nchannels = 0;
  double time_us = 0;  // that first call's
};

// "tuner": the tuner's candidates for one collective and size.
struct TunerTable {
  static constexpr std::string_view kType = "tuner";
  struct Candidate {
    std::string algorithm, protocol;
    int channels = 0;
    double predicted_us = 0, latency_us = 0, bandwidth_gbs = 0;
    std::string excluded;  // why it cannot run; empty for a candidate
  };
  std::string collective;
  std::uint64_t bytes = 0;
  int nranks = 0;
  int chosen = -1;  // index into candidates, -1 for none
  std::vector<Candidate> candidates;
};

// "result": one nccl-tests row.
struct Result {
  static constexpr std::string_view kType = "result";
  struct Timing {
    double time_us = 0, algbw = 0, busbw = 0;
    long long wrong = 0;
  };
  std::string collective, dtype, redop;
  std::uint64_t bytes = 0, count = 0;
  int root = -1;
  Timing out_of_place;
  std::optional<Timing> in_place;
  // What the tuner ran for this size and what it predicted.
  struct Pick {
    std::string algorithm, protocol;
    int channels = 0;
    double predicted_us = 0;
  };
  std::optional<Pick> tuner;
  std::string candidate;  // with perf --candidates: whose row this is
};

// "error": a collective failed.
struct CollectiveError {
  static constexpr std::string_view kType = "error";
  std::string category, message;
};

// "stall": the hang wavefront (docs/collectives.md, "Stalls").
struct Stall {
  static constexpr std::string_view kType = "stall";
  StallReport report;
};

// "done": the rank finished its sweep.
struct RankDone {
  static constexpr std::string_view kType = "done";
  long long wrong = 0, rows = 0;
  int exit_code = 0;
};

// "bisect": a round of the bisection inside the job when its sweep fell
// short (perf --bisect, ringmaster/tools/bisect.h), from rank 0: the
// groups of nodes (GROUP_RANK) it measured, one after another, with their
// all_reduce busbw; after the last round one more with `verdict` set
// ("node", "link", "between" or "none") and no groups.
struct Bisect {
  static constexpr std::string_view kType = "bisect";
  struct Group {
    std::vector<int> nodes;
    double busbw = 0;
    bool slow = false;
    std::string error;
  };
  int round = 0;
  std::vector<Group> groups;
  std::string verdict;  // empty for a round
  int node = -1, from = -1, to = -1;
  std::vector<int> side_a, side_b;
  std::string text;
};

// One line for a person: "bisect round 2: nodes 4,5 0.01 GB/s (slow);
// nodes 6,7 2.92 GB/s", or "bisect (3 rounds): node 5: ...".
std::string describe(const Bisect& b);

// "output": a line of the rank's stdout that is not an event (`cut`: a
// piece of a line over 1 MiB).
struct RankOutput {
  static constexpr std::string_view kType = "output";
  std::string text;
  bool cut = false;
};

// "rank_exit": the rank's process exited 0.
struct RankExit {
  static constexpr std::string_view kType = "rank_exit";
  int exit_code = 0;
};

// "rank_failed": the process exited non-zero or was killed.
struct RankFailed {
  static constexpr std::string_view kType = "rank_failed";
  long long pid = 0;
  std::optional<int> exit_code, signal;
  std::string signal_name, summary, stderr_tail;
};

// "run_done": every rank of one agent has ended (rank -1).
struct RunDone {
  static constexpr std::string_view kType = "run_done";
  bool ok = false, cancelled = false;
};

// "fault_applied": the agent injected a fault (docs/protocol.md, "Fault
// injection"); sent by the agent (rank -1) with an empty run id.
struct FaultApplied {
  static constexpr std::string_view kType = "fault_applied";
  int fault_id = 0;
  FaultSpec fault;
  std::string mechanism;  // nftables, connect_filter, netem, htb, tmpfs
  std::string note;
};

// "fault_reverted": a fault is gone, because a client cleared it
// (`cleared`, empty run id) or because the run that started under it
// ended (`run_ended`, that run's id).
struct FaultReverted {
  static constexpr std::string_view kType = "fault_reverted";
  int fault_id = 0;
  FaultSpec fault;
  std::string reason;
};

// "nic_sample": what each of the node's network devices has carried so
// far (cumulative), sent by the agent (rank -1, empty run id) every
// heartbeat while a client is subscribed: the rails' traffic, Ringmaster's
// own or not.
struct NicSample {
  static constexpr std::string_view kType = "nic_sample";
  struct Nic {
    std::string name;  // eth0; an RDMA device as device:port (rdmap79s0:1)
    std::uint64_t rx_bytes = 0, tx_bytes = 0;
    std::uint64_t speed_mbps = 0;  // 0 when unknown
    bool rdma = false;
  };
  long long t_us = 0;  // the agent's wall clock
  std::vector<Nic> nics;
};

// "job_rank": a process of a job Ringmaster did not start, as a watcher
// (`ringmaster-cli watch`, an agent's `watch`) read it from /proc: where
// its rendezvous stands (ringmaster/tools/job_watch.h), or `error` when
// it could not be read. Sent again each time what it says changes.
struct JobRank {
  static constexpr std::string_view kType = "job_rank";
  int pid = 0;
  int rank = -1, world_size = -1;
  Stage stage = Stage::store_connect;
  std::string outcome;  // hosting, connected, unanswered, refused, rejected, not_connected
  std::string remote, master_addr, run_id;
  int master_port = 0;
  int syn_retransmits = 0, store_clients = 0;
  std::string detail, hint, command;
  std::string error;  // why the process could not be read; the rest is then empty
};

// "job_wavefront": a watched job's hang wavefront as its ranks' PyTorch
// Flight Recorders give it now (ringmaster/tools/flight_recorder.h), whole:
// one sentence a process group's state; sent each time it changes.
struct JobWavefront {
  static constexpr std::string_view kType = "job_wavefront";
  std::vector<std::string> wavefront;
};

// "job_nccl": what a watched rank's NCCL_DEBUG_FILE says so far
// (ringmaster/tools/nccl_log.h): one line for a person, and the parsed
// decisions (channels, rings, trees, connections, picks, warnings).
struct JobNcclLog {
  static constexpr std::string_view kType = "job_nccl";
  int pid = 0, rank = -1;
  std::string file, summary;
  nlohmann::json nccl;  // the decisions as nccl_log.h's to_json writes them
};

// "job_ras": what NCCL's RAS port on a watched job's node says
// (ringmaster/tools/nccl_ras.h), each time it changes: dead, missing and
// unresponsive ranks, ranks behind in a communicator's collectives, the
// report's errors and warnings; `error` when the port could not be read.
struct JobRas {
  static constexpr std::string_view kType = "job_ras";
  std::string address;  // "localhost:28028"
  std::string format;   // "json" or "text": what the NCCL there answered
  std::vector<std::string> findings;
  std::string error;
};

// A type this build does not know (a newer rank or agent): kept whole.
struct Unknown {
  std::string type;
  nlohmann::json body;
};

using Event =
    std::variant<StageEnded, StageProgress, StageFailed, Sample, Rings, Trees, Connections, Links, Decision, TunerTable,
                 Result, CollectiveError, Stall, RankDone, Bisect, RankOutput, RankExit, RankFailed, RunDone,
                 FaultApplied, FaultReverted, NicSample, JobRank, JobWavefront, JobNcclLog, JobRas, Unknown>;

// The `type` of an event.
std::string_view type_of(const Event& e);

// The event's JSON, as docs/protocol.md lists it (with `type`).
nlohmann::json to_json(const Event& e);

// An event from its JSON. Throws Error(protocol) naming the type and the
// field when a field is missing or of the wrong type ("event 'stage':
// 'ok' is a string, not a boolean"); fields it does not know are skipped.
Event parse_event(const nlohmann::json& j);

// The agent's `event` message: which run, which rank (-1 for the agent's
// own), the event.
struct EventMessage {
  std::string run_id;
  int rank = -1;
  Event event;
  // The event as it came, when it was read from JSON: what is relayed, so
  // fields this build does not know pass along. Null for an event made
  // here.
  nlohmann::json body;
};
// From a message whose `type` is "event"; nothing for any other message.
// Throws Error(protocol) as parse_event does, naming the rank too.
// Body::drop leaves EventMessage::body null: a reader that only routes the
// typed event (the console, for every sample of every rank) saves copying
// each event's JSON.
enum class Body { keep, drop };
std::optional<EventMessage> parse_event_message(const nlohmann::json& message, Body body = Body::keep);
// The message's body without the envelope's `type`, `id` and `v` (the
// agent's session adds them); the event as it came when it came as JSON.
nlohmann::json to_json(const EventMessage& m);

// From the engine's records.
StageEnded stage_ended(const StageEvent& e);
StageProgress stage_progress(const StageEvent& e);
StageFailed stage_failed(const StageFailure& f);
// And back, for the engine's reading of several ranks' failures together
// (ringmaster/stage.h, read_together): one sentence each.
StageFailure stage_failure(const StageFailed& f);
std::vector<std::string> read_together(const std::vector<StageFailed>& failures);
Result result(const PerfSpec& spec, const PerfRow& row);
Decision decision(const CollectiveRecord& r);
TunerTable tuner_table(const tune::Decision& d);
Links links(const std::vector<PeerLinkCounters>& counters, const std::vector<ConnectionInfo>& connections);
JobRank job_rank(const WatchedRank& r);
// "NCCL RAS at localhost:28028: ..." on one line, for a person.
std::string describe(const JobRas& e);
// And back, for job_watch.h's describe(): what the event carries.
WatchedRank watched_rank(const JobRank& e);
// Back to the engine's row, for nccl-tests' table.
PerfRow perf_row(const Result& r);

}  // namespace ringmaster::agent::events

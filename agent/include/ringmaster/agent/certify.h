// Certify: a cluster's bring-up checks in the order an engineer runs
// them, over the agents of its nodes, with a verdict for every node and
// every link (docs/certify.md):
//
//   1. nodes      the software and settings every node's ranks get
//                 (the launchers' node gate, its odd nodes out named);
//   2. preflight  every node reaches every other on each port class a job
//                 uses, and each node's facts (limits, /dev/shm, MTU, ...);
//   3. linkcheck  every link, both directions, in rounds of disjoint pairs;
//   4. sweeps     all_reduce, all_gather, reduce_scatter and all_to_all
//                 over the nodes still in, each link of each run measured
//                 at its receiver.
//   5. envelope   with a declared instance type, each sweep's largest
//                 size against what such a cluster should reach: the
//                 simulator's prediction and the published runs it was
//                 fitted on (tools/envelope.h).
//
// A node a step isolates sits out the steps after it, so one bad node
// does not hide the rest; the checks stop early only where a later one
// cannot mean anything (fewer than two nodes left, pairs that cannot
// connect). `ringmaster-cli certify` runs it; so do the repro scenarios
// that expect a verdict.
#pragma once

#include <nlohmann/json.hpp>

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ringmaster/agent/linkcheck.h"
#include "ringmaster/agent/preflight.h"
#include "ringmaster/agent/requests.h"

namespace ringmaster::agent {

// PASS: nothing found. MONITOR: something worth watching that does not
// stop a job (a setting only one node has, a NIC slower than the rest).
// ISOLATE: take it out before a job runs there.
enum class Verdict : std::uint8_t { pass, monitor, isolate };
const char* name_of(Verdict v) noexcept;  // "PASS", "MONITOR", "ISOLATE"

// Why a node or link got its verdict, and which step found it.
struct VerdictReason {
  Verdict verdict = Verdict::monitor;
  std::string step;  // "nodes", "preflight", "linkcheck", "sweeps"
  std::string text;
};

struct NodeVerdict {
  std::string address, hostname;
  Verdict verdict = Verdict::pass;  // the worst of its reasons
  std::vector<VerdictReason> reasons;
};

// A link from one node to another (indices into the report's nodes).
struct LinkVerdict {
  int from = 0, to = 0;
  Verdict verdict = Verdict::isolate;
  std::vector<VerdictReason> reasons;
};

struct CertifyStep {
  enum class State : std::uint8_t { passed, found, failed, skipped };
  std::string name;   // "nodes", "preflight", "linkcheck", "sweeps"
  std::string title;  // "Nodes alike", ...
  State state = State::skipped;
  std::string summary;                // one line: what it checked and found, or why it was skipped
  std::vector<std::string> findings;  // what it found, one sentence each
  double seconds = 0;
  std::vector<int> nodes;  // the nodes it ran over
  nlohmann::json detail;   // the step's own report (preflight's, linkcheck's, the sweeps' rows)
};
const char* name_of(CertifyStep::State s) noexcept;  // "passed", "found", "failed", "skipped"

// One collective's sweep over the nodes still in.
struct CertifySweep {
  std::string collective;
  std::vector<int> nodes;
  struct Row {
    std::uint64_t bytes = 0;
    double time_us = 0, algbw = 0, busbw = 0;  // out of place, GB/s
    long long wrong = 0;
  };
  std::vector<Row> rows;
  std::string error;  // why it did not complete; empty when it did
  // The all_reduce job's bisection when it fell under its envelope: the
  // `bisect` events (docs/protocol.md), rounds then the verdict, nodes
  // numbered as the certification numbers them.
  nlohmann::json bisect = nlohmann::json::array();
};

// The steps in their order: (name, title).
struct CertifyStepName {
  std::string_view name, title;
};
std::span<const CertifyStepName> certify_steps();

struct CertifyReport {
  std::vector<NodeVerdict> nodes;
  std::vector<LinkVerdict> links;  // those found wanting; every other link passed
  std::vector<CertifyStep> steps;
  std::vector<CertifySweep> sweeps;
  double seconds = 0;
  // A sweep fell short of the expected envelope (or of the user's gate)
  // while no node or link was found to blame: the cluster as a whole.
  bool short_of_envelope = false;
  // The preflight's and the link check's own reports, for a caller that
  // shows them as those checks show them (the console's tabs).
  std::optional<PreflightReport> preflight;
  std::optional<LinkcheckReport> linkcheck;

  // PASS when every node and link passed and no sweep fell short, MONITOR
  // when the worst is MONITOR, ISOLATE when a node or link is isolated.
  Verdict overall() const;
  // 0 when nothing is isolated and every sweep reached its envelope, 1
  // otherwise (`certify`'s exit).
  int exit_code() const { return overall() == Verdict::isolate || short_of_envelope ? 1 : 0; }
};

struct CertifyOptions {
  int np_per_agent = 1;
  std::map<std::string, std::string> env;  // the ranks' (NCCL_SHM_DISABLE, NCCL_NET, ...)
  PreflightOptions preflight;
  LinkcheckOptions linkcheck;
  // The sweeps: each collective from min to max bytes, doubling.
  std::vector<Collective> collectives = {Collective::all_reduce, Collective::all_gather, Collective::reduce_scatter,
                                         Collective::all_to_all};
  std::string min_bytes = "1M", max_bytes = "16M";
  int iters = 5, warmup = 1;
  // An all_reduce sweep over three nodes or more that falls under the
  // instance's envelope (or the gate) is bisected inside its own job
  // (ringmaster/tools/bisect.h): the node or link it names is isolated.
  bool bisect = true;
  // The envelope: the nodes' instance type (a profile of
  // tools/simulate.h; empty: the step is skipped), how far under the
  // prediction a sweep may fall, and the user's own all_reduce gate in
  // GB/s at max_bytes (0: none; one above what the envelope allows is
  // refused before anything runs).
  std::string instance;
  // Or (or as well) a node's topology file, NCCL's or hwloc's: recognised
  // as an instance type by its GPUs and NICs, else its own links
  // predicted (tune::expected_envelope of a topology); with --instance
  // too, checked to have that type's GPUs and NICs.
  std::string topology_file;
  double tolerance = 0.25;
  double gate_gbs = 0;
  double sweep_timeout_s = 300;  // one collective's sweep
  double coll_timeout_s = 30;    // RINGMASTER_COLL_TIMEOUT for its ranks
  // Called when a step begins (state skipped, no summary yet) and when it
  // ends, for a caller that shows progress.
  std::function<void(const CertifyStep&, bool ended)> on_step;
  // Before every run a step starts (each linkcheck round, each sweep):
  // a scenario puts its faults back, as a fault lasts one run.
  std::function<void()> before_run;
  // After each step ends, the report so far (what `--state` keeps).
  std::function<void(const CertifyReport&)> on_progress;
  // A certification stopped half way (a report read back with
  // parse_certify_report): the steps it finished (passed or found, from
  // the first on) are kept with their verdicts and not run again; the
  // rest run over the nodes they left in. Its nodes must be these agents,
  // in their order.
  std::optional<CertifyReport> resume;
  // Set by another thread: the step under way ends as failed
  // ("interrupted") and no other starts. Null for never.
  const std::atomic<bool>* stop = nullptr;
};

// Why `options.gate_gbs` cannot be met by `nodes` nodes of the declared
// cluster (tune::gate_refusal), or empty. Throws Error(config) for an
// unknown instance type or a topology file refused.
std::string certify_gate_refusal(const CertifyOptions& options, int nodes);

// What the options declare the cluster to be, checked before anything
// runs. Throws Error(config) for an unknown type or a topology file that
// cannot be read, declares no GPU or disagrees with the type named.
struct DeclaredCluster {
  std::string name;  // the instance type, or the file when recognised as none; empty: nothing declared
  // With a topology file: what it declares and was recognised as
  // ("p5.48xl-topo.xml: 8 GPUs (sm_90), 32 NICs, a p5.48xlarge or
  // p5e.48xlarge").
  std::string declared_by;
};
DeclaredCluster certify_declared_cluster(const CertifyOptions& options, int nodes);

// Runs the steps over the agents (subscribed, their events through
// `next`; agent 0 hosts the sweeps' store).
CertifyReport certify(const std::vector<PreflightAgent>& agents, const NextMessage& next,
                      const CertifyOptions& options);

// A report back from to_json's form (a `--state` file): every field it
// keeps, the sweeps from the sweeps step's detail; the preflight's and
// link check's own reports are not kept. Throws Error(config) naming what
// is missing or of the wrong type.
CertifyReport parse_certify_report(const nlohmann::json& j);

// A certification's state file (`certify --state`, the console's): the
// report so far and the agents it is of. Written whole after each step
// (through a temporary file, so a crash leaves the last one).
// Complete: no step failed or was left out.
bool certification_complete(const CertifyReport& report);
void save_certification_state(const std::string& path, const std::vector<std::string>& agents,
                              const CertifyReport& report);
// The unfinished certification in `path` of exactly these agents, in
// their order, with the steps it finished (passed or found, from the
// first on); none when there is no file, it ran to its end, or it is of
// other agents. Throws Error(config) for a file that is not a state.
std::optional<CertifyReport> load_unfinished_certification(const std::string& path,
                                                           const std::vector<std::string>& agents);

// The report as text: the steps with their findings, then a verdict per
// node and per link found wanting.
std::string render_certify(const CertifyReport& report);

// The report as JSON (docs/certify.md, "The report"): schema
// "ringmaster.certify/1".
nlohmann::json to_json(const CertifyReport& report);
inline constexpr std::string_view kCertifySchema = "ringmaster.certify/1";

// The report (to_json's) as one self-contained HTML page: the verdict,
// the steps, every node, the links found wanting, the link check's matrix
// and each sweep's busbw by size against its envelope (inline SVG; no
// script, nothing fetched). The console exports the same page.
std::string render_certify_html(const nlohmann::json& report);

}  // namespace ringmaster::agent

// Link check: the bandwidth of every link between the agents' nodes, both
// directions, measured pair by pair in rounds of disjoint pairs (a round
// robin, so no node is in two transfers at once), each direction of a
// round on its own, by real two-rank runs (perf broadcast from the sending
// node's rank, over the transport a job would pick), each link measured at
// its receiver. Outliers are named: a node whose every link out (or in) is
// slow names the node, one slow link names the link. Used by
// `ringmaster-cli linkcheck` and `repro`.
#pragma once

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ringmaster/agent/preflight.h"

namespace ringmaster::agent {

// Rounds of disjoint pairs covering every pair of `n` nodes once (n - 1
// rounds for an even n, n for an odd one).
std::vector<std::vector<std::pair<int, int>>> round_robin_pairs(int n);

struct LinkcheckOptions {
  std::string bytes = "8M";  // per transfer
  int iters = 5;
  int warmup = 1;
  std::map<std::string, std::string> env;  // the ranks' environment (NCCL_SHM_DISABLE, NCCL_NET, ...)
  std::chrono::seconds per_pair{60};       // a pair's run may take this long
  // Called before each round's runs start (repro restores its faults).
  std::function<void(int round)> before_round;
};

struct LinkMeasure {
  int from = 0, to = 0;
  double gbs = 0;         // measured at the receiver; 0 when not measured
  std::string transport;  // "SOCKET", "OFI", "SHM"
  // Data moved, but always before the receiver waited for it: faster than
  // it could be timed, so not slow (gbs stays 0).
  bool ahead = false;
  std::string error;       // why not measured
  double nominal_gbs = 0;  // the slower of the two ends' NIC speeds; 0 when either is not known
  // For a link ahead of its reader: the pair's end-to-end rate (its best
  // sendrecv row), which the link carried at least; 0 when not known.
  double floor_gbs = 0;
  // What the sender's TCP counted on the link (0 of 0 when not told): a
  // link losing packets resends a share of them.
  std::uint64_t segments = 0, resent = 0;
  // Measured again on its own after its round found it slow (certify
  // does): its rate then, or ahead of its reader; 0 and false when not.
  double alone_gbs = 0;
  bool alone_ahead = false;
};

// The network device that holds a node's address, from its agent's
// inventory: its name and negotiated speed (0: not known).
struct NodeNic {
  std::string name;
  int speed_mbps = 0;
};

struct LinkcheckReport {
  std::vector<std::string> nodes;  // each node's address
  std::vector<NodeNic> nics;       // each node's
  std::vector<LinkMeasure> links;  // every ordered pair
  int rounds = 0;
  double seconds = 0;
  const LinkMeasure* link(int from, int to) const;
};

// The next message from any agent before the deadline (events the agents'
// clients received), or nothing.
using NextMessage = std::function<std::optional<nlohmann::json>(std::chrono::steady_clock::time_point)>;

// Runs the check; the agents' clients must be subscribed, their events
// coming through `next`. Each agent's inventory says which NIC holds its
// address, and at what speed.
LinkcheckReport run_linkcheck(const std::vector<PreflightAgent>& agents, const NextMessage& next,
                              const LinkcheckOptions& options);

// One problem a link check found, with what it is about: a node (every
// link out of or into it slow, its NIC slower than the others') or a link
// (slow, far under its NICs, not measured: then both directions).
struct LinkProblem {
  enum class Kind : std::uint8_t { not_measured, node_slow, link_slow, nic_slow, under_nic, node_lossy, link_lossy };
  Kind kind = Kind::link_slow;
  std::string text;        // the sentence diagnose_links says
  int node = -1;           // node_slow, nic_slow, node_lossy (every link into it)
  int from = -1, to = -1;  // link_slow, link_lossy, under_nic, not_measured (from < to)
};
std::vector<LinkProblem> find_link_problems(const LinkcheckReport& report);

// Slow links (below a fifth of the median of their transport's links),
// lossy links (their sender resent a share of its TCP segments, as the
// run summary's rule: telemetry.h),
// failed pairs, NICs that run slower than the other nodes' (a link
// negotiated down), and links under a hundredth of their NICs' speed, as
// sentences naming the node or the link; problems only.
std::vector<std::string> diagnose_links(const LinkcheckReport& report);

// How the check measured the link from node `from` to node `to` when it
// was not slow by the check's rule (at least a fifth of the median link's
// rate: "the link check measured it alone at 4.12 GB/s (median 5.10
// GB/s)"); empty when it was not measured or measured slow. A link a collective's run summary
// names slow that reads well here was slow only under that run's load.
std::string measured_well(const LinkcheckReport& report, int from, int to);

// The matrix in MB/s (rows send, columns receive), then the findings.
std::string render_linkcheck(const LinkcheckReport& report, const std::vector<std::string>& findings);

nlohmann::json to_json(const LinkcheckReport& report, const std::vector<std::string>& findings);

}  // namespace ringmaster::agent

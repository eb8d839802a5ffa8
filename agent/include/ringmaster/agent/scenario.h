// The repro catalog (resources/scenarios, docs/scenarios.md): scenarios
// read and checked in one place, a run's events gathered into what a
// scenario's expectations are checked against, and the checks. Shared by
// `ringmaster-cli repro`, which builds the hosts and runs the scenario,
// and the console, which reads the catalog and checks the recorded events
// of a run it replays.
#pragma once

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "ringmaster/agent/events.h"
#include "ringmaster/agent/fault.h"

namespace ringmaster::agent {

// A fault a scenario injects, and on which hosts (every host when empty).
struct ScenarioFault {
  std::vector<int> hosts;
  FaultSpec fault;
  bool on(int host) const { return hosts.empty() || std::find(hosts.begin(), hosts.end(), host) != hosts.end(); }
};

struct Scenario {
  std::string file;  // the file's name in the catalog
  std::string name, title, story;
  int hosts = 2;           // 1..16
  int ranks_per_host = 1;  // 1..16
  int timeout_s = 90;      // the run must end within this
  std::vector<ScenarioFault> faults;
  nlohmann::json run = nlohmann::json::object();     // master_addr, master_port, perf, env, env_on, placement, ...
  nlohmann::json expect = nlohmann::json::object();  // docs/scenarios.md, "Expectations"
  nlohmann::json action = nlohmann::json::object();  // kill_rank, freeze_rank
  nlohmann::json resolver;                           // null when the hosts use the system's resolver
  // How the hosts differ from a plain host before the run, step by step
  // ({"hosts": [..], "mtu": N | "sysctl": {..} | "outbound_from_port": P |
  // "stray_traffic": {"ports": "29500,40000-40015"} | "agent_env":
  // {"NCCL_PROTO": "Simple"} | "conntrack_full": true}).
  nlohmann::json setup = nlohmann::json::array();

  // Each rank's host: run.placement, else ranks_per_host on each host in
  // turn (-1: a rank no host starts).
  std::vector<int> placement() const;
  // run.world_size, else one rank per placed slot.
  int world_size() const;
  // What it checks depends on rates or on when things happen (a slow or
  // lossy link, a link check, certify, a bisection, a stall report, an
  // action once data moves): two busy cores shared with another
  // scenario would skew it, so it runs with no other beside it.
  bool runs_alone() const;
};

// "29500,40000-40015": the ports a setup step names, in order; nullopt
// when the text is not ports of 1..65535 and ascending ranges, or names
// more than 1024.
std::optional<std::vector<std::uint16_t>> parse_port_list(const std::string& text);

// Reads every *.json of a catalog directory, sorted by file name. Throws
// Error(config) naming the file and what is wrong: not JSON, a missing or
// mistyped field, a name that is not lowercase letters, digits and dashes
// or that two files share, hosts or ranks_per_host outside 1..16, an
// outcome other than fail, complete or refused (by the node gate, before
// launch), an expectation it does not know.
std::vector<Scenario> load_catalog(const std::string& dir);

// What a run said, gathered from its events as they come.
struct ScenarioRun {
  std::set<std::string> entered;                       // stages some rank finished ok
  std::vector<std::pair<int, std::string>> notes;      // (rank, "STAGE: detail") of each stage that ended well
  std::map<int, events::StageFailed> failures;         // by rank
  std::map<int, std::vector<std::string>> errors;      // collective errors by rank
  std::map<int, std::string> exits;                    // by rank: its agent's rank_failed summary
  std::vector<std::pair<int, events::Links>> links;    // (receiving rank, its links)
  std::map<std::pair<int, int>, ConnectionInfo> ring;  // (rank, next) on channel 0
  struct Stall {
    StallReport report;
    std::optional<double> after_stop_s;  // since a rank was stopped (SIGSTOP), when one was
  };
  std::vector<Stall> stalls;
  std::vector<events::Bisect> bisect;  // perf.bisect's rounds, then its verdict
  int agents_done = 0;
  bool all_ok = true;
  std::vector<std::string> report;  // lines worth showing, as they happened

  // `after_stop_s`: for a stall report, how long after a rank was stopped
  // it came (the runner knows; a replay does not).
  void add(const events::EventMessage& m, std::optional<double> after_stop_s = std::nullopt);
};

// The scenario's expectations about a run (all but preflight and
// linkcheck, which run tools of their own) against what it said.
struct ScenarioCheck {
  std::vector<std::string> report;   // failures, errors and slow links, one line each
  std::vector<std::string> reasons;  // every expectation not met; empty when all were
  bool passed() const { return reasons.empty(); }
};
ScenarioCheck check_run(const Scenario& s, const ScenarioRun& run);

}  // namespace ringmaster::agent

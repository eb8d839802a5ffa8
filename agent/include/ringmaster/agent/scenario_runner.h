// Runs a repro scenario for real (docs/scenarios.md): a small cluster on
// this machine, one network namespace per host joined by veth pairs to a
// bridge (198.18.0.0/24) in a namespace of its own, a real
// ringmaster-agent in each; the scenario's faults through the agents, its
// run launched, and what Ringmaster reports checked against the
// scenario's expectations. Needs root, `ip` and `nft`.
//
// `ringmaster-cli repro run` and the console's Scenarios tab both run
// scenarios through this library. Nothing of a cluster is in the
// machine's own namespace, so run_scenario may run on several threads at
// once (`repro run --all` runs those that time nothing side by side).
#pragma once

#include <atomic>
#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "ringmaster/agent/scenario.h"

namespace ringmaster::agent {

// What one scenario showed, and whether that is what it expects.
struct ScenarioVerdict {
  bool passed = true;
  std::string skipped;               // why it could not be staged for real; empty when it ran
  std::vector<std::string> reasons;  // why it did not pass
  std::vector<std::string> report;   // what Ringmaster said
};

struct ScenarioRunOptions {
  std::string agent_path;  // the ringmaster-agent each host runs
  bool keep = false;       // leave the namespaces and bridge for inspection
  // Every event of the run as JSON lines (the console replays them); null
  // for none.
  std::ostream* events = nullptr;
  // Set by another thread (or a signal handler): the scenario stops
  // waiting, fails as "interrupted" and cleans up. Null for never.
  const std::atomic<bool>* stop = nullptr;
  // Each step as it starts ("building the hosts", "starting the agents",
  // "applying the faults", "checking before the run (preflight,
  // certify)", "the node gate", "launching the run", "collecting the
  // run's events", "the link check", "taking the hosts down"), on the
  // scenario's thread; empty for none.
  std::function<void(const std::string&)> on_step;
};

// Why scenarios cannot run on this machine (not root, `ip` or `nft`
// missing), or empty when they can.
std::string scenarios_cannot_run();

// Removes what runs killed before their cleanup left behind: namespaces
// and bridges named after processes that no longer exist.
void remove_scenario_leftovers();

// What this process's scenarios left behind (namespaces, bridges, veths,
// resolver files, cgroups); empty after a clean run.
std::vector<std::string> scenario_leftovers();

// The agents that did not end as they should on SIGTERM (hung, crashed,
// non-zero status) since the last call, each said once.
std::vector<std::string> take_agent_exit_problems();

// Builds the scenario's cluster, runs it and takes it down (also when it
// throws). Throws Error when the hosts cannot be built.
ScenarioVerdict run_scenario(const Scenario& scenario, const ScenarioRunOptions& options);

}  // namespace ringmaster::agent

// `ringmaster-cli remote watch`: a job's processes watched through the
// agents of their nodes (the agents' `watch` request).
#pragma once

#include <CLI/CLI.hpp>

#include "agent_set.h"
#include "ringmaster/agent/requests.h"

namespace ringmaster::cli {

struct RemoteWatchOptions {
  agent::WatchRequest request;  // its watch_id made when it starts
  bool json = false;
};

void add_remote_watch_options(CLI::App& watch, RemoteWatchOptions& o);

// Asks every agent of `set` to watch the job; prints what their watchers
// see until they end. Exit 0; 1 when no agent has a process of the job or
// a watcher failed; 2 for a job named nowhere; the remote failure code
// when an agent's connection ends.
int remote_watch(const AgentSet& set, RemoteWatchOptions o);

}  // namespace ringmaster::cli

// Preflight over agents: the JSON of the engine's preflight types, the
// requests an agent serves (preflight_listen, preflight_probe,
// preflight_release; docs/protocol.md), and run_preflight(), which drives
// every agent through them and gathers a PreflightReport. Used by
// `ringmaster-cli preflight`, `repro` and the console.
#pragma once

#include <nlohmann/json.hpp>

#include <chrono>
#include <future>
#include <string>
#include <vector>

#include "ringmaster/tools/preflight.h"

namespace ringmaster::agent {

class AgentClient;

nlohmann::json to_json(const NodeFacts& facts);
NodeFacts node_facts_from_json(const nlohmann::json& j);
nlohmann::json to_json(const PreflightReport& report, const std::vector<PreflightFinding>& findings);

// Bounds an agent puts on a preflight request.
inline constexpr int kPreflightMaxPortsPerClass = 4;
inline constexpr std::size_t kPreflightMaxTargets = 8192;
inline constexpr int kPreflightMaxWindowMs = 10000;
inline constexpr int kPreflightMaxHoldS = 600;

struct PreflightOptions {
  std::string master_addr;  // empty: the first agent's address
  std::uint16_t master_port = 29500;
  std::string socket_ifname;  // NCCL_SOCKET_IFNAME to check on every node
  std::string port_range;     // RINGMASTER_PORT_RANGE "LOW-HIGH" to sample too
  int ports_per_class = 2;
  std::chrono::milliseconds window{3000};  // per connect attempt
};

// One node of the preflight: its agent, and the address the others probe.
struct PreflightAgent {
  AgentClient* client = nullptr;
  std::string address;
};

// The replies to a request sent to every node at once (a future each; an
// invalid one for a node not asked: no reply, no error). Each node is
// given `limit` after the latest reply from any of them, not from when its
// turn to be read comes: nodes that share CPUs (agents on one host, a
// loaded node) answer one after another, and a node early in the list is
// not given up while the others still answer. Returns each node's error
// ("no answer to preflight_listen within 15 s of the last reply from any
// node", or the agent's refusal), empty for a reply, which is in `replies`.
std::vector<std::string> wait_for_replies(std::vector<std::future<nlohmann::json>>& pending,
                                          std::chrono::milliseconds limit, const char* what,
                                          std::vector<nlohmann::json>& replies);

// Asks every agent to listen on its sample ports and report its facts,
// then every agent to probe every other one's ports (and each of its
// interfaces), all at once; releases the ports and returns the report.
// An agent that fails is a node with `error` set; the others go on.
PreflightReport run_preflight(const std::vector<PreflightAgent>& agents, const PreflightOptions& options);

}  // namespace ringmaster::agent

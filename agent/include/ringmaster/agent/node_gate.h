// Before a run starts on several agents: are its nodes alike? A job whose
// nodes load different NCCL, libfabric or driver versions, or give their
// ranks different NCCL_* settings, fails in ways that name none of them
// (a hang in a collective, a protocol mismatch deep in a transport). Every
// launcher (the console, `ringmaster-cli remote`, the scenario runner)
// reads the agents' inventories and asks this one gate before it sends a
// run; it refuses with the nodes and the difference.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "ringmaster/agent/requests.h"
#include "ringmaster/tools/node_compare.h"

namespace ringmaster::agent {

struct NodeGate {
  // Differences a run is refused for, one sentence each ("the nodes
  // differ in libfabric: 1.18 on node 0 (host0); 1.22 on node 1
  // (host1)").
  std::vector<std::string> refusals;
  // Differences worth saying that a run goes ahead with: a component the
  // run does not load, a setting that is a node's own (NCCL_SOCKET_IFNAME,
  // NCCL_DEBUG), software present on some nodes only.
  std::vector<std::string> notes;
  // Each difference whole, with the odd nodes out (positions in the list
  // the gate was given): what `certify` gives its verdicts from.
  std::vector<NodeDifference> differences;

  bool passed() const { return refusals.empty(); }
  // "refused before launch: <refusals>; make the nodes alike (...), or
  // <override>": `override` is how the launcher's user goes ahead anyway
  // ("launch with --allow-mixed-nodes").
  std::string refusal(std::string_view override) const;
};

// The nodes in the run's order (rank 0's first), named "node I
// (hostname)", compared by compare_nodes (ringmaster/tools/node_compare.h):
// what breaks a run refuses it, the rest is told. `engine`: what the
// ranks run; NCCL and its network plugin count only for runs through
// NCCL.
NodeGate check_nodes_alike(const std::vector<Inventory>& nodes, PerfRequest::Engine engine);

}  // namespace ringmaster::agent

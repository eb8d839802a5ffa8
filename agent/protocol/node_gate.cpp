#include "ringmaster/agent/node_gate.h"

#include <fmt/format.h>

namespace ringmaster::agent {

NodeGate check_nodes_alike(const std::vector<Inventory>& nodes, PerfRequest::Engine engine) {
  std::vector<NodeSoftware> software;
  for (std::size_t i = 0; i < nodes.size(); ++i)
    software.push_back({static_cast<int>(i), nodes[i].hostname, nodes[i].stack, nodes[i].rank_env, true});
  NodeGate gate;
  gate.differences = compare_nodes(software, engine == PerfRequest::Engine::nccl);
  for (const auto& d : gate.differences)
    (d.breaks_a_run ? gate.refusals : gate.notes).push_back(d.sentence);
  return gate;
}

std::string NodeGate::refusal(std::string_view override) const {
  return fmt::format(
      "refused before launch: {}. A job's nodes must load the same software and give their ranks the same "
      "settings; make them alike (the agents' environment: their unit's Environment= or the container's env, and "
      "the packages each node's image installs), or {}",
      fmt::join(refusals, "; "), override);
}

}  // namespace ringmaster::agent

#include "ringmaster/agent/node_gate.h"

#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <utility>

namespace ringmaster::agent {

namespace {

// One value and the nodes that hold it, in the order first seen.
using Groups = std::vector<std::pair<std::string, std::vector<int>>>;

// Each node's value (nullopt: the node does not say), grouped.
Groups group(const std::vector<std::optional<std::string>>& values) {
  Groups out;
  for (int i = 0; i < static_cast<int>(values.size()); ++i) {
    const auto& v = values[static_cast<std::size_t>(i)];
    if (!v) continue;
    auto same = std::find_if(out.begin(), out.end(), [&](const auto& g) { return g.first == *v; });
    if (same == out.end()) {
      out.push_back({*v, {i}});
    } else {
      same->second.push_back(i);
    }
  }
  return out;
}

// "2.21.5 on nodes 0 (host0), 1 (host1); 2.19.3 on node 2 (host2)"
std::string who_has_what(const Groups& groups, const std::vector<Inventory>& nodes) {
  std::vector<std::string> seen;
  for (const auto& [value, on] : groups) {
    std::vector<std::string> named;
    for (const int i : on)
      named.push_back(fmt::format("{} ({})", i, nodes[static_cast<std::size_t>(i)].hostname));
    seen.push_back(fmt::format("{} on node{} {}", value, on.size() == 1 ? "" : "s", fmt::join(named, ", ")));
  }
  return fmt::format("{}", fmt::join(seen, "; "));
}

bool not_found(const std::string& version) {
  return version.starts_with("not found");
}

// Whether a run of `engine` loads the component, so that a node without it
// or with another version of it breaks the run.
bool run_loads(const std::string& component, PerfRequest::Engine engine) {
  if (component == "nccl" || component == "aws_ofi_nccl") return engine == PerfRequest::Engine::nccl;
  return true;
}

void compare_stacks(const std::vector<Inventory>& nodes, PerfRequest::Engine engine, NodeGate& gate) {
  std::vector<std::string> components;
  for (const auto& n : nodes) {
    for (const auto& [component, version] : n.stack) {
      if (std::find(components.begin(), components.end(), component) == components.end())
        components.push_back(component);
    }
  }
  for (const auto& component : components) {
    std::vector<std::optional<std::string>> versions;
    for (const auto& n : nodes) {
      const auto it = std::find_if(n.stack.begin(), n.stack.end(), [&](const auto& e) { return e.first == component; });
      // "not found (why)" differs in its why from node to node; the
      // component is missing alike.
      versions.push_back(it == n.stack.end()     ? std::nullopt
                         : not_found(it->second) ? std::optional<std::string>("not found")
                                                 : std::optional<std::string>(it->second));
    }
    const Groups groups = group(versions);
    if (groups.size() < 2) continue;
    const auto found =
        std::count_if(groups.begin(), groups.end(), [](const auto& g) { return g.first != "not found"; });
    const std::string sentence = fmt::format("the nodes differ in {}: {}", component, who_has_what(groups, nodes));
    // Two versions of what the run loads break it; one version and its
    // absence elsewhere breaks it only where the run needs it everywhere
    // (NCCL and its plugin for a run through NCCL; a driver or libfabric
    // missing on a node is that node's transport choice, said at connect).
    const bool two_versions = found >= 2;
    const bool needed_everywhere = component == "ringmaster" || engine == PerfRequest::Engine::nccl;
    if (run_loads(component, engine) && (two_versions || needed_everywhere)) {
      gate.refusals.push_back(sentence);
    } else {
      gate.notes.push_back(sentence);
    }
  }
}

void compare_settings(const std::vector<Inventory>& nodes, NodeGate& gate) {
  std::vector<std::string> names;
  for (const auto& n : nodes) {
    for (const auto& [name, value] : n.rank_env) {
      if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
    }
  }
  std::sort(names.begin(), names.end());
  for (const auto& name : names) {
    std::vector<std::optional<std::string>> values;
    for (const auto& n : nodes) {
      const auto it = n.rank_env.find(name);
      values.push_back(it == n.rank_env.end() ? std::string("unset") : name + "=" + it->second);
    }
    const Groups groups = group(values);
    if (groups.size() < 2) continue;
    if (node_own_setting(name)) {
      gate.notes.push_back(fmt::format("the nodes' agents give their ranks different {} (a node's own): {}", name,
                                       who_has_what(groups, nodes)));
    } else {
      gate.refusals.push_back(
          fmt::format("the nodes' agents give their ranks different {}: {}", name, who_has_what(groups, nodes)));
    }
  }
}

}  // namespace

bool node_own_setting(std::string_view name) {
  static constexpr std::string_view kOwn[] = {
      "NCCL_SOCKET_IFNAME",   "NCCL_IB_HCA",  "NCCL_HOSTID",       "NCCL_TOPO_FILE",  "NCCL_TOPO_DUMP_FILE",
      "NCCL_GRAPH_DUMP_FILE", "NCCL_DEBUG",   "NCCL_DEBUG_SUBSYS", "NCCL_DEBUG_FILE", "FI_LOG_LEVEL",
      "FI_LOG_PROV",          "FI_EFA_IFACE", "RINGMASTER_LOG"};
  return std::find(std::begin(kOwn), std::end(kOwn), name) != std::end(kOwn);
}

NodeGate check_nodes_alike(const std::vector<Inventory>& nodes, PerfRequest::Engine engine) {
  NodeGate gate;
  if (nodes.size() < 2) return gate;
  compare_stacks(nodes, engine, gate);
  compare_settings(nodes, gate);
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

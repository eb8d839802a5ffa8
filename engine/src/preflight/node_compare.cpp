#include "ringmaster/tools/node_compare.h"

#include <fmt/format.h>

#include <algorithm>
#include <optional>

namespace ringmaster {

namespace {

// One value and the nodes (positions in the list) that hold it, in the
// order first seen.
using Groups = std::vector<std::pair<std::string, std::vector<std::size_t>>>;

Groups group(const std::vector<std::optional<std::string>>& values) {
  Groups out;
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (!values[i]) continue;
    auto same = std::find_if(out.begin(), out.end(), [&](const auto& g) { return g.first == *values[i]; });
    if (same == out.end()) {
      out.push_back({*values[i], {i}});
    } else {
      same->second.push_back(i);
    }
  }
  return out;
}

// The nodes outside the largest group, when one group is the largest.
std::vector<int> outliers(const Groups& groups, const std::vector<NodeSoftware>& nodes) {
  std::size_t largest = 0, ties = 0;
  for (const auto& g : groups) {
    if (g.second.size() > largest) {
      largest = g.second.size();
      ties = 1;
    } else if (g.second.size() == largest) {
      ++ties;
    }
  }
  std::vector<int> out;
  if (ties != 1) return out;
  for (const auto& [value, on] : groups) {
    if (on.size() == largest) continue;
    for (const std::size_t i : on)
      out.push_back(nodes[i].index);
  }
  std::sort(out.begin(), out.end());
  return out;
}

// "2.21.5 on nodes 0 (host0), 1 (host1); 2.19.3 on node 2 (host2)"
std::string who_has_what(const Groups& groups, const std::vector<NodeSoftware>& nodes) {
  std::vector<std::string> seen;
  for (const auto& [value, on] : groups) {
    std::vector<std::string> named;
    for (const std::size_t i : on)
      named.push_back(fmt::format("{} ({})", nodes[i].index, nodes[i].name));
    seen.push_back(fmt::format("{} on node{} {}", value, on.size() == 1 ? "" : "s", fmt::join(named, ", ")));
  }
  return fmt::format("{}", fmt::join(seen, "; "));
}

void compare_stacks(const std::vector<NodeSoftware>& nodes, bool through_nccl, std::vector<NodeDifference>& out) {
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
      if (it == n.stack.end()) {
        versions.emplace_back();
      } else {
        versions.emplace_back(it->second.starts_with("not found") ? std::string("not found") : it->second);
      }
    }
    const Groups groups = group(versions);
    if (groups.size() < 2) continue;
    const auto found =
        std::count_if(groups.begin(), groups.end(), [](const auto& g) { return g.first != "not found"; });
    // Two versions of what the run loads break it; one version and its
    // absence elsewhere only where the run needs it on every node
    // (Ringmaster itself; NCCL and its plugin for a run through NCCL). A
    // driver or libfabric missing on a node is that node's transport
    // choice, said when the ranks connect.
    const bool loaded = through_nccl || (component != "nccl" && component != "aws_ofi_nccl");
    const bool everywhere = component == "ringmaster" || through_nccl;
    out.push_back({fmt::format("the nodes differ in {}: {}", component, who_has_what(groups, nodes)),
                   loaded && (found >= 2 || everywhere), outliers(groups, nodes)});
  }
}

void compare_settings(const std::vector<NodeSoftware>& nodes, std::vector<NodeDifference>& out) {
  std::vector<std::string> names;
  for (const auto& n : nodes) {
    for (const auto& [name, value] : n.settings) {
      if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
    }
  }
  std::sort(names.begin(), names.end());
  for (const auto& name : names) {
    std::vector<std::optional<std::string>> values;
    for (const auto& n : nodes) {
      const auto it = n.settings.find(name);
      if (!n.settings_known) {
        values.emplace_back();
      } else {
        values.emplace_back(it == n.settings.end() ? std::string("unset") : name + "=" + it->second);
      }
    }
    const Groups groups = group(values);
    if (groups.size() < 2) continue;
    const bool own = node_own_setting(name);
    out.push_back({fmt::format("the nodes' agents give their ranks different {}{}: {}", name,
                               own ? " (a node's own)" : "", who_has_what(groups, nodes)),
                   !own, outliers(groups, nodes)});
  }
}

}  // namespace

bool node_own_setting(std::string_view name) {
  static constexpr std::string_view kOwn[] = {
      "NCCL_SOCKET_IFNAME",   "NCCL_IB_HCA",  "NCCL_HOSTID",       "NCCL_TOPO_FILE",  "NCCL_TOPO_DUMP_FILE",
      "NCCL_GRAPH_DUMP_FILE", "NCCL_DEBUG",   "NCCL_DEBUG_SUBSYS", "NCCL_DEBUG_FILE", "FI_LOG_LEVEL",
      "FI_LOG_PROV",          "FI_EFA_IFACE", "RINGMASTER_LOG_TAG"};
  return std::find(std::begin(kOwn), std::end(kOwn), name) != std::end(kOwn);
}

std::vector<NodeDifference> compare_nodes(const std::vector<NodeSoftware>& nodes, bool through_nccl) {
  std::vector<NodeDifference> out;
  if (nodes.size() < 2) return out;
  compare_stacks(nodes, through_nccl, out);
  compare_settings(nodes, out);
  return out;
}

}  // namespace ringmaster

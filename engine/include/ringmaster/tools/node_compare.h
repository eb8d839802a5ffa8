// What every node of a job must share, compared across nodes: the
// software its ranks load (NCCL, libfabric, the drivers, Ringmaster) and
// the NCCL_*, FI_* and RINGMASTER_* settings they inherit. A job whose
// nodes differ hangs or fails in ways that name none of the differences.
// `preflight` reports them; the launchers' node gate
// (ringmaster/agent/node_gate.h) refuses a run for them.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ringmaster {

struct NodeSoftware {
  int index = 0;     // "node INDEX (name)"
  std::string name;  // its host name
  // (component, version), "not found (why)" when absent; empty: not said
  // (an older agent), left out of the comparison.
  std::vector<std::pair<std::string, std::string>> stack;
  std::map<std::string, std::string> settings;
  bool settings_known = true;  // false: left out of that comparison
};

struct NodeDifference {
  // "the nodes differ in libfabric: 1.18 on nodes 0 (host0), 1 (host1);
  // 1.22 on node 2 (host2)"
  std::string sentence;
  // Whether a run over these nodes breaks for it (two versions of what
  // it loads, a setting the ranks must share), rather than only being
  // worth saying (a node's own setting, a driver on some nodes only).
  bool breaks_a_run = false;
  // The nodes (their `index`) outside the one value most nodes share: the
  // odd ones out. Empty when no value is held by more nodes than any
  // other (two against two: no majority to tell the odd ones by).
  std::vector<int> outliers;
};

// `through_nccl`: the ranks run NCCL, so NCCL and its network plugin
// count (and must be present everywhere).
std::vector<NodeDifference> compare_nodes(const std::vector<NodeSoftware>& nodes, bool through_nccl);

// The settings a node may hold its own value of: interface and device
// names, its topology file and host id, where and how much it logs.
bool node_own_setting(std::string_view name);

}  // namespace ringmaster

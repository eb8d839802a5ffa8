// The double binary trees (algo/tree.h): which rank is whose parent.
#include <algorithm>

#include "algo/tree.h"
#include "ringmaster/tools/topology_search.h"

namespace ringmaster::algo {

DoubleTree build_double_tree(int rank, const std::vector<int>& node_of, int first, const std::vector<int>& chain_key) {
  const int n = static_cast<int>(node_of.size());
  const bool rotate = first >= 0;
  if (first < 0) first = 0;
  auto key = [&](int r) { return chain_key.empty() ? r : chain_key[static_cast<std::size_t>(r)]; };
  // Nodes in order of first appearance, starting from `first`'s node; the
  // ranks of each node in rank order starting from `first` on its node.
  std::vector<int> nodes;
  std::vector<std::vector<int>> members;
  for (int i = 0; i < n; ++i) {
    const int r = (first + i) % n;
    const int id = node_of[static_cast<std::size_t>(r)];
    auto it = std::find(nodes.begin(), nodes.end(), id);
    if (it == nodes.end()) {
      nodes.push_back(id);
      members.emplace_back();
      it = nodes.end() - 1;
    }
    members[static_cast<std::size_t>(it - nodes.begin())].push_back(r);
  }
  for (std::size_t i = 0; i < members.size(); ++i) {
    auto& m = members[i];
    // Chain order within a node, rotated so the chain starts at `first` on its node.
    std::sort(m.begin(), m.end(), [&](int a, int b) { return key(a) < key(b); });
    if (i == 0 && rotate) std::rotate(m.begin(), std::find(m.begin(), m.end(), first), m.end());
  }
  DoubleTree out;
  const int nnodes = static_cast<int>(nodes.size());
  for (const auto& m : members)
    out.depth_intra = std::max(out.depth_intra, static_cast<int>(m.size()) - 1);
  for (int t = 0; t < 2; ++t) {
    const auto node_parent = topo::binary_tree_parents(nnodes, t);
    int deepest = 0;
    for (int v = 0; v < nnodes; ++v) {
      int depth = 0;
      for (int at = v; node_parent[static_cast<std::size_t>(at)] >= 0; at = node_parent[static_cast<std::size_t>(at)])
        ++depth;
      deepest = std::max(deepest, depth);
      if (node_parent[static_cast<std::size_t>(v)] < 0) out.root[static_cast<std::size_t>(t)] = members[v].front();
    }
    out.depth_inter = std::max(out.depth_inter, deepest);
    auto& parent = out.parent[static_cast<std::size_t>(t)];
    auto& children = out.children[static_cast<std::size_t>(t)];
    for (int v = 0; v < nnodes; ++v) {
      const auto& m = members[static_cast<std::size_t>(v)];
      // The chain: each rank's parent is the one before it; the head's is
      // the head of the parent node.
      for (std::size_t i = 0; i < m.size(); ++i) {
        int up = -1;
        if (i > 0) {
          up = m[i - 1];
        } else if (node_parent[static_cast<std::size_t>(v)] >= 0) {
          up = members[static_cast<std::size_t>(node_parent[static_cast<std::size_t>(v)])].front();
        }
        if (m[i] == rank) parent = up;
        if (up == rank) children.push_back(m[i]);
      }
    }
  }
  return out;
}

}  // namespace ringmaster::algo

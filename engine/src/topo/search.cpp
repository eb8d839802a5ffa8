// Channel search: per-node orders that keep GPU-NIC affinity, rings across
// nodes, and double binary trees.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>
#include <numeric>
#include <tuple>

#include "base/log.h"
#include "ringmaster/status.h"
#include "ringmaster/tools/topology_search.h"

namespace ringmaster::topo {
namespace {

// Closer first: path class, then wider, then lower GPU number.
auto closeness(const Topology& t, int from, int to) {
  const Path p = t.path(from, to);
  return std::make_tuple(static_cast<int>(p.cls), -p.nvlinks, -p.bandwidth, t.node(to).index);
}

struct NodeOrder {
  std::vector<int> local;  // ring order of local ranks
  int nic = -1;            // NIC number used to leave and enter, -1 none
};

// The order of a node's ranks for one channel.
NodeOrder order_node(const Topology& t, int ranks, int channel, bool crosses_nodes) {
  NodeOrder out;
  const auto gpus = t.gpus();
  const auto nics = t.nics();
  if (gpus.empty()) {
    out.local.resize(static_cast<std::size_t>(ranks));
    std::iota(out.local.begin(), out.local.end(), 0);
    if (crosses_nodes && !nics.empty()) out.nic = t.node(nics[static_cast<std::size_t>(channel) % nics.size()]).index;
    return out;
  }
  std::vector<int> pool(gpus.begin(), gpus.begin() + ranks);  // node ids of this node's GPUs
  auto local_of = [&](int gpu) { return static_cast<int>(std::find(gpus.begin(), gpus.end(), gpu) - gpus.begin()); };
  int first = -1;
  int last = -1;
  if (crosses_nodes && !nics.empty()) {
    // Channels take the NICs in turn; enter at the GPU nearest the NIC and
    // leave from the next nearest, so both node crossings stay local.
    const int nic = nics[static_cast<std::size_t>(channel) % nics.size()];
    out.nic = t.node(nic).index;
    std::vector<int> by_distance = pool;
    std::stable_sort(by_distance.begin(), by_distance.end(),
                     [&](int a, int b) { return closeness(t, nic, a) < closeness(t, nic, b); });
    const auto best = t.path(nic, by_distance.front()).cls;
    const auto nearest = static_cast<std::size_t>(
        std::count_if(by_distance.begin(), by_distance.end(), [&](int g) { return t.path(nic, g).cls == best; }));
    // Later rounds over the NICs swap which near GPU enters and which leaves.
    const std::size_t round = static_cast<std::size_t>(channel) / nics.size();
    first = by_distance[round % nearest];
    last = nearest > 1 ? by_distance[(round + 1) % nearest] : (by_distance.size() > 1 ? by_distance[1] : -1);
  } else {
    first = pool[static_cast<std::size_t>(channel) % pool.size()];
  }
  std::vector<int> ring{first};
  pool.erase(std::find(pool.begin(), pool.end(), first));
  if (last >= 0) pool.erase(std::find(pool.begin(), pool.end(), last));
  while (!pool.empty()) {
    const int at = ring.back();
    const auto next = std::min_element(pool.begin(), pool.end(),
                                       [&](int a, int b) { return closeness(t, at, a) < closeness(t, at, b); });
    ring.push_back(*next);
    pool.erase(next);
  }
  if (last >= 0) ring.push_back(last);
  for (int g : ring)
    out.local.push_back(local_of(g));
  return out;
}

}  // namespace

std::vector<int> binary_tree_parents(int n, int tree) {
  std::vector<int> parent_of_position(static_cast<std::size_t>(std::max(n, 0)), -1);
  if (n <= 1) return parent_of_position;
  // Tree over positions: position p > 0 with lowest set bit b has children
  // p - b/2 and p + b/2 (narrowed until it fits); position 0 is the root
  // with the largest power of two below n as its only child.
  int top = 1;
  while (top * 2 < n)
    top *= 2;
  parent_of_position[static_cast<std::size_t>(top)] = 0;
  for (int p = 1; p < n; ++p) {
    const int b = p & -p;
    if (b == 1) continue;
    parent_of_position[static_cast<std::size_t>(p - b / 2)] = p;
    for (int step = b / 2; step >= 1; step /= 2) {
      if (p + step < n) {
        parent_of_position[static_cast<std::size_t>(p + step)] = p;
        break;
      }
    }
  }
  if (tree == 0) return parent_of_position;
  // Tree 1: mirror (even n) or shift by one (odd n), so the leaves of one
  // tree are the inner nodes of the other.
  auto position = [&](int r) { return n % 2 == 0 ? n - 1 - r : (r + n - 1) % n; };
  std::vector<int> position_to_rank(static_cast<std::size_t>(n));
  for (int r = 0; r < n; ++r)
    position_to_rank[static_cast<std::size_t>(position(r))] = r;
  std::vector<int> parents(static_cast<std::size_t>(n), -1);
  for (int r = 0; r < n; ++r) {
    const int up = parent_of_position[static_cast<std::size_t>(position(r))];
    parents[static_cast<std::size_t>(r)] = up < 0 ? -1 : position_to_rank[static_cast<std::size_t>(up)];
  }
  return parents;
}

ChannelPlan search_channels(std::span<const NodeRanks> nodes, int nchannels) {
  ChannelPlan plan;
  std::vector<int> first_rank;
  std::vector<int> counts;
  for (std::size_t n = 0; n < nodes.size(); ++n) {
    const Topology* t = nodes[n].topology;
    if (!t) throw Error(ErrorCategory::config, fmt::format("channel search: node {} has no topology", n));
    const int gpus = static_cast<int>(t->gpus().size());
    int ranks = nodes[n].ranks < 0 ? std::max(gpus, 1) : nodes[n].ranks;
    if (gpus > 0 && ranks > gpus) {
      throw Error(ErrorCategory::config, fmt::format("channel search: node {} ({}) runs {} ranks but has {} GPUs", n,
                                                     t->source(), ranks, gpus));
    }
    first_rank.push_back(plan.nranks);
    counts.push_back(ranks);
    for (int l = 0; l < ranks; ++l) {
      plan.node_of.push_back(static_cast<int>(n));
      plan.local_of.push_back(l);
    }
    plan.nranks += ranks;
  }
  const bool crosses = nodes.size() > 1;
  const int nnodes = static_cast<int>(nodes.size());
  // Identical nodes share one search (a 128-node job is one p4d searched).
  std::map<std::tuple<const Topology*, int, int>, NodeOrder> cache;
  auto order_of = [&](int n, int c) -> const NodeOrder& {
    const auto key =
        std::make_tuple(nodes[static_cast<std::size_t>(n)].topology, counts[static_cast<std::size_t>(n)], c);
    auto it = cache.find(key);
    if (it == cache.end()) {
      it = cache.emplace(key, order_node(*std::get<0>(key), std::get<1>(key), c, crosses)).first;
    }
    return it->second;
  };

  for (int c = 0; c < nchannels; ++c) {
    RingChannel ring;
    ring.channel = c;
    for (int n = 0; n < nnodes; ++n) {
      const NodeOrder& o = order_of(n, c);
      for (int l : o.local)
        ring.ranks.push_back(first_rank[static_cast<std::size_t>(n)] + l);
      ring.nic.push_back(o.nic);
    }
    std::string via;
    if (crosses) {
      std::vector<int> used = ring.nic;
      std::sort(used.begin(), used.end());
      used.erase(std::unique(used.begin(), used.end()), used.end());
      via = used.size() == 1 && used.front() >= 0 ? fmt::format("  (nodes left and entered via NIC{})", used.front())
                                                  : "";
    }
    plan.lines.push_back(fmt::format("Channel {:02d} : {}{}", c, fmt::join(ring.ranks, " "), via));
    plan.rings.push_back(std::move(ring));
  }

  for (int c = 0; c < nchannels; ++c) {
    TreeChannel tree;
    tree.channel = c;
    tree.tree = c % 2;
    tree.parent.assign(static_cast<std::size_t>(plan.nranks), -1);
    tree.children.assign(static_cast<std::size_t>(plan.nranks), {});
    const auto node_parent = binary_tree_parents(nnodes, tree.tree);
    std::vector<int> head(static_cast<std::size_t>(nnodes));
    for (int n = 0; n < nnodes; ++n) {
      const NodeOrder& o = order_of(n, c);
      const int base = first_rank[static_cast<std::size_t>(n)];
      head[static_cast<std::size_t>(n)] = base + o.local.front();
      for (std::size_t i = 1; i < o.local.size(); ++i) {
        const int r = base + o.local[i];
        const int up = base + o.local[i - 1];
        tree.parent[static_cast<std::size_t>(r)] = up;
        tree.children[static_cast<std::size_t>(up)].push_back(r);
      }
    }
    std::vector<std::string> edges;
    for (int n = 0; n < nnodes; ++n) {
      const int up = node_parent[static_cast<std::size_t>(n)];
      const int r = head[static_cast<std::size_t>(n)];
      if (up < 0) {
        tree.root = r;
        continue;
      }
      tree.parent[static_cast<std::size_t>(r)] = head[static_cast<std::size_t>(up)];
      tree.children[static_cast<std::size_t>(head[static_cast<std::size_t>(up)])].push_back(r);
      edges.push_back(fmt::format("{}->{}", up, n));
    }
    plan.lines.push_back(fmt::format("Tree {:02d} : tree {} rooted at rank {}; nodes {}{}", c, tree.tree, tree.root,
                                     edges.empty() ? "(one node)" : fmt::format("{}", fmt::join(edges, " ")),
                                     plan.nranks > nnodes ? "; within a node a chain in ring order" : ""));
    plan.trees.push_back(std::move(tree));
  }
  for (const auto& line : plan.lines)
    RM_INFO(graph, "{}", line);
  return plan;
}

}  // namespace ringmaster::topo

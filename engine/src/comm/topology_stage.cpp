// The TOPOLOGY stage: which hosts the ranks are on, the node's hardware
// when asked for, and the order of each channel's ring.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "base/log.h"
#include "base/params.h"
#include "bootstrap/views.h"
#include "comm/communicator_impl.h"
#include "ringmaster/tools/topology.h"
#include "ringmaster/tools/topology_search.h"

namespace ringmaster {

// TOPOLOGY: which hosts the ranks are on, the node's hardware when a
// topology file is given (NCCL_TOPO_FILE) or a dump is asked for
// (NCCL_TOPO_DUMP_FILE, written by rank 0), and the channel rings.
void Communicator::Impl::describe_topology(bool same_topology) {
  bootstrap->run_stage(Stage::topology, [&] {
    const int hosts = bootstrap->host_count();
    std::string detail =
        fmt::format("{} rank{} on {} host{}", nranks, nranks == 1 ? "" : "s", hosts, hosts == 1 ? "" : "s");
    const auto file = param_env(Param::TopoFile);
    // NCCL's name first; RINGMASTER_TOPO_DUMP_FILE is the earlier spelling.
    const char* dump_variable = param_env(Param::TopoDumpFile) ? "NCCL_TOPO_DUMP_FILE" : "RINGMASTER_TOPO_DUMP_FILE";
    std::optional<std::string> dump = param_env(Param::TopoDumpFile);
    if (!dump) {
      if (const char* old = std::getenv("RINGMASTER_TOPO_DUMP_FILE"); old != nullptr && *old != '\0') dump = old;
    }
    if (file || (dump && rank == 0)) {
      std::optional<topo::Topology> t;
      try {
        t = file ? topo::Topology::load_file(*file, topo::LoadOptions{"/sys"}) : topo::Topology::discover();
      } catch (const Error& e) {
        auto f = bootstrap->failure(Stage::topology, e.status().message());
        f.category = e.category();
        f.hint =
            "NCCL_TOPO_FILE must name an NCCL topology XML or hwloc XML file readable on every rank; "
            "`ringmaster-cli topo show --file FILE` shows what is wrong with it.";
        throw StageError(f);
      }
      detail += "; " + t->summary();
      RM_INFO(graph, "Topology {}", t->summary());
      if (file && same_topology) detail += "; " + order_rings(*t);
      if (dump && rank == 0) {
        std::FILE* out = std::fopen(dump->c_str(), "w");
        const std::string xml = t->to_nccl_xml();
        const bool written = out && std::fwrite(xml.data(), 1, xml.size(), out) == xml.size();
        if (out) std::fclose(out);
        if (!written) {
          throw Error(ErrorCategory::config,
                      fmt::format("{}={}: cannot write: {}", dump_variable, *dump, std::strerror(errno)));
        }
        detail += "; written to " + *dump;
      }
    }
    for (const auto& c : channels) {
      const auto& order = ring_orders[static_cast<std::size_t>(c->index)].rank_at;
      RM_INFO(graph, "Channel {:02d} : {}", c->index, fmt::join(order, " "));
    }
    return detail;
  });
}

namespace {

// A NIC's network device ("rdmap79s0"), or the NIC's own name when the
// file lists none.
std::string device_of_nic(const topo::Topology& t, int nic) {
  const auto nics = t.nics();
  if (nic < 0 || nic >= static_cast<int>(nics.size())) return {};
  const auto& node = t.node(nics[static_cast<std::size_t>(nic)]);
  for (int child : node.children) {
    if (t.node(child).kind == topo::NodeKind::net) return t.node(child).name;
  }
  return node.name;
}

}  // namespace

// What devices() needs of the search, in O(ranks + channels x nodes):
// each rank's node and GPU, each channel's NIC on each node, and the NICs'
// network devices.
Communicator::Impl::SearchedPlacement Communicator::Impl::placement_of(const topo::ChannelPlan& plan,
                                                                       const topo::Topology& t,
                                                                       const std::vector<int>& rank_of_index) const {
  SearchedPlacement out;
  out.node_of.assign(static_cast<std::size_t>(nranks), -1);
  out.gpu_of.assign(static_cast<std::size_t>(nranks), -1);
  const bool gpus = !t.gpus().empty();
  for (int index = 0; index < nranks; ++index) {
    const auto rank = static_cast<std::size_t>(rank_of_index[static_cast<std::size_t>(index)]);
    out.node_of[rank] = plan.node_of[static_cast<std::size_t>(index)];
    if (gpus) out.gpu_of[rank] = plan.local_of[static_cast<std::size_t>(index)];
  }
  for (const auto& ring : plan.rings)
    out.nic.push_back(ring.nic);
  for (std::size_t nic = 0; nic < t.nics().size(); ++nic)
    out.nic_device.push_back(device_of_nic(t, static_cast<int>(nic)));
  return out;
}

// Every host is taken to be the node `t` describes (every rank read the
// same NCCL_TOPO_FILE), running its ranks as GPUs 0, 1, ... in rank order
// (as LOCAL_RANK numbers them). The search's rings leave and enter each
// node through one NIC, by the GPUs nearest it; channels take the NICs in
// turn. A node with more ranks than GPUs keeps rank order.
std::string Communicator::Impl::order_rings(const topo::Topology& t) {
  std::vector<int> rank_of_index;  // the search numbers ranks node by node
  std::vector<topo::NodeRanks> nodes;
  for (int host = 0; host < bootstrap->host_count(); ++host) {
    int here = 0;
    for (int r = 0; r < nranks; ++r) {
      if (bootstrap->host_of(r) != host) continue;
      rank_of_index.push_back(r);
      ++here;
    }
    nodes.push_back({&t, here});
  }
  topo::ChannelPlan plan;
  try {
    plan = topo::search_channels(nodes, static_cast<int>(channels.size()));
  } catch (const Error& e) {
    RM_INFO(graph, "rings follow rank order: {}", e.status().message());
    return "rings and trees in rank order (" + e.status().message() + ")";
  }
  for (std::size_t c = 0; c < channels.size(); ++c) {
    std::vector<int> order;
    for (int index : plan.rings[c].ranks)
      order.push_back(rank_of_index[static_cast<std::size_t>(index)]);
    ring_orders[c] = algo::RingOrder::of(std::move(order));
  }
  searched = placement_of(plan, t, rank_of_index);
  // The trees chain each node's ranks as the search's first tree does:
  // from the GPU nearest the NIC, in its ring's order.
  tree_chain_key.assign(static_cast<std::size_t>(nranks), 0);
  if (!plan.trees.empty()) {
    const auto& parent = plan.trees.front().parent;
    for (int index = 0; index < nranks; ++index) {
      int depth = 0;
      for (int at = index; parent[static_cast<std::size_t>(at)] >= 0 &&
                           plan.node_of[static_cast<std::size_t>(parent[static_cast<std::size_t>(at)])] ==
                               plan.node_of[static_cast<std::size_t>(index)];
           at = parent[static_cast<std::size_t>(at)])
        ++depth;
      tree_chain_key[static_cast<std::size_t>(rank_of_index[static_cast<std::size_t>(index)])] = depth;
    }
  }
  for (const auto& line : plan.lines)
    RM_INFO(graph, "search: {}", line);
  return "rings and trees from the topology search";
}

}  // namespace ringmaster

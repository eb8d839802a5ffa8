// add_nvml_to_topology (tools/gpus.h): NVML's GPUs and NVLinks placed in a
// topology discovered through hwloc, by PCI bus id.
#include <fmt/format.h>

#include <cstdio>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "ringmaster/tools/gpus.h"

namespace ringmaster {
namespace {

// "00000000:18:00.0" (NVML) and "0000:18:00.0" (hwloc) alike: domain, bus,
// device, function.
using BusId = std::tuple<unsigned, unsigned, unsigned, unsigned>;

std::optional<BusId> parse_bus_id(const std::string& text) {
  unsigned domain = 0, bus = 0, device = 0, function = 0;
  char tail = 0;
  if (std::sscanf(text.c_str(), "%x:%x:%x.%x%c", &domain, &bus, &device, &function, &tail) != 4) return std::nullopt;
  return BusId{domain, bus, device, function};
}

}  // namespace

std::vector<std::string> add_nvml_to_topology(topo::Topology& topology, const GpuInventory& inventory) {
  std::vector<std::string> unplaced;
  if (!inventory.loaded) return unplaced;
  std::map<BusId, int> by_bus;
  for (std::size_t i = 0; i < topology.nodes().size(); ++i) {
    const auto& n = topology.nodes()[i];
    if (const std::string* b = n.attribute("busid")) {
      if (const auto id = parse_bus_id(*b)) by_bus.emplace(*id, static_cast<int>(i));
    }
  }
  // Each GPU NVML lists, at its node.
  std::map<BusId, int> gpu_node;
  for (const auto& gpu : inventory.gpus) {
    const auto id = parse_bus_id(gpu.bus_id);
    const auto found = id ? by_bus.find(*id) : by_bus.end();
    if (found == by_bus.end()) {
      unplaced.push_back(fmt::format("GPU {} ({}, {}) is not in the PCI tree", gpu.index, gpu.name, gpu.bus_id));
      continue;
    }
    auto& node = topology.node(found->second);
    node.kind = topo::NodeKind::gpu;
    node.set_attribute("model", gpu.name);
    node.set_attribute("uuid", gpu.uuid);
    node.set_attribute("sm", std::to_string(gpu.compute_major * 10 + gpu.compute_minor));
    gpu_node.emplace(*id, found->second);
  }
  // Active NVLinks, bonded per far end: to another GPU once per pair (both
  // GPUs list the same links), to an NVSwitch (a node made for its bus id
  // when the tree does not have it) per GPU.
  // NVML says which of a GPU's links are up now: what the tree had for it
  // (hwloc's NVLinkBandwidth matrix, made when it was written) goes.
  for (const auto& gpu : inventory.gpus) {
    const auto id = parse_bus_id(gpu.bus_id);
    if (id && gpu_node.count(*id) && !gpu.nvlinks.empty())
      topology.drop_links(gpu_node.at(*id), topo::LinkType::nvlink);
  }
  std::map<std::pair<int, int>, int> bonded;
  std::map<BusId, int> switches;
  const auto machines = topology.of_kind(topo::NodeKind::machine);
  const int machine = machines.empty() ? -1 : machines.front();
  for (const auto& gpu : inventory.gpus) {
    const auto id = parse_bus_id(gpu.bus_id);
    if (!id || gpu_node.count(*id) == 0) continue;
    const int from = gpu_node.at(*id);
    for (const auto& link : gpu.nvlinks) {
      if (!link.active) continue;
      const auto remote = parse_bus_id(link.remote_bus_id);
      if (!remote) continue;
      int to = -1;
      if (const auto other = gpu_node.find(*remote); other != gpu_node.end()) {
        to = other->second;
        if (to < from) continue;  // counted from the other end
      } else if (const auto known = switches.find(*remote); known != switches.end()) {
        to = known->second;
      } else if (const auto pci = by_bus.find(*remote); pci != by_bus.end()) {
        // An NVSwitch's PCI function (class 0680) the tree did not know as one.
        to = pci->second;
        topology.node(to).kind = topo::NodeKind::nvswitch;
        topology.node(to).name = "NVSwitch " + link.remote_bus_id;
        switches.emplace(*remote, to);
      } else {
        to = topology.add_node(topo::NodeKind::nvswitch, machine, "NVSwitch " + link.remote_bus_id);
        topology.node(to).implicit = true;
        topology.node(to).set_attribute("busid", link.remote_bus_id);
        switches.emplace(*remote, to);
      }
      ++bonded[{from, to}];
    }
  }
  for (const auto& [ends, count] : bonded) {
    const std::string* sm = topology.node(ends.first).attribute("sm");
    const double per_link = topo::nvlink_bandwidth(sm ? std::stoi(*sm) : 0);
    topology.add_link(ends.first, ends.second, topo::LinkType::nvlink, count * per_link, count);
  }
  topology.finish();
  return unplaced;
}

}  // namespace ringmaster

// Instance profiles and the predicted nccl-tests table (tools/simulate.h).
#include "ringmaster/tools/simulate.h"

#include <algorithm>
#include <cmath>
#include <string>

#include <fmt/format.h>

#include "ringmaster/status.h"

namespace ringmaster::tune {
namespace {

// docs/tuner.md, "Instance profiles", gives the page each line comes from.
constexpr InstanceProfile kProfiles[] = {
    {"p4d.24xlarge", "A100 SXM4 40GB", 0x20b0, 80, 8, 300, 0, 4, 100, "p4d-24xl-topo.xml", false, kEfaShare,
     kEfaV1HopScale},
    {"p4de.24xlarge", "A100 SXM4 80GB", 0x20b2, 80, 8, 300, 0, 4, 100, "p4d-24xl-topo.xml", false, kEfaShareP5,
     kEfaV1HopScale},
    {"p5.48xlarge", "H100 SXM 80GB", 0x2330, 90, 8, 450, 0, 32, 100, "p5.48xl-topo.xml", true, kEfaShareP5},
    {"p5e.48xlarge", "H200 141GB", 0x2335, 90, 8, 450, 0, 32, 100, "p5.48xl-topo.xml", true, kEfaShareP5},
    {"p5en.48xlarge", "H200 141GB", 0x2335, 90, 8, 450, 0, 16, 200, "", true, kEfaShareP5},
    {"p6-b200.48xlarge", "B200 180GB", 0x2901, 100, 8, 900, 0, 8, 400, "", true, kEfaShareP5},
    {"g5.48xlarge", "A10G 24GB", 0x2237, 86, 8, 0, 31.5, 1, 100, "g5.48xl-topo.xml"},
    {"g6e.48xlarge", "L40S 48GB", 0x26b9, 89, 8, 0, 31.5, 4, 100, ""},
};

}  // namespace

std::span<const InstanceProfile> instance_profiles() {
  return kProfiles;
}

const InstanceProfile& instance_profile(std::string_view name) {
  for (const auto& p : kProfiles) {
    if (p.name == name) return p;
  }
  // The family alone ("p5", "p6-b200"): its first profile.
  for (const auto& p : kProfiles) {
    const auto dot = p.name.find('.');
    if (p.name.substr(0, dot) == name) return p;
  }
  std::string known;
  for (const auto& p : kProfiles)
    known += (known.empty() ? "" : ", ") + std::string(p.name);
  throw Error(ErrorCategory::config, fmt::format("instance type {}: no profile; known: {}", name, known));
}

Collective simulated_collective(std::string_view name) {
  std::string_view bare = name;
  if (bare.size() > 5 && bare.ends_with("_perf")) bare.remove_suffix(5);
  for (const auto c : {Collective::all_reduce, Collective::all_gather, Collective::reduce_scatter,
                       Collective::broadcast, Collective::reduce}) {
    if (bare == name_of(c)) return c;
  }
  throw Error(ErrorCategory::config,
              fmt::format("collective {}: expected all_reduce, all_gather, reduce_scatter, broadcast or reduce", name));
}

Shape instance_shape(const InstanceProfile& p, int nodes, int ranks_per_node, int max_channels) {
  if (nodes < 1) throw Error(ErrorCategory::config, fmt::format("{} nodes: expected at least 1", nodes));
  if (max_channels <= 0) max_channels = std::max(16, p.nics);
  Shape s = gpu_cluster(p.gpus, nodes, ranks_per_node, max_channels);
  const bool nvlink = p.nvlink_gbs > 0;
  const double line = (nvlink ? p.nvlink_gbs : p.pci_gbs) * kNvlinkShare;
  set_gpu_link(s.intra, nvlink);
  // NVLink: a channel moves an eighth of what a GPU's links carry, eight
  // fill them; PCIe: two channels fill the GPU's slot.
  s.intra.bandwidth_gbs = line / (nvlink ? 8 : 2);
  s.intra.max_bandwidth_gbs = line;
  s.inter.transport = "efa";
  for (int i = 0; i < 3; ++i)
    s.inter.hop_latency_us[i] = kEfaHopUs[i] * p.efa_hop_scale;
  s.inter.bandwidth_gbs = p.nic_gbits / 8 * p.efa_share;
  s.inter.max_bandwidth_gbs = s.inter.bandwidth_gbs * p.nics;
  s.inter.ll128 = nvlink;
  if (p.switch_reduces) s.switch_algbw_gbs = p.nvlink_gbs * kSwitchShare;
  s.source = fmt::format("profile of {} x {}: {} x {}, {} {:.0f} GB/s a GPU{}, {} x {:.0f} Gbit/s EFA", nodes, p.name,
                         p.gpus, p.gpu, nvlink ? "NVLink" : "PCIe", nvlink ? p.nvlink_gbs : p.pci_gbs,
                         p.switch_reduces ? " (NVLink SHARP)" : "", p.nics, p.nic_gbits);
  return s;
}

std::vector<SimulatedRow> simulate(const Tuner& tuner, Collective c, DataType type, std::size_t min_bytes,
                                   std::size_t max_bytes, double step_factor) {
  if (min_bytes == 0 || max_bytes < min_bytes) {
    throw Error(ErrorCategory::config,
                fmt::format("sizes {} to {}: expected 0 < --minbytes <= --maxbytes", min_bytes, max_bytes));
  }
  if (!(step_factor > 1)) throw Error(ErrorCategory::config, "--stepfactor must be above 1");
  const int n = tuner.shape().nranks;
  const std::size_t es = size_of(type);
  const bool blocks = c == Collective::all_gather || c == Collective::reduce_scatter;
  std::vector<SimulatedRow> rows;
  for (std::size_t bytes = min_bytes; bytes <= max_bytes;) {
    SimulatedRow row;
    row.count = bytes / es / (blocks ? static_cast<std::size_t>(n) : 1);
    row.bytes = row.count * es * (blocks ? static_cast<std::size_t>(n) : 1);
    if (row.count > 0) {
      const Decision d = tuner.decide(c, row.bytes);
      row.pick = d.pick();
      row.time_us = row.pick.predicted_us;
      row.algbw_gbs = static_cast<double>(row.bytes) / (row.time_us * 1e3);
      row.busbw_gbs = row.algbw_gbs * bus_factor(c, n);
      rows.push_back(row);
    }
    const auto next = static_cast<std::size_t>(std::ceil(static_cast<double>(bytes) * step_factor));
    bytes = next > bytes ? next : bytes + 1;
  }
  return rows;
}

}  // namespace ringmaster::tune

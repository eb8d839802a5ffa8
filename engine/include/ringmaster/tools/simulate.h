// The simulator: what nccl-tests would print for a declared cluster,
// from the tuner's model, with profiles of the AWS GPU instances that say
// what their topology files leave out (NVLink bandwidth, EFA count and
// speed). docs/tuner.md compares its tables with published runs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ringmaster/tools/tuner.h"
#include "ringmaster/types.h"

namespace ringmaster::tune {

// The share of a line nccl-tests reaches on these instances, and what one
// step across EFA costs, as fitted to published runs (docs/tuner.md says
// which runs fit them and which check them).
inline constexpr double kNvlinkShare = 0.77;  // 230.8 of 300 GB/s: all_reduce busbw on one p4d
// EFA's share depends on the stack: NCCL 2.9.9 on p4d in 2022 reached
// 31.8 of 50 GB/s on three nodes; the p5 table of 2 to 32 nodes from 1 to
// 8 GiB comes closest, every row within 0.82-1.22, at 0.75.
inline constexpr double kEfaShare = 0.636;
inline constexpr double kEfaShareP5 = 0.75;
inline constexpr double kEfaHopUs[3] = {27.0, 46.0, 76.0};  // LL, LL128, Simple
// First-generation EFA (p4d, p4de) takes longer a step: 182 us for 8 B on
// two p4d against 69 on two p5 with a recent stack.
inline constexpr double kEfaV1HopScale = 3.1;
// A node's all_reduce through NVLink SHARP, as algbw over one GPU's
// NVLink line: 275 of 450 GB/s on eight H100 (NVIDIA/nccl-tests#212).
inline constexpr double kSwitchShare = 0.611;

// One instance type as its maker declares it (docs/tuner.md gives the
// source of every figure).
struct InstanceProfile {
  std::string_view name;         // "p5.48xlarge"
  std::string_view gpu;          // "H100 SXM 80GB"
  std::uint32_t gpu_device = 0;  // its PCI device id (NVIDIA's), as a topology file names it
  int sm = 0;                    // its compute capability (90 for 9.0), as NCCL's files name it
  int gpus = 8;                  // a node's GPUs
  double nvlink_gbs = 0;         // NVLink per GPU, one direction, GB/s (0: none)
  double pci_gbs = 0;            // GPU to GPU over PCIe without NVLink, one direction, GB/s
  int nics = 1;                  // EFA interfaces
  double nic_gbits = 100;        // each, Gbit/s
  std::string_view topology;     // its NCCL topology file in resources/topologies ("" none)
  bool switch_reduces = false;   // NVLink SHARP: its NVSwitch adds (H100 and later)
  double efa_share = kEfaShare;  // of each interface's line, as fitted to its family's runs
  double efa_hop_scale = 1;      // an EFA step's cost over kEfaHopUs (first generation: kEfaV1HopScale)
};

// Every profile, in the order `simulate --list` prints them.
std::span<const InstanceProfile> instance_profiles();
// By name ("p5.48xlarge"; the family alone, "p5", picks its largest
// size); throws Error(config) listing the known names.
const InstanceProfile& instance_profile(std::string_view name);

// The collective a simulation runs, by its name or nccl-tests' binary name
// ("all_reduce", "all_reduce_perf"); throws Error(config) naming the five
// the tuner models (all_reduce, all_gather, reduce_scatter, broadcast,
// reduce).
Collective simulated_collective(std::string_view name);

// `nodes` identical instances, `ranks_per_node` ranks each (-1: one per
// GPU), at most `max_channels` channels (0: 16, or one per NIC beyond).
Shape instance_shape(const InstanceProfile& p, int nodes, int ranks_per_node = -1, int max_channels = 0);

// One line of the predicted nccl-tests table.
struct SimulatedRow {
  std::size_t bytes = 0;  // nccl-tests' size: the larger buffer's bytes
  std::size_t count = 0;  // elements (per rank for all_gather and reduce_scatter)
  double time_us = 0;
  double algbw_gbs = 0;
  double busbw_gbs = 0;
  Candidate pick;  // what the tuner chose
};

// The sweep from min_bytes to max_bytes, multiplying by step_factor, sizes
// rounded down to whole elements as nccl-tests does.
std::vector<SimulatedRow> simulate(const Tuner& tuner, Collective c, DataType type, std::size_t min_bytes,
                                   std::size_t max_bytes, double step_factor);

}  // namespace ringmaster::tune

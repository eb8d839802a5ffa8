// The GPUs of this node as NVIDIA's management library (NVML) reports
// them: what a cluster engineer checks first on a GPU node (driver and
// CUDA versions, ECC, NVLink, the PCIe link's generation and width against
// the slot's maximum, persistence, MIG).
//
// NVML is opened at run time (dlopen of libnvidia-ml.so.1, as the driver
// installs it): nothing links against it, and a node without a driver
// reads `loaded == false` with the reason.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "ringmaster/tools/topology.h"

namespace ringmaster {

struct NvLinkInfo {
  int link = 0;
  bool active = false;
  std::string remote_bus_id;  // the PCI bus id at the other end (a GPU or an NVSwitch)
};

struct GpuInfo {
  int index = 0;
  std::string name;    // "NVIDIA H200"
  std::string uuid;    // "GPU-6d1c..."
  std::string bus_id;  // "00000000:18:00.0"
  int compute_major = 0, compute_minor = 0;
  unsigned long long memory_total = 0, memory_used = 0;  // bytes
  // Each field is empty where NVML says the GPU does not support it.
  std::optional<bool> ecc_enabled, ecc_pending;
  std::optional<unsigned long long> ecc_corrected, ecc_uncorrected;  // volatile: since the driver loaded
  std::optional<int> pcie_gen, pcie_gen_max, pcie_width, pcie_width_max;
  std::optional<bool> persistence;
  std::optional<bool> mig_enabled;
  std::vector<NvLinkInfo> nvlinks;  // the links NVML knows, active or not

  // "x8 of x16", "gen 3 of 5": the PCIe link runs below what the GPU and
  // slot support, a common bring-up fault (a riser, a BIOS setting).
  std::vector<std::string> pcie_degraded() const;
};

struct GpuInventory {
  bool loaded = false;          // NVML opened and initialised
  std::string why;              // when not: what failed
  std::string library;          // the file opened
  std::string driver_version;   // "580.159.03"
  int cuda_driver_version = 0;  // 13000 for 13.0
  std::string nvml_version;
  std::vector<GpuInfo> gpus;
  // This build's CUDA: compiled in, usable here (a driver and a device),
  // and why not (gpu::availability()).
  bool cuda_built = false, cuda_usable = false;
  std::string cuda_why;
  // Errors that left a field unread, per GPU ("gpu 0: nvmlDeviceGetUUID: ...").
  std::vector<std::string> warnings;
};

// Reads NVML; `library` overrides the file opened (tests open one that is
// not there). Never throws: failures are in `why` and `warnings`.
GpuInventory read_gpu_inventory(const std::string& library = "libnvidia-ml.so.1");

// Places what NVML knows in a topology discovered through hwloc, matching
// GPUs by PCI bus id: each becomes a GPU node (attributes model, uuid, sm)
// and its active NVLinks links, bonded per far end, to the GPU there or to
// an NVSwitch node made for that bus id (hwloc does not list NVSwitches as
// such). Returns the GPUs it could not place, one line each.
std::vector<std::string> add_nvml_to_topology(topo::Topology& topology, const GpuInventory& inventory);

// As JSON (an object: loaded, why, driver_version, cuda_driver_version,
// gpus: [{index, name, uuid, bus_id, ..., nvlinks: [...]}]).
std::string to_json(const GpuInventory& inventory);
// A table for people: one line per GPU, then its degraded links.
std::string to_text(const GpuInventory& inventory);

}  // namespace ringmaster

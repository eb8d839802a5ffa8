// PCI identities: what a class/vendor pair is, and how fast its link is.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "ringmaster/tools/topology.h"

namespace ringmaster::topo {

inline constexpr std::uint32_t kVendorNvidia = 0x10de;
inline constexpr std::uint32_t kVendorAmazon = 0x1d0f;  // EFA and ENA adapters

// "0x030200", "0302", "030200" -> number; 0 when empty or not hex.
inline std::uint32_t parse_hex(const std::string* text) {
  if (!text || text->empty()) return 0;
  return static_cast<std::uint32_t>(std::strtoul(text->c_str(), nullptr, 16));
}

// What a PCI function is, from its 24-bit class code (base, sub, prog-if)
// and vendor. NCCL writes class as 0xBBSSPP.
inline NodeKind kind_of_pci(std::uint32_t class_code, std::uint32_t vendor) {
  const std::uint32_t base_sub = class_code >> 8;
  if (base_sub == 0x0604) return NodeKind::pci_switch;
  if ((base_sub == 0x0300 || base_sub == 0x0302) && vendor == kVendorNvidia) return NodeKind::gpu;
  if ((base_sub >> 8) == 0x02 || base_sub == 0x0c06) return NodeKind::nic;  // network, InfiniBand
  if (base_sub == 0x0680 && vendor == kVendorNvidia) return NodeKind::nvswitch;
  return NodeKind::pci_device;
}

// NVIDIA's data-centre GPUs by PCI device id: what people call them, and
// how many NVLinks the board gives each into its NVSwitches (SXM boards:
// p4d/p4de and DGX A100 NV12, p5/p5e and HGX H100/H200 NV18); 0 where the
// board has no NVSwitch (PCIe cards, DGX-1's cube mesh).
struct GpuModel {
  std::uint32_t device;
  const char* name;
  int board_nvlinks;
};
inline const GpuModel* gpu_model_of(std::uint32_t device) {
  static constexpr GpuModel kModels[] = {
      {0x1db1, "V100 SXM2 16GB", 0},
      {0x1db4, "V100 PCIe 16GB", 0},
      {0x1db5, "V100 SXM2 32GB", 0},
      {0x1db6, "V100 PCIe 32GB", 0},
      {0x1db8, "V100 SXM3 32GB", 6},
      {0x1eb8, "T4", 0},
      {0x20b0, "A100 SXM4 40GB", 12},
      {0x20b2, "A100 SXM4 80GB", 12},
      {0x20b5, "A100 PCIe 80GB", 0},
      {0x20f1, "A100 PCIe 40GB", 0},
      {0x20b7, "A30", 0},
      {0x2235, "A40", 0},
      {0x2236, "A10", 0},
      {0x2237, "A10G", 0},
      {0x2330, "H100 SXM5 80GB", 18},
      {0x2331, "H100 PCIe 80GB", 0},
      {0x2321, "H100 NVL", 0},
      {0x2335, "H200 SXM 141GB", 18},
      {0x2342, "GH200", 0},
      {0x26b5, "L40", 0},
      {0x26b9, "L40S", 0},
      {0x27b8, "L4", 0},
      {0x2901, "B200", 18},
      {0x2941, "GB200", 18},
  };
  for (const auto& m : kModels) {
    if (m.device == device) return &m;
  }
  return nullptr;
}

// GB/s of the PCIe link above a node: NCCL's link_speed x link_width, or
// the bandwidth hwloc measured (link_bw), 0 when neither is known.
inline double pci_link_bandwidth(const Node& n) {
  const std::string* speed = n.attribute("link_speed");
  const std::string* width = n.attribute("link_width");
  if (speed && width) return pci_bandwidth(*speed, std::atoi(width->c_str()));
  if (const std::string* bw = n.attribute("link_bw")) return std::strtod(bw->c_str(), nullptr);
  return 0;
}

}  // namespace ringmaster::topo

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

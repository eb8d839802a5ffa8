// The NVML inventory (gpu/nvml.cpp): on a node without a driver it names
// what is missing; against a stand-in NVML library it reads every field,
// leaves unsupported ones empty and flags a PCIe link trained below its
// maximum. tests/device/check.sh reads the real library on a GPU machine.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <iterator>

#include <nlohmann/json.hpp>

#include "ringmaster/tools/gpus.h"

namespace ringmaster {
namespace {

TEST(GpuInventory, NamesTheMissingLibrary) {
  const auto inv = read_gpu_inventory("/nonexistent/libnvidia-ml.so.1");
  EXPECT_FALSE(inv.loaded);
  EXPECT_NE(inv.why.find("NVML not found: /nonexistent/libnvidia-ml.so.1"), std::string::npos) << inv.why;
  EXPECT_TRUE(inv.gpus.empty());
  EXPECT_NE(to_text(inv).find("No GPU inventory"), std::string::npos);
  EXPECT_FALSE(nlohmann::json::parse(to_json(inv))["loaded"].get<bool>());
}

TEST(GpuInventory, ALibraryThatIsNotNvmlIsRefused) {
  const auto inv = read_gpu_inventory("libm.so.6");
  EXPECT_FALSE(inv.loaded);
  EXPECT_NE(inv.why.find("lacks nvmlInit_v2"), std::string::npos) << inv.why;
}

TEST(GpuInventory, ReadsEveryFieldAndFlagsANarrowPcieLink) {
  const auto inv = read_gpu_inventory(RINGMASTER_NVML_DOUBLE);
  ASSERT_TRUE(inv.loaded) << inv.why;
  EXPECT_EQ(inv.driver_version, "580.1.2");
  EXPECT_EQ(inv.cuda_driver_version, 13000);
  ASSERT_EQ(inv.gpus.size(), 2u);
  const auto& healthy = inv.gpus[0];
  EXPECT_EQ(healthy.name, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(healthy.uuid, "GPU-aaaa");
  EXPECT_EQ(healthy.bus_id, "00000000:18:00.0");
  EXPECT_EQ(healthy.compute_major, 9);
  EXPECT_EQ(healthy.memory_total, 85520809984ULL);
  EXPECT_EQ(healthy.ecc_enabled, true);
  EXPECT_EQ(healthy.pcie_width, 16);
  EXPECT_TRUE(healthy.pcie_degraded().empty());
  EXPECT_FALSE(healthy.mig_enabled.has_value()) << "not supported must read as unknown, not off";
  ASSERT_EQ(healthy.nvlinks.size(), 4u);
  EXPECT_TRUE(healthy.nvlinks[0].active);
  EXPECT_EQ(healthy.nvlinks[1].remote_bus_id, "00000000:C2:00.0");
  EXPECT_FALSE(healthy.nvlinks[2].active);

  const auto& narrow = inv.gpus[1];
  EXPECT_EQ(narrow.ecc_enabled, false);
  EXPECT_EQ(narrow.ecc_pending, true);
  EXPECT_EQ(narrow.ecc_uncorrected, 3u);
  ASSERT_EQ(narrow.pcie_degraded().size(), 1u);
  EXPECT_EQ(narrow.pcie_degraded()[0], "PCIe width x8 of x16");
  EXPECT_TRUE(inv.warnings.empty()) << inv.warnings.front();

  const std::string text = to_text(inv);
  EXPECT_NE(text.find("NVLink 2/4 active"), std::string::npos) << text;
  EXPECT_NE(text.find("note: PCIe width x8 of x16"), std::string::npos) << text;
  const auto json = nlohmann::json::parse(to_json(inv));
  EXPECT_EQ(json["gpus"][1]["pcie_degraded"][0], "PCIe width x8 of x16");
  EXPECT_TRUE(json["gpus"][0]["mig_enabled"].is_null());
}

// NVML's GPUs and NVLinks placed in a real machine's hwloc tree (a DGX-2:
// 16 V100s and 12 NVSwitches as PCI functions, each GPU with one NVLink to
// six switches in hwloc's NVLinkBandwidth matrix), by bus id. NVML's links
// of a GPU replace what the file said of it.
TEST(GpuTopology, NvmlLinksJoinTheHwlocTree) {
  std::ifstream in(std::string(RINGMASTER_TOPOLOGY_DIR) + "/hwloc-nvidiaDGX2.xml");
  const std::string xml((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto topology = topo::Topology::from_hwloc_xml(xml, "hwloc-nvidiaDGX2.xml");
  const auto links_of = [&](topo::LinkType type) {
    return std::count_if(topology.links().begin(), topology.links().end(),
                         [&](const topo::Link& l) { return l.type == type; });
  };
  EXPECT_EQ(links_of(topo::LinkType::nvlink), 16 * 6) << "hwloc's NVLinkBandwidth matrix";

  GpuInventory inventory;
  inventory.loaded = true;
  auto gpu = [](int index, const char* bus) {
    GpuInfo g;
    g.index = index;
    g.name = "Tesla V100-SXM3-32GB";
    g.uuid = "GPU-" + std::to_string(index);
    g.bus_id = bus;
    g.compute_major = 7;
    g.compute_minor = 0;
    return g;
  };
  // Two GPUs bonded by two links, each also on two NVSwitches (one link
  // down), and a GPU this tree does not have.
  auto a = gpu(0, "00000000:34:00.0");
  auto b = gpu(1, "00000000:36:00.0");
  a.nvlinks = {{0, true, "00000000:36:00.0"},
               {1, true, "00000000:36:00.0"},
               {2, true, "00000000:61:00.0"},
               {3, false, "00000000:62:00.0"}};
  b.nvlinks = {{0, true, "00000000:34:00.0"}, {1, true, "00000000:34:00.0"}, {2, true, "00000000:61:00.0"}};
  inventory.gpus = {a, b, gpu(2, "00000000:F0:00.0")};

  const auto unplaced = add_nvml_to_topology(topology, inventory);
  ASSERT_EQ(unplaced.size(), 1u);
  EXPECT_NE(unplaced[0].find("GPU 2 (Tesla V100-SXM3-32GB, 00000000:F0:00.0) is not in the PCI tree"),
            std::string::npos)
      << unplaced[0];

  auto node_at = [&](const std::string& bus) {
    for (std::size_t i = 0; i < topology.nodes().size(); ++i) {
      const std::string* b = topology.nodes()[i].attribute("busid");
      if (b != nullptr && *b == bus) return static_cast<int>(i);
    }
    return -1;
  };
  const int ga = node_at("0000:34:00.0"), gb = node_at("0000:36:00.0"), sw = node_at("0000:61:00.0");
  ASSERT_GE(ga, 0);
  ASSERT_GE(gb, 0);
  ASSERT_GE(sw, 0);
  EXPECT_EQ(topology.node(ga).kind, topo::NodeKind::gpu);
  EXPECT_EQ(*topology.node(ga).attribute("uuid"), "GPU-0");
  EXPECT_EQ(*topology.node(ga).attribute("sm"), "70");
  EXPECT_EQ(topology.node(sw).kind, topo::NodeKind::nvswitch);
  const int down = node_at("0000:62:00.0");  // the switch of the link that is down
  EXPECT_TRUE(std::none_of(topology.links().begin(), topology.links().end(), [&](const topo::Link& l) {
    return l.type == topo::LinkType::nvlink && ((l.a == down && l.b == ga) || (l.a == ga && l.b == down));
  }));
  // GPU to GPU once (both list the pair), two links bonded; each GPU to
  // the switch once: NVML's three in place of the file's twelve for them.
  EXPECT_EQ(links_of(topo::LinkType::nvlink), 16 * 6 - 2 * 6 + 3);
  for (const auto& l : topology.links()) {
    if (l.type != topo::LinkType::nvlink || (l.a != ga && l.b != ga && l.a != gb && l.b != gb)) continue;
    const bool pair = (l.a == ga && l.b == gb) || (l.a == gb && l.b == ga);
    EXPECT_EQ(l.count, pair ? 2 : 1);
    EXPECT_DOUBLE_EQ(l.bandwidth, l.count * topo::nvlink_bandwidth(70));
  }
  EXPECT_EQ(topology.path(ga, gb).cls, topo::PathClass::nvlink);
  EXPECT_EQ(topology.path(ga, gb).nvlinks, 2);

  // Nothing from an inventory NVML did not fill.
  auto untouched = topo::Topology::from_hwloc_xml(xml, "hwloc-nvidiaDGX2.xml");
  EXPECT_TRUE(add_nvml_to_topology(untouched, GpuInventory{}).empty());
  EXPECT_TRUE(untouched.same_graph(topo::Topology::from_hwloc_xml(xml, "hwloc-nvidiaDGX2.xml")));
}

}  // namespace
}  // namespace ringmaster

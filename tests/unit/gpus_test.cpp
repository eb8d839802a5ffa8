// The NVML inventory (gpu/nvml.cpp): on a node without a driver it names
// what is missing; against a stand-in NVML library it reads every field,
// leaves unsupported ones empty and flags a PCIe link trained below its
// maximum. tests/device/check.sh reads the real library on a GPU machine.
#include <gtest/gtest.h>

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

}  // namespace
}  // namespace ringmaster

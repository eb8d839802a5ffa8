// Every node file of tests/data/node-files loads, and reads as the file
// itself says: its GPUs, NICs, NVSwitches, NVLinks and the classes of the
// paths between them. The counts come from the files (tests/data/
// node-files/README.md says where each is from).
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>

#include "ringmaster/tools/topology.h"

namespace ringmaster::topo {
namespace {

const std::string kDir = std::string(RINGMASTER_TEST_DATA_DIR) + "/node-files/";

Topology load(const std::string& name, bool board_nvlinks = false) {
  LoadOptions options;
  options.add_board_nvlinks = board_nvlinks;
  return Topology::load_file(kDir + name, options);
}

std::string between(const Topology& t, int a, int b) {
  return t.path(a, b).label();
}

// Every GPU pair's class, counted: {"NV6": 120}.
std::map<std::string, int> gpu_pairs(const Topology& t) {
  std::map<std::string, int> out;
  const auto g = t.gpus();
  for (std::size_t i = 0; i < g.size(); ++i) {
    for (std::size_t j = i + 1; j < g.size(); ++j)
      ++out[between(t, g[i], g[j])];
  }
  return out;
}

// The NUMA node a device's package says it is on ("" when none).
std::string numa_of(const Topology& t, int device) {
  const int package = t.package_of(device);
  if (package < 0) return "";
  const std::string* id = t.node(package).attribute("numaid");
  return id ? *id : "";
}

struct Counts {
  const char* file;
  std::size_t gpus, nics, nvswitches, warnings;
};

TEST(NodeFiles, EveryFileLoadsWithTheCountsItDeclares) {
  // GPUs: PCI functions of class 0x0300/0x0302 by NVIDIA (hwloc) or <gpu>
  // elements (NCCL); NICs: class 0x02xx or 0x0c06 functions, <nic>
  // elements; NVSwitches: class 0x0680 by NVIDIA or hwloc's subtype.
  const Counts files[] = {
      {"aws-p4d-24xl-topo.xml", 8, 4, 0, 1},  // the warning: A100 SXM4 without NVLink
      {"aws-p4de-24xl-topo.xml", 8, 4, 0, 1},
      {"aws-g5.48xl-topo.xml", 0, 0, 0, 0},  // bus ids alone: classes come from sysfs
      {"aws-p5.48xl-topo.xml", 8, 32, 0, 0},
      {"hwloc-96em64t-4n4d3ca2co-pci.xml", 0, 8, 0, 0},
      {"hwloc-nvidiaDGX2.xml", 16, 0, 12, 0},
      {"hwloc-power8gpudistances.xml", 4, 0, 0, 0},
      {"hwloc-16intel64-manyVFs.xml", 0, 18, 0, 0},
      {"hwloc-192em64t-24n8c2t.xml", 0, 7, 0, 0},
      {"hwloc-24em64t-2n6c2t-pci.xml", 3, 3, 0, 0},
      {"hwloc-28intel64-2p2g7c-CoDgroups.v1.xml", 0, 2, 0, 0},
      {"hwloc-32em64t-2n8c2t-pci-wholeio.xml", 3, 3, 0, 0},
      {"hwloc-64intel64-3g2n+2n-irregulargroups+pci.xml", 2, 2, 0, 0},
      {"hwloc-64intel64-fakeKNL-SNC4-hybrid.xml", 0, 0, 0, 0},
      {"nccl-gb10-dgx-spark.xml", 1, 2, 0, 0},
  };
  for (const auto& f : files) {
    SCOPED_TRACE(f.file);
    const Topology t = load(f.file);
    EXPECT_EQ(t.gpus().size(), f.gpus);
    EXPECT_EQ(t.nics().size(), f.nics);
    EXPECT_EQ(t.of_kind(NodeKind::nvswitch).size(), f.nvswitches);
    EXPECT_EQ(t.warnings().size(), f.warnings) << (t.warnings().empty() ? "" : t.warnings().front());
    // No package or NUMA node is shown as -1.
    for (int p : t.of_kind(NodeKind::package))
      EXPECT_EQ(t.node(p).name.find("-1"), std::string::npos) << t.node(p).name;
    for (const char* unknown_shown_as_a_number : {"Package -1", "numaid -1", "NUMA -1"})
      EXPECT_EQ(t.render_tree().find(unknown_shown_as_a_number), std::string::npos) << t.render_tree();
  }
}

// DGX-2 (hwloc, NVML backend): each V100 has one NVLink to each of its
// baseboard's six NVSwitches (25,000 MB/s each in NVLinkBandwidth), and the
// two baseboards are one fabric: NV6 between every two of the 16 GPUs. One
// of the 12 switches has an unreadable PCI identity (class 0) and is still
// an NVSwitch by hwloc's subtype.
TEST(NodeFiles, Dgx2HasSixNvlinksBetweenEveryTwoGpus) {
  const Topology t = load("hwloc-nvidiaDGX2.xml");
  EXPECT_EQ(gpu_pairs(t), (std::map<std::string, int>{{"NV6", 120}}));
  int links = 0;
  for (const auto& l : t.links())
    links += l.type == LinkType::nvlink ? l.count : 0;
  EXPECT_EQ(links, 16 * 6);
  for (int g : t.gpus())
    EXPECT_EQ(t.gpu_model(g), "V100 SXM3 32GB");
}

// POWER8 with NVLink pairs: GPUs 0-1 and 2-3 joined by two links each, a
// pair per socket.
TEST(NodeFiles, Power8GpusArePairedByNvlink) {
  const Topology t = load("hwloc-power8gpudistances.xml");
  const auto g = t.gpus();
  ASSERT_EQ(g.size(), 4u);
  EXPECT_EQ(between(t, g[0], g[1]), "NV2");
  EXPECT_EQ(between(t, g[2], g[3]), "NV2");
  EXPECT_EQ(between(t, g[0], g[2]), "SYS");
}

// 96 cores, 16 packages in 4 NUMA groups; the PCI trees hang off the
// groups. Each NIC pair is on its group's NUMA node, and NICs of two
// groups are SYS apart (hwloc bitmaps with empty words: "0x00000001,,0x0").
TEST(NodeFiles, NicsKeepTheirNumaNodeOnA96CoreMachine) {
  const Topology t = load("hwloc-96em64t-4n4d3ca2co-pci.xml");
  const auto n = t.nics();
  ASSERT_EQ(n.size(), 8u);
  EXPECT_EQ(t.of_kind(NodeKind::package).size(), 4u);
  EXPECT_EQ(t.of_kind(NodeKind::core).size(), 96u);
  for (std::size_t i = 0; i < n.size(); ++i)
    EXPECT_EQ(numa_of(t, n[i]), std::to_string(i / 2)) << t.node(n[i]).name;
  EXPECT_EQ(between(t, n[0], n[1]), "PIX");
  EXPECT_EQ(between(t, n[0], n[2]), "SYS");
}

// Written by a process allowed 16 of its 64 cores: the file still
// describes all of them.
TEST(NodeFiles, TheWholeMachineNotOnlyWhatItsWriterWasAllowed) {
  const Topology t = load("hwloc-64intel64-3g2n+2n-irregulargroups+pci.xml");
  EXPECT_EQ(t.of_kind(NodeKind::core).size(), 64u);
  EXPECT_EQ(t.of_kind(NodeKind::package).size(), 8u);
}

// AWS's p4d and p4de files declare no NVLink between A100 SXM4 GPUs that
// the instance joins by NVSwitch: a warning says so, and when asked the
// board's NV12 is added (and not exported: the file stays as it was).
TEST(NodeFiles, P4dWithoutNvlinkIsWarnedAndCompletedWhenAsked) {
  for (const char* file : {"aws-p4d-24xl-topo.xml", "aws-p4de-24xl-topo.xml"}) {
    SCOPED_TRACE(file);
    const Topology as_declared = load(file);
    ASSERT_EQ(as_declared.warnings().size(), 1u);
    EXPECT_NE(as_declared.warnings()[0].find("no NVLink declared"), std::string::npos);
    EXPECT_NE(as_declared.warnings()[0].find("NV12"), std::string::npos);
    EXPECT_EQ(gpu_pairs(as_declared).count("NV12"), 0u);
    const auto g = as_declared.gpus();
    const auto n = as_declared.nics();
    // Two GPUs and one NIC behind each PCIe switch (the file's own header).
    EXPECT_EQ(between(as_declared, g[0], n[0]), "PIX");
    EXPECT_EQ(between(as_declared, g[1], n[0]), "PIX");
    const Topology completed = load(file, true);
    EXPECT_EQ(gpu_pairs(completed), (std::map<std::string, int>{{"NV12", 28}}));
    EXPECT_EQ(completed.to_nccl_xml(), as_declared.to_nccl_xml());
  }
  EXPECT_EQ(load("aws-p4de-24xl-topo.xml").gpu_model(load("aws-p4de-24xl-topo.xml").gpus()[0]), "A100 SXM4 80GB");
}

// A Grace Blackwell dump: <c2c> inside <gpu> (NCCL 2.22 and later) is the
// GPU's chip-to-chip link to its CPU, read and written back; no numaid on
// the <cpu> is an unknown NUMA node, not -1.
TEST(NodeFiles, GraceBlackwellC2cIsReadAndWrittenBack) {
  const Topology t = load("nccl-gb10-dgx-spark.xml");
  ASSERT_EQ(t.gpus().size(), 1u);
  const int gpu = t.gpus()[0];
  const Link* c2c = nullptr;
  for (const auto& l : t.links()) {
    if (l.type == LinkType::c2c) c2c = &l;
  }
  ASSERT_NE(c2c, nullptr);
  EXPECT_EQ(c2c->a, gpu);
  EXPECT_EQ(t.node(c2c->b).kind, NodeKind::package);
  EXPECT_EQ(c2c->count, 8);
  EXPECT_DOUBLE_EQ(c2c->bandwidth, 43125.0 * 8 / 1000);
  EXPECT_NE(t.to_nccl_xml().find("<c2c bw=\"43125\" count=\"8\"/>"), std::string::npos) << t.to_nccl_xml();
  // Export and load again: the same graph.
  EXPECT_TRUE(Topology::from_nccl_xml(t.to_nccl_xml(), "again.xml").same_graph(t));
}

// An NCCL file with what a newer NCCL (or another tool) writes: unknown
// elements at every level and unknown attributes load, each named once in
// a warning with its line and how often, and export writes them back.
TEST(NodeFiles, UnknownElementsAndAttributesAreKeptAndNamed) {
  const std::string text = R"(<system version="1" future="yes">
  <cpu numaid="-1" arch="x86_64">
    <pci busid="0000:01:00.0" class="0x030200" vendor="0x10de" device="0x2335" wattage="700">
      <gpu dev="0" sm="90" rank="0" gdr="1">
        <nvlink target="ffffffff" count="18" tclass="0x068000"/>
        <telemetry temp="40"/>
      </gpu>
    </pci>
    <pci busid="0000:02:00.0" class="0x030200" vendor="0x10de" device="0x2335" wattage="700">
      <gpu dev="1" sm="90" rank="1" gdr="1">
        <nvlink target="ffffffff" count="18" tclass="0x068000"/>
        <telemetry temp="41"/>
      </gpu>
    </pci>
    <memory size="2TB"/>
  </cpu>
  <fabric id="1"/>
</system>
)";
  const Topology t = Topology::from_nccl_xml(text, "h200.xml");
  const auto g = t.gpus();
  ASSERT_EQ(g.size(), 2u);
  EXPECT_EQ(between(t, g[0], g[1]), "NV18");
  EXPECT_EQ(t.gpu_model(g[0]), "H200 SXM 141GB");
  EXPECT_NE(t.render_tree().find("GPU0 H200 SXM 141GB sm_90"), std::string::npos) << t.render_tree();
  EXPECT_EQ(t.node(t.package_of(g[0])).name, "Package ?");
  EXPECT_NE(t.render_tree().find("Package ? (NUMA node unknown"), std::string::npos) << t.render_tree();
  std::string all;
  for (const auto& w : t.warnings())
    all += w + "\n";
  EXPECT_EQ(t.warnings().size(), 5u) << all;
  EXPECT_NE(all.find("h200.xml:6: element <telemetry> inside <gpu> not known to this reader (2 times)"),
            std::string::npos)
      << all;
  EXPECT_NE(all.find("h200.xml:15: element <memory> inside <cpu>"), std::string::npos) << all;
  EXPECT_NE(all.find("h200.xml:17: element <fabric> inside <system>"), std::string::npos) << all;
  EXPECT_NE(all.find("attribute wattage=\"...\" of <pci> not known to this reader (2 times)"), std::string::npos)
      << all;
  EXPECT_NE(all.find("attribute future=\"...\" of <system>"), std::string::npos) << all;
  const std::string back = t.to_nccl_xml();
  for (const char* kept :
       {"<telemetry temp=\"40\"/>", "<memory size=\"2TB\"/>", "<fabric id=\"1\"/>", "wattage=\"700\""})
    EXPECT_NE(back.find(kept), std::string::npos) << kept << "\n" << back;
}

}  // namespace
}  // namespace ringmaster::topo

// Topology: the real files in resources/topologies read as a person reading
// them would, NCCL XML round trips, this machine's discovery, bad input,
// and the channel search over 16 p4d nodes.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>

#include "ringmaster/status.h"
#include "ringmaster/tools/topology.h"
#include "ringmaster/tools/topology_search.h"

namespace ringmaster::topo {
namespace {

const std::string kDir = RINGMASTER_TOPOLOGY_DIR;
const std::string kP4d = kDir + "/p4d-24xl-topo.xml";
const std::string kG5 = kDir + "/g5.48xl-topo.xml";
const std::string kHwloc = kDir + "/hwloc-24em64t-2n6c2t-pci.xml";
const std::string kG5Sysfs = std::string(RINGMASTER_TEST_DATA_DIR) + "/sysfs-g5.48xlarge";

std::string write_temp(const std::string& name, const std::string& text) {
  const std::string path = ::testing::TempDir() + name;
  std::ofstream(path) << text;
  return path;
}

std::string label(const Topology& t, int a, int b) {
  return t.path(a, b).label();
}

int gpu(const Topology& t, int i) {
  return t.gpus().at(static_cast<std::size_t>(i));
}
int nic(const Topology& t, int i) {
  return t.nics().at(static_cast<std::size_t>(i));
}

// The message of the Error that `f` throws; fails the test when none.
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    EXPECT_EQ(e.category(), ErrorCategory::config);
    return e.what();
  }
  ADD_FAILURE() << "no error";
  return {};
}

TEST(Topology, P4dHasEightGpusAndFourEfaNicsUnderFourSwitches) {
  const auto t = Topology::load_file(kP4d);
  EXPECT_EQ(t.origin(), Origin::declared);
  ASSERT_EQ(t.gpus().size(), 8u);
  ASSERT_EQ(t.nics().size(), 4u);
  EXPECT_EQ(t.of_kind(NodeKind::package).size(), 2u);
  EXPECT_EQ(t.of_kind(NodeKind::pci_switch).size(), 4u);
  for (int n : t.nics())
    EXPECT_EQ(*t.node(n).attribute("vendor"), "0x1d0f");  // EFA
  for (const auto& n : t.nodes())
    EXPECT_EQ(n.origin, Origin::declared) << n.name;
  // Same switch: GPU0-GPU1 and GPU0-NIC0.
  EXPECT_EQ(label(t, gpu(t, 0), gpu(t, 1)), "PIX");
  EXPECT_EQ(label(t, gpu(t, 0), nic(t, 0)), "PIX");
  EXPECT_EQ(label(t, nic(t, 0), gpu(t, 1)), "PIX");
  // Across switches on one socket: through the CPU's root complex.
  EXPECT_EQ(label(t, gpu(t, 0), gpu(t, 2)), "PHB");
  EXPECT_EQ(label(t, gpu(t, 0), nic(t, 1)), "PHB");
  // Across sockets.
  EXPECT_EQ(label(t, gpu(t, 0), gpu(t, 4)), "SYS");
  EXPECT_EQ(label(t, gpu(t, 7), nic(t, 0)), "SYS");
  EXPECT_EQ(label(t, gpu(t, 3), gpu(t, 3)), "X");
  // Gen3 x16 is 15.75 GB/s a direction; the socket link is narrower.
  EXPECT_NEAR(t.path(gpu(t, 0), gpu(t, 1)).bandwidth, 15.75, 0.01);
  EXPECT_EQ(t.path(gpu(t, 0), gpu(t, 1)).hops, 2);
  EXPECT_LT(t.path(gpu(t, 0), gpu(t, 4)).bandwidth, 15.75);
  EXPECT_GT(t.path(gpu(t, 0), gpu(t, 4)).bandwidth, 0);
}

TEST(Topology, P4dViewsSayDeclared) {
  const auto t = Topology::load_file(kP4d);
  const std::string tree = t.render_tree();
  EXPECT_NE(tree.find("declared by " + kP4d), std::string::npos) << tree;
  std::istringstream lines(tree.substr(tree.find("Machine")));
  for (std::string line; std::getline(lines, line);) {
    if (!line.empty()) {
      EXPECT_NE(line.find("[declared]"), std::string::npos) << line;
    }
  }
  const std::string matrix = t.render_matrix();
  EXPECT_EQ(matrix.rfind("Topology declared by", 0), 0u) << matrix;
  EXPECT_NE(matrix.find("GPU0    X       PIX     PHB     PHB     SYS"), std::string::npos) << matrix;
  EXPECT_NE(matrix.find("0-23,48-71"), std::string::npos) << matrix;
  EXPECT_NE(matrix.find("PIX  = "), std::string::npos) << matrix;
  const auto json = nlohmann::json::parse(t.to_json());
  EXPECT_EQ(json["origin"], "declared");
  EXPECT_EQ(json["nodes"].size(), t.nodes().size());
  EXPECT_EQ(json["matrix"]["devices"].size(), 12u);
  EXPECT_EQ(json["matrix"]["paths"][0][1]["class"], "PIX");
}

TEST(Topology, G5ListsBusIdsThatSysfsResolvesToGpusAndNic) {
  // The file gives bus ids only: nine devices, four on socket 0, five on 1.
  const auto bare = Topology::load_file(kG5);
  EXPECT_TRUE(bare.gpus().empty());
  const auto unknown = bare.of_kind(NodeKind::pci_device);
  ASSERT_EQ(unknown.size(), 9u);
  const auto packages = bare.of_kind(NodeKind::package);
  ASSERT_EQ(packages.size(), 2u);
  int on_first = 0;
  for (int d : unknown)
    on_first += bare.package_of(d) == packages[0];
  EXPECT_EQ(on_first, 4);
  EXPECT_NE(bare.summary().find("9 PCI devices of unknown class"), std::string::npos) << bare.summary();

  // On the instance, sysfs names them: eight A10G GPUs and the NIC.
  const auto t = Topology::load_file(kG5, LoadOptions{kG5Sysfs});
  ASSERT_EQ(t.gpus().size(), 8u);
  ASSERT_EQ(t.nics().size(), 1u);
  EXPECT_EQ(*t.node(gpu(t, 0)).attribute("device"), "0x2237");
  EXPECT_EQ(*t.node(t.nics()[0]).attribute("busid"), "0000:00:15.0");
  EXPECT_EQ(label(t, gpu(t, 0), gpu(t, 1)), "PHB");  // both on socket 0's root complex
  EXPECT_EQ(label(t, gpu(t, 0), nic(t, 0)), "SYS");
  EXPECT_EQ(label(t, gpu(t, 4), nic(t, 0)), "PHB");
}

TEST(Topology, HwlocFileHasItsPackagesCoresAndDevices) {
  const auto t = Topology::load_file(kHwloc);
  EXPECT_EQ(t.origin(), Origin::declared);
  EXPECT_EQ(t.of_kind(NodeKind::package).size(), 2u);
  EXPECT_EQ(t.of_kind(NodeKind::numa).size(), 2u);
  const auto cores = t.of_kind(NodeKind::core);
  ASSERT_EQ(cores.size(), 12u);  // 2 packages x 6 cores x 2 threads
  int pus = 0;
  for (int c : cores)
    pus += std::stoi(*t.node(c).attribute("pus"));
  EXPECT_EQ(pus, 24);
  EXPECT_EQ(*t.node(0).attribute("hostname"), "mirage004");
  ASSERT_EQ(t.gpus().size(), 3u);  // three 10de:06d2 (Tesla M2070)
  for (int g : t.gpus())
    EXPECT_EQ(*t.node(g).attribute("device"), "0x06d2");
  std::set<std::string> nets;
  for (int n : t.of_kind(NodeKind::net))
    nets.insert(t.node(n).name);
  EXPECT_EQ(nets, (std::set<std::string>{"eth0", "eth1", "eth2", "ib0", "mlx4_0"}));
  // GPU0 sits on socket 0, GPU1 and GPU2 on socket 1 under separate bridges.
  EXPECT_EQ(label(t, gpu(t, 1), gpu(t, 2)), "PHB");
  EXPECT_EQ(label(t, gpu(t, 0), gpu(t, 1)), "SYS");
  EXPECT_EQ(label(t, nic(t, 0), nic(t, 1)), "PIX");  // two ports of one adapter
  EXPECT_EQ(t.path(nic(t, 0), nic(t, 1)).hops, 2);
}

TEST(Topology, NcclRoundTripIsExact) {
  for (const auto& file : {kP4d, kG5}) {
    const auto first = Topology::load_file(file);
    const std::string xml = first.to_nccl_xml();
    const auto second = Topology::from_nccl_xml(xml, "exported");
    EXPECT_TRUE(first.same_graph(second)) << file << "\n" << xml;
    EXPECT_EQ(second.to_nccl_xml(), xml);
  }
}

// NCCL's own elements beyond PCI: <gpu> with NVLinks to an NVSwitch and to
// a peer, <nic> with <net> devices.
const char* kNvlinkXml = R"(<system version="1">
  <cpu numaid="0" affinity="0000ffff" arch="x86_64" vendor="AuthenticAMD" familyid="23" modelid="49">
    <pci busid="0000:01:00.0" class="0x060400" link_speed="16 GT/s" link_width="16">
      <pci busid="0000:02:00.0" class="0x030200" vendor="0x10de" device="0x20b0" link_speed="16 GT/s" link_width="16">
        <gpu dev="0" sm="80" rank="0" gdr="1">
          <nvlink target="0000:c0:00.0" count="12" tclass="0x068000"/>
        </gpu>
      </pci>
      <pci busid="0000:03:00.0" class="0x030200" vendor="0x10de" device="0x20b0" link_speed="16 GT/s" link_width="16">
        <gpu dev="1" sm="80" rank="1" gdr="1">
          <nvlink target="0000:c0:00.0" count="12" tclass="0x068000"/>
          <nvlink target="0000:04:00.0" count="2" tclass="0x030200"/>
        </gpu>
      </pci>
      <pci busid="0000:04:00.0" class="0x030200" vendor="0x10de" device="0x20b0" link_speed="16 GT/s" link_width="16">
        <gpu dev="2" sm="80" rank="2" gdr="1"/>
      </pci>
      <pci busid="0000:05:00.0" class="0x020700" vendor="0x15b3" device="0x101b" link_speed="16 GT/s" link_width="16">
        <nic>
          <net name="mlx5_0" dev="0" speed="200000" port="1" guid="0x1" maxconn="131072" gdr="1"/>
        </nic>
      </pci>
    </pci>
  </cpu>
</system>
)";

TEST(Topology, NvlinksAndNetDevicesRoundTrip) {
  const auto t = Topology::from_nccl_xml(kNvlinkXml, "nvlink.xml");
  ASSERT_EQ(t.gpus().size(), 3u);
  ASSERT_EQ(t.nics().size(), 1u);
  EXPECT_EQ(t.of_kind(NodeKind::nvswitch).size(), 1u);
  EXPECT_EQ(label(t, gpu(t, 0), gpu(t, 1)), "NV12");  // through the NVSwitch
  EXPECT_EQ(label(t, gpu(t, 1), gpu(t, 2)), "NV2");   // direct
  EXPECT_EQ(label(t, gpu(t, 0), gpu(t, 2)), "PIX");
  EXPECT_NEAR(t.path(gpu(t, 1), gpu(t, 2)).bandwidth, 40.0, 0.01);
  EXPECT_EQ(label(t, gpu(t, 0), nic(t, 0)), "PIX");
  const auto nets = t.of_kind(NodeKind::net);
  ASSERT_EQ(nets.size(), 1u);
  EXPECT_EQ(t.node(nets[0]).name, "mlx5_0");
  EXPECT_NE(t.render_matrix().find("NIC0: mlx5_0"), std::string::npos);

  const std::string xml = t.to_nccl_xml();
  const auto back = Topology::from_nccl_xml(xml, "exported");
  EXPECT_TRUE(t.same_graph(back)) << xml;
  EXPECT_EQ(back.to_nccl_xml(), xml);
}

TEST(Topology, DiscoveryOfThisMachineFindsItsNic) {
  const auto t = Topology::discover();
  EXPECT_EQ(t.origin(), Origin::discovered);
  EXPECT_GE(t.of_kind(NodeKind::package).size(), 1u);
  EXPECT_GE(t.of_kind(NodeKind::core).size(), 1u);
  ASSERT_FALSE(t.nics().empty()) << t.render_tree();
  // Every NIC's network device is one the kernel lists.
  int listed = 0;
  for (int n : t.of_kind(NodeKind::net))
    listed += std::ifstream("/sys/class/net/" + t.node(n).name + "/ifindex") ? 1 : 0;
  EXPECT_GE(listed, 1) << t.render_tree();
  const std::string tree = t.render_tree();
  EXPECT_NE(tree.find("[discovered]"), std::string::npos);
  EXPECT_EQ(tree.find("[declared]"), std::string::npos);
  // The discovered graph exports to NCCL XML that reads back (declared).
  const auto back = Topology::from_nccl_xml(t.to_nccl_xml(), "exported");
  EXPECT_EQ(back.nics().size(), t.nics().size());
  EXPECT_EQ(back.of_kind(NodeKind::net).size(), t.of_kind(NodeKind::net).size());
  EXPECT_EQ(back.origin(), Origin::declared);
}

TEST(Topology, LstopoXmlOfThisMachineLoads) {
  const std::string path = ::testing::TempDir() + "lstopo.xml";
  const std::string command = "lstopo-no-graphics --of xml --force " + path + " 2>/dev/null";
  if (std::system(command.c_str()) != 0) GTEST_SKIP() << "lstopo-no-graphics (Debian package hwloc) not installed";
  const auto file = Topology::load_file(path);
  const auto live = Topology::discover();
  EXPECT_EQ(file.origin(), Origin::declared);
  EXPECT_EQ(file.nics().size(), live.nics().size());
  EXPECT_EQ(file.of_kind(NodeKind::core).size(), live.of_kind(NodeKind::core).size());
  EXPECT_EQ(file.of_kind(NodeKind::package).size(), live.of_kind(NodeKind::package).size());
}

TEST(Topology, BadInputNamesTheFileAndLine) {
  const std::string missing = ::testing::TempDir() + "no-such-topology.xml";
  EXPECT_NE(error_of([&] { Topology::load_file(missing); }).find(missing + ": cannot open"), std::string::npos);

  const std::string empty = write_temp("empty.xml", "  \n");
  EXPECT_NE(error_of([&] { Topology::load_file(empty); }).find(empty + ": empty file"), std::string::npos);

  const std::string broken =
      write_temp("broken.xml", "<system version=\"1\">\n  <cpu numaid=\"0\">\n  </pci>\n</system>\n");
  const std::string m1 = error_of([&] { Topology::load_file(broken); });
  EXPECT_NE(m1.find(broken + ":3: malformed XML"), std::string::npos) << m1;

  const std::string unknown = write_temp(
      "unknown.xml",
      "<system version=\"1\">\n  <cpu numaid=\"0\">\n    <gpux busid=\"0000:01:00.0\"/>\n  </cpu>\n</system>\n");
  // An element NCCL does not write is kept, written back on export and
  // named in a warning: never a refusal of the whole file.
  const Topology with_unknown = Topology::load_file(unknown);
  ASSERT_EQ(with_unknown.warnings().size(), 1u);
  EXPECT_NE(with_unknown.warnings()[0].find(unknown + ":3: element <gpux> inside <cpu> not known"), std::string::npos)
      << with_unknown.warnings()[0];
  EXPECT_NE(with_unknown.to_nccl_xml().find("<gpux busid=\"0000:01:00.0\"/>"), std::string::npos)
      << with_unknown.to_nccl_xml();

  const std::string no_busid = write_temp(
      "nobus.xml", "<system version=\"1\">\n<cpu numaid=\"0\">\n<pci class=\"0x030200\"/>\n</cpu>\n</system>\n");
  EXPECT_NE(error_of([&] { Topology::load_file(no_busid); }).find(no_busid + ":3: <pci> without a busid"),
            std::string::npos);

  const std::string bad_target = write_temp(
      "target.xml",
      "<system version=\"1\"><cpu numaid=\"0\">\n<pci busid=\"0000:01:00.0\" class=\"0x030200\" vendor=\"0x10de\">\n"
      "<gpu dev=\"0\"><nvlink target=\"0000:09:00.0\" count=\"2\" tclass=\"0x030200\"/></gpu></pci></cpu></system>\n");
  EXPECT_NE(error_of([&] { Topology::load_file(bad_target); }).find("target 0000:09:00.0 is not a PCI device"),
            std::string::npos);

  const std::string other_root = write_temp("root.xml", "<?xml version=\"1.0\"?>\n<machine/>\n");
  EXPECT_NE(error_of([&] { Topology::load_file(other_root); }).find(other_root + ":2: root element <machine>"),
            std::string::npos);

  std::ifstream in(kHwloc);
  std::string hwloc((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  hwloc.replace(hwloc.find("<topology version=\"2.0\">"), 24, "<topology version=\"3.0\">");
  const std::string future = write_temp("future-hwloc.xml", hwloc);
  const std::string m3 = error_of([&] { Topology::load_file(future); });
  EXPECT_NE(m3.find(future + ":3: hwloc XML version 3.0"), std::string::npos) << m3;

  const std::string garbage_hwloc =
      write_temp("garbage-hwloc.xml", "<topology version=\"2.0\">\n  <object type=\"Spaceship\"/>\n</topology>\n");
  EXPECT_NE(error_of([&] { Topology::load_file(garbage_hwloc); }).find(garbage_hwloc + ": hwloc could not read"),
            std::string::npos);
}

// Hostile files found in review: 10k nested <pci> elements crashed the
// reader (recursion), 200k sibling NICs took over 120 s, and nothing
// bounded the size or refused a device file. Each is refused now, by name.
TEST(Topology, HostileFilesAreRefusedBeforeTheReaders) {
  auto error_of = [](auto&& load) {
    try {
      load();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("(loaded)");
  };
  std::string deep = "<system version=\"1\"><cpu numaid=\"0\">";
  for (int i = 0; i < 10'000; ++i)
    deep += "<pci busid=\"0000:00:00.0\">";
  for (int i = 0; i < 10'000; ++i)
    deep += "</pci>";
  deep += "</cpu></system>";
  EXPECT_NE(
      error_of([&] { Topology::from_nccl_xml(deep, "deep.xml"); }).find("deep.xml:1: elements nested deeper than 64"),
      std::string::npos);
  std::string wide = "<system version=\"1\"><cpu numaid=\"0\"><pci busid=\"0000:00:00.0\">";
  for (int i = 0; i < 200'000; ++i)
    wide += "<nic><net name=\"eth\" dev=\"0\"/></nic>";
  wide += "</pci></cpu></system>";
  const auto started = std::chrono::steady_clock::now();
  EXPECT_NE(error_of([&] { Topology::from_nccl_xml(wide, "wide.xml"); }).find("more than 100000 elements"),
            std::string::npos);
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(10));
  const std::string huge(17u << 20, ' ');
  EXPECT_NE(error_of([&] { Topology::from_nccl_xml(huge, "huge.xml"); }).find("at most 16 MiB"), std::string::npos);
  EXPECT_NE(error_of([&] { Topology::load_file("/dev/zero"); }).find("not a regular file"), std::string::npos);
  EXPECT_NE(error_of([&] { Topology::from_hwloc_xml(deep, "deep-hwloc.xml"); }).find("nested deeper"),
            std::string::npos);
}

// Three hwloc XML files that fuzz_topology_xml derived from a real
// machine's file, each one edit away from it. The first two stopped the
// process inside hwloc 2.9 (a NULL complete_cpuset, an assertion on an
// empty bitmap word); the third gave the reader an enum value out of its
// range. Each is now refused with the line and attribute, or read whole.
TEST(Topology, HwlocXmlThatBrokeHwlocIsRefusedOrRead) {
  std::ifstream in(kHwloc);
  const std::string real((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto edited = [&](const std::string& from, const std::string& to) {
    std::string text = real;
    const auto at = text.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    return at == std::string::npos ? text : text.replace(at, from.size(), to);
  };
  auto error_of = [](const std::string& text) {
    try {
      Topology::from_hwloc_xml(text, "edited.xml");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("(loaded)");
  };
  EXPECT_NE(error_of(edited("complete_cpuset=\"0x00001001\"", "complete_cpuste=\"0x00001001\""))
                .find("has cpuset but not complete_cpuset"),
            std::string::npos);
  EXPECT_NE(error_of(edited("cpuset=\"0x00555555\"", "cpuset=\"0x00555555,\"")).find("cpuset is not an hwloc bitmap"),
            std::string::npos);
  EXPECT_EQ(error_of(edited("bridge_type=\"1-1\"", "bridge_type=\"2-1\"")), "(loaded)");
  // A NUMA node or PU without os_index made hwloc allocate a 512 MiB bitmap
  // for bit 2^32 - 1 (535 MB resident for a 3 KiB file); refused by line.
  const std::string no_index =
      error_of(edited("<object type=\"NUMANode\" os_index=\"0\"", "<object type=\"NUMANode\""));
  EXPECT_NE(no_index.find("edited.xml:"), std::string::npos) << no_index;
  EXPECT_NE(no_index.find("<object type=\"NUMANode\"> needs an os_index below 1048576 (has none)"), std::string::npos)
      << no_index;
  EXPECT_NE(error_of(edited("<object type=\"PU\" os_index=\"3\"", "<object type=\"PU\" os_index=\"4294967295\""))
                .find("needs an os_index below 1048576 (has \"4294967295\")"),
            std::string::npos);
  // A distance matrix's nbobjs is what hwloc allocates by: "20000" asked
  // for 3.2 GB (20000^2 values) before reading the two values written.
  const std::string matrix = error_of(edited("nbobjs=\"2\"", "nbobjs=\"20000\""));
  EXPECT_NE(matrix.find("edited.xml:212: <distances2> nbobjs=\"20000\" is not a matrix this file holds"),
            std::string::npos)
      << matrix;
  EXPECT_NE(error_of(edited("nbobjs=\"2\"", "nbobjs=\"-1\"")).find("nbobjs=\"-1\""), std::string::npos);
  EXPECT_EQ(error_of(real), "(loaded)");
  // A <cpukind>'s cpuset goes through the same bitmap parser as objects'.
  std::ifstream dgx_in(kDir + "/hwloc-nvidiaDGX2.xml");
  std::string dgx((std::istreambuf_iterator<char>(dgx_in)), std::istreambuf_iterator<char>());
  const std::string kind = "<cpukind cpuset=\"0x03000003\">";
  ASSERT_NE(dgx.find(kind), std::string::npos);
  EXPECT_EQ(error_of(dgx), "(loaded)");
  dgx.replace(dgx.find(kind), kind.size(), "<cpukind cpuset=\"0x03000003,\">");
  EXPECT_NE(error_of(dgx).find(":483: <cpukind> cpuset is not an hwloc bitmap"), std::string::npos) << error_of(dgx);
}

TEST(ChannelSearch, BinaryTreesAreTreesAndComplementary) {
  for (int n = 1; n <= 40; ++n) {
    std::vector<std::vector<int>> children[2];
    for (int tree = 0; tree < 2; ++tree) {
      const auto parent = binary_tree_parents(n, tree);
      children[tree].assign(static_cast<std::size_t>(n), {});
      int roots = 0;
      for (int r = 0; r < n; ++r) {
        if (parent[r] < 0) {
          ++roots;
          continue;
        }
        children[tree][parent[r]].push_back(r);
        int hops = 0;  // every rank reaches the root
        for (int at = r; parent[at] >= 0 && hops <= n; at = parent[at])
          ++hops;
        EXPECT_LE(hops, n) << "cycle at n=" << n;
      }
      EXPECT_EQ(roots, 1) << "n=" << n;
      for (int r = 0; r < n; ++r)
        EXPECT_LE(children[tree][r].size(), 2u) << "n=" << n << " r=" << r;
    }
    if (n % 2 == 0) {
      for (int r = 0; r < n; ++r) {
        EXPECT_FALSE(!children[0][r].empty() && !children[1][r].empty())
            << "n=" << n << " rank " << r << " is inner in both trees";
      }
    }
  }
}

TEST(ChannelSearch, SixteenP4dNodesKeepRingsOnLocalNics) {
  const auto p4d = Topology::load_file(kP4d);
  std::vector<NodeRanks> nodes(16, NodeRanks{&p4d, -1});
  const int channels = 8;
  const auto plan = search_channels(nodes, channels);
  ASSERT_EQ(plan.nranks, 128);
  ASSERT_EQ(plan.rings.size(), static_cast<std::size_t>(channels));
  std::set<int> nics_used;
  for (const auto& ring : plan.rings) {
    ASSERT_EQ(ring.ranks.size(), 128u);
    EXPECT_EQ(std::set<int>(ring.ranks.begin(), ring.ranks.end()).size(), 128u);
    for (int n = 0; n < 16; ++n) {
      // The node's ranks are contiguous in the ring: it is entered once.
      const int entry = ring.ranks[static_cast<std::size_t>(n * 8)];
      const int exit = ring.ranks[static_cast<std::size_t>(n * 8 + 7)];
      ASSERT_EQ(plan.node_of[entry], n);
      ASSERT_EQ(plan.node_of[exit], n);
      const int used = ring.nic[static_cast<std::size_t>(n)];
      ASSERT_GE(used, 0);
      nics_used.insert(used);
      const int nic_node = p4d.nics()[static_cast<std::size_t>(used)];
      EXPECT_EQ(label(p4d, gpu(p4d, plan.local_of[entry]), nic_node), "PIX")
          << "channel " << ring.channel << " enters node " << n << " at GPU" << plan.local_of[entry] << " via NIC"
          << used;
      EXPECT_EQ(label(p4d, gpu(p4d, plan.local_of[exit]), nic_node), "PIX")
          << "channel " << ring.channel << " leaves node " << n << " from GPU" << plan.local_of[exit] << " via NIC"
          << used;
    }
  }
  EXPECT_EQ(nics_used.size(), 4u);  // the channels spread over every NIC
  for (const auto& tree : plan.trees) {
    int roots = 0;
    for (int r = 0; r < 128; ++r) {
      if (tree.parent[r] < 0) {
        ++roots;
        EXPECT_EQ(r, tree.root);
      } else {
        const auto& siblings = tree.children[tree.parent[r]];
        EXPECT_NE(std::find(siblings.begin(), siblings.end(), r), siblings.end());
      }
    }
    EXPECT_EQ(roots, 1);
  }
  EXPECT_EQ(plan.lines.front().rfind("Channel 00 : ", 0), 0u) << plan.lines.front();
}

TEST(ChannelSearch, CpuOnlyNodesAndTooManyRanks) {
  const auto cpu = Topology::from_hwloc_xml(
      "<topology version=\"2.0\"><object type=\"Machine\" os_index=\"0\" cpuset=\"0x3\" complete_cpuset=\"0x3\" "
      "allowed_cpuset=\"0x3\" nodeset=\"0x1\" complete_nodeset=\"0x1\" allowed_nodeset=\"0x1\" gp_index=\"1\">"
      "<object type=\"NUMANode\" os_index=\"0\" cpuset=\"0x3\" complete_cpuset=\"0x3\" nodeset=\"0x1\" "
      "complete_nodeset=\"0x1\" gp_index=\"2\" local_memory=\"1000000\"/>"
      "<object type=\"PU\" os_index=\"0\" cpuset=\"0x1\" complete_cpuset=\"0x1\" nodeset=\"0x1\" "
      "complete_nodeset=\"0x1\" gp_index=\"3\"/>"
      "<object type=\"PU\" os_index=\"1\" cpuset=\"0x2\" complete_cpuset=\"0x2\" nodeset=\"0x1\" "
      "complete_nodeset=\"0x1\" gp_index=\"4\"/></object></topology>",
      "cpu.xml");
  std::vector<NodeRanks> nodes(2, NodeRanks{&cpu, 3});
  const auto plan = search_channels(nodes, 2);
  EXPECT_EQ(plan.rings[0].ranks, (std::vector<int>{0, 1, 2, 3, 4, 5}));
  const auto p4d = Topology::load_file(kP4d);
  std::vector<NodeRanks> too_many(1, NodeRanks{&p4d, 9});
  EXPECT_NE(error_of([&] { search_channels(too_many, 1); }).find("runs 9 ranks but has 8 GPUs"), std::string::npos);
}

}  // namespace
}  // namespace ringmaster::topo

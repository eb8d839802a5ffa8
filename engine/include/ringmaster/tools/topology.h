// The hardware topology of a node: what is connected to what, and how fast.
//
// A Topology is a tree of hardware objects (machine, packages, NUMA nodes,
// cores, PCI host bridges and switches, GPUs, NICs and their network
// devices, NVSwitches) plus the links between them, each with a type and a
// bandwidth. It comes from one of three sources:
//
//   - hwloc discovery of this machine (`Topology::discover()`),
//   - an hwloc XML file (`lstopo --of xml` on another node),
//   - an NCCL topology XML file (NCCL_TOPO_FILE).
//
// Every object records whether it was *discovered* on this machine or
// *declared* by a file, and every rendering shows the difference. Paths
// between GPUs and NICs are classified with nvidia-smi's legend (NV#, PIX,
// PXB, PHB, NODE, SYS). Ring and tree search over many nodes lives in
// ringmaster/topology_search.h.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace ringmaster::topo {

enum class NodeKind : std::uint8_t {
  machine,
  package,      // a CPU socket; an NCCL <cpu> element (one NUMA domain)
  numa,         // a NUMA memory node
  core,         // a CPU core (PUs are counted in its "pus" attribute)
  host_bridge,  // a PCI host bridge / root complex
  pci_switch,   // a PCI-to-PCI bridge or PCIe switch
  pci_device,   // any other PCI function (storage, display, unknown class)
  gpu,
  nic,  // a network adapter (Ethernet, InfiniBand, EFA)
  net,  // a network device of a NIC: eth0, mlx5_0, rdmap16s27
  nvswitch,
};
std::string_view name_of(NodeKind kind) noexcept;

enum class Origin : std::uint8_t { discovered, declared };
std::string_view name_of(Origin origin) noexcept;

enum class LinkType : std::uint8_t {
  local,    // inside one package: CPU to its NUMA node, cores, host bridges
  pci,      // a PCIe link
  nvlink,   // NVLink; Link::count says how many are bonded
  smp,      // the interconnect between packages (QPI/UPI, Infinity Fabric)
  network,  // a NIC to its network device
  c2c,      // a GPU to its CPU over chip-to-chip (Grace: NVLink-C2C); Link::count links bonded
};
std::string_view name_of(LinkType type) noexcept;

// nvidia-smi topo -m's legend, from nearest to farthest.
enum class PathClass : std::uint8_t {
  self,    // X
  nvlink,  // NV#: bonded NVLinks (Path::nvlinks says how many)
  pix,     // at most one PCIe bridge
  pxb,     // several PCIe bridges, no host bridge
  phb,     // a PCIe host bridge (typically the CPU)
  node,    // between host bridges within one NUMA node
  sys,     // across the SMP interconnect between NUMA nodes
};
// "X", "NV4", "PIX", ... (`nvlinks` only matters for PathClass::nvlink).
std::string label_of(PathClass path, int nvlinks = 0);

struct Node {
  NodeKind kind = NodeKind::machine;
  Origin origin = Origin::discovered;
  int parent = -1;  // index into Topology::nodes(); -1 for the machine
  std::vector<int> children;
  std::string name;  // what people call it: "GPU0", "NIC1", "eth0", "Package 0", "PCI 10:1c.0"
  int index = -1;    // GPU/NIC number, NCCL numaid or hwloc os_index; -1 when none
  // Attributes with NCCL's names (busid, class, vendor, device, link_speed,
  // link_width, numaid, affinity, ...) in the order they were read. An
  // NCCL file's attributes are kept verbatim, so export reproduces them.
  std::vector<std::pair<std::string, std::string>> attributes;
  // Added by a loader to complete the graph (the host bridge every NCCL
  // <cpu> implies); not written back by export.
  bool implicit = false;
  int line = 0;  // line in the source file; 0 when discovered
  // Child elements of an NCCL file this reader keeps without reading them
  // (<pcilink>, and any it does not know), verbatim, for export.
  std::vector<std::string> kept_xml;

  const std::string* attribute(std::string_view key) const;
  void set_attribute(std::string_view key, std::string value);

  bool operator==(const Node&) const = default;
};

struct Link {
  int a = -1;
  int b = -1;
  LinkType type = LinkType::pci;
  double bandwidth = 0;  // GB/s in each direction; 0 when unknown
  int count = 1;         // NVLinks bonded into this link
  // An NCCL <nvlink> element's attributes, verbatim, for export.
  std::vector<std::pair<std::string, std::string>> attributes;

  bool operator==(const Link&) const = default;
};

struct Path {
  PathClass cls = PathClass::sys;
  int nvlinks = 0;
  double bandwidth = 0;  // GB/s of the narrowest link on the path; 0 when unknown
  int hops = 0;          // links on the path
  std::string label() const { return label_of(cls, nvlinks); }
};

struct LoadOptions {
  // When set, PCI devices that an NCCL file lists by bus id alone take
  // their class and ids from <sysfs_root>/bus/pci/devices/<busid>/, as
  // NCCL does on the node the file describes ("/sys" there). Leave it
  // empty for a file that describes another machine.
  std::string sysfs_root;
  // A file whose GPUs are of a board that joins them through NVSwitches
  // (A100/H100/H200 SXM: AWS p4d, p4de, p5) but that declares no NVLink
  // (AWS's own p4d files) always gets a warning; with this set, the board's
  // links are added too (one implicit NVSwitch, NV12 or NV18 per GPU), as
  // the instance has them.
  bool add_board_nvlinks = false;
};

class Topology {
 public:
  // hwloc discovery of this machine, I/O devices included. GPUs come from
  // hwloc's CUDA/NVML OS devices when present, otherwise from PCI class
  // 0x0300/0x0302 with NVIDIA's vendor id.
  static Topology discover();
  // Reads an hwloc or NCCL XML file, told apart by the root element.
  // Throws ringmaster::Error (config) naming the file, and the line where
  // known, for anything it cannot read.
  static Topology load_file(const std::string& path, const LoadOptions& options = {});
  static Topology from_nccl_xml(std::string_view text, std::string_view source_name, const LoadOptions& options = {});
  static Topology from_hwloc_xml(std::string_view text, std::string_view source_name);

  // NCCL topology XML; loads back into an equal graph.
  std::string to_nccl_xml() const;
  // JSON for the console: source, origin, nodes (with children), links,
  // and the GPU/NIC path matrix.
  std::string to_json() const;
  // lstopo-like indented tree, every object tagged with its origin.
  std::string render_tree() const;
  // nvidia-smi topo -m: GPUs and NICs, CPU/NUMA affinity, the legend.
  std::string render_matrix() const;

  const std::vector<Node>& nodes() const noexcept { return nodes_; }
  const std::vector<Link>& links() const noexcept { return links_; }
  std::vector<int> gpus() const;  // node indices, in GPU number order
  std::vector<int> nics() const;  // node indices, in NIC number order
  std::vector<int> of_kind(NodeKind kind) const;

  // The path between two nodes (GPUs, NICs or any other).
  Path path(int a, int b) const;
  // The first link between two nodes, either way round; null when none.
  const Link* link_between(int a, int b) const;
  // The package (or NCCL <cpu>) a node belongs to; -1 when none.
  int package_of(int node) const;

  // What a reader met and did not take as it stands, one line each, with
  // the line in the file: an element or attribute it does not know (kept,
  // and written back by export), a board known to have NVLink whose file
  // declares none. Never a reason to refuse the file.
  const std::vector<std::string>& warnings() const noexcept { return warnings_; }
  void warn(std::string line) { warnings_.push_back(std::move(line)); }

  // A GPU's model ("H200 SXM 141GB") from the PCI device id, on the GPU
  // node or the <pci> function above it; empty when not known.
  std::string gpu_model(int gpu) const;
  // That PCI device id (0x2330 for an H100 SXM5), 0 when not declared.
  std::uint32_t gpu_device(int gpu) const;

  // The warning (and, when asked, the links) for GPUs of an NVSwitch board
  // whose source declares no NVLink between them. Loaders call it last.
  void check_board_nvlinks(bool add);

  // "hwloc discovery of host", or the file it was read from.
  const std::string& source() const noexcept { return source_; }
  Origin origin() const noexcept { return origin_; }
  // One line: "declared by p4d.xml: 2 packages, 8 GPUs, 4 NICs (...)".
  std::string summary() const;

  // Same graph: nodes (kind, origin, parent, name, attributes) and links.
  bool same_graph(const Topology& other) const;

  // Building (loaders and tests).
  Topology(std::string source, Origin origin);
  int add_node(NodeKind kind, int parent, std::string name);
  Link& add_link(int a, int b, LinkType type, double bandwidth, int count = 1);
  // Removes a node's links of one type (a source that knows them better,
  // NVML's active NVLinks, replaces what a file said).
  void drop_links(int node, LinkType type);
  Node& node(int index) { return nodes_.at(static_cast<std::size_t>(index)); }
  const Node& node(int index) const { return nodes_.at(static_cast<std::size_t>(index)); }
  // Numbers GPUs and NICs in tree order, names them, links each node to
  // its parent, and links packages to each other. Loaders call it last.
  void finish();

 private:
  int depth_of(int node) const;

  std::string source_;
  Origin origin_ = Origin::discovered;
  std::vector<Node> nodes_;
  std::vector<Link> links_;
  std::vector<std::string> warnings_;
  // The first link between two nodes, by the pair (lower id in the high
  // word): link_between() in constant time (a scan of every link for each
  // node made 45,000 NICs take most of a minute).
  std::unordered_map<std::uint64_t, std::size_t> first_link_;
};

// PCIe bandwidth per direction in GB/s for a link speed as NCCL writes it
// ("8 GT/s", "16.0 GT/s PCIe") and a lane count; 0 when unknown.
double pci_bandwidth(std::string_view link_speed, int link_width);

// One NVLink's bandwidth per direction in GB/s for a GPU of compute
// capability `sm` (80 for 8.0), as NCCL models it; 20 when unknown.
double nvlink_bandwidth(int sm);

}  // namespace ringmaster::topo

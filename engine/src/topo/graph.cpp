// The topology graph: building, numbering, links and path classes.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <limits>

#include "ringmaster/tools/topology.h"
#include "topo/pci.h"

namespace ringmaster::topo {

std::string_view name_of(NodeKind kind) noexcept {
  switch (kind) {
    case NodeKind::machine:
      return "machine";
    case NodeKind::package:
      return "package";
    case NodeKind::numa:
      return "numa";
    case NodeKind::core:
      return "core";
    case NodeKind::host_bridge:
      return "host_bridge";
    case NodeKind::pci_switch:
      return "pci_switch";
    case NodeKind::pci_device:
      return "pci_device";
    case NodeKind::gpu:
      return "gpu";
    case NodeKind::nic:
      return "nic";
    case NodeKind::net:
      return "net";
    case NodeKind::nvswitch:
      return "nvswitch";
  }
  return "?";
}

std::string_view name_of(Origin origin) noexcept {
  return origin == Origin::declared ? "declared" : "discovered";
}

std::string_view name_of(LinkType type) noexcept {
  switch (type) {
    case LinkType::local:
      return "local";
    case LinkType::pci:
      return "pci";
    case LinkType::nvlink:
      return "nvlink";
    case LinkType::smp:
      return "smp";
    case LinkType::network:
      return "network";
    case LinkType::c2c:
      return "c2c";
  }
  return "?";
}

std::string label_of(PathClass path, int nvlinks) {
  switch (path) {
    case PathClass::self:
      return "X";
    case PathClass::nvlink:
      return fmt::format("NV{}", nvlinks);
    case PathClass::pix:
      return "PIX";
    case PathClass::pxb:
      return "PXB";
    case PathClass::phb:
      return "PHB";
    case PathClass::node:
      return "NODE";
    case PathClass::sys:
      return "SYS";
  }
  return "?";
}

const std::string* Node::attribute(std::string_view key) const {
  for (const auto& [k, v] : attributes) {
    if (k == key) return &v;
  }
  return nullptr;
}

void Node::set_attribute(std::string_view key, std::string value) {
  for (auto& [k, v] : attributes) {
    if (k == key) {
      v = std::move(value);
      return;
    }
  }
  attributes.emplace_back(std::string(key), std::move(value));
}

double pci_bandwidth(std::string_view link_speed, int link_width) {
  if (link_width <= 0) return 0;
  double gts = 0;
  const char* begin = link_speed.data();
  const char* end = begin + link_speed.size();
  while (begin < end && *begin == ' ')
    ++begin;
  auto [ptr, ec] = std::from_chars(begin, end, gts);
  if (ec != std::errc{} || gts <= 0) return 0;
  // PCIe 1 and 2 encode 8 bits in 10; PCIe 3 and later 128 in 130.
  const double efficiency = gts < 8 ? 0.8 : 128.0 / 130.0;
  return gts * link_width * efficiency / 8.0;
}

Topology::Topology(std::string source, Origin origin) : source_(std::move(source)), origin_(origin) {}

int Topology::add_node(NodeKind kind, int parent, std::string name) {
  Node n;
  n.kind = kind;
  n.origin = origin_;
  n.parent = parent;
  n.name = std::move(name);
  nodes_.push_back(std::move(n));
  const int index = static_cast<int>(nodes_.size()) - 1;
  if (parent >= 0) node(parent).children.push_back(index);
  return index;
}

namespace {
std::uint64_t pair_key(int a, int b) {
  const auto lo = static_cast<std::uint32_t>(std::min(a, b));
  const auto hi = static_cast<std::uint32_t>(std::max(a, b));
  return (std::uint64_t{lo} << 32) | hi;
}
}  // namespace

Link& Topology::add_link(int a, int b, LinkType type, double bandwidth, int count) {
  first_link_.emplace(pair_key(a, b), links_.size());
  links_.push_back(Link{a, b, type, bandwidth, count, {}});
  return links_.back();
}

void Topology::drop_links(int node, LinkType type) {
  std::erase_if(links_, [&](const Link& l) { return l.type == type && (l.a == node || l.b == node); });
  first_link_.clear();
  for (std::size_t i = 0; i < links_.size(); ++i)
    first_link_.emplace(pair_key(links_[i].a, links_[i].b), i);
}

std::vector<int> Topology::of_kind(NodeKind kind) const {
  std::vector<int> out;
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    if (nodes_[i].kind == kind) out.push_back(static_cast<int>(i));
  }
  return out;
}

namespace {

std::vector<int> sorted_by_index(const Topology& t, std::vector<int> ids) {
  std::stable_sort(ids.begin(), ids.end(), [&](int a, int b) { return t.node(a).index < t.node(b).index; });
  return ids;
}

// Effective bandwidth of the link between two packages, GB/s, from the
// CPU's vendor and model as NCCL's <cpu> element gives them. These are
// model constants in the spirit of NCCL's: what a collective can expect to
// move across the link, not the link's datasheet figure.
double smp_bandwidth(const Node& package) {
  const std::string* vendor = package.attribute("vendor");
  const std::string* model = package.attribute("modelid");
  if (vendor && *vendor == "AuthenticAMD") return 16.0;
  if (vendor && *vendor == "GenuineIntel") {
    const long m = model ? std::strtol(model->c_str(), nullptr, 0) : 0;
    return m >= 0x55 ? 10.0 : 6.0;  // Skylake-SP (85) and later: UPI
  }
  return 6.0;
}

}  // namespace

std::vector<int> Topology::gpus() const {
  return sorted_by_index(*this, of_kind(NodeKind::gpu));
}
std::vector<int> Topology::nics() const {
  return sorted_by_index(*this, of_kind(NodeKind::nic));
}

const Link* Topology::link_between(int a, int b) const {
  const auto it = first_link_.find(pair_key(a, b));
  return it == first_link_.end() ? nullptr : &links_[it->second];
}

void Topology::finish() {
  // Numbers and names in tree order, unless a loader set them.
  int next_gpu = 0;
  int next_nic = 0;
  for (auto& n : nodes_) {
    if (n.kind == NodeKind::gpu) {
      if (n.index < 0) n.index = next_gpu;
      next_gpu = std::max(next_gpu, n.index + 1);
      n.name = fmt::format("GPU{}", n.index);
    } else if (n.kind == NodeKind::nic) {
      if (n.index < 0) n.index = next_nic;
      next_nic = std::max(next_nic, n.index + 1);
      n.name = fmt::format("NIC{}", n.index);
    }
  }
  // One link from every node to its parent.
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    const Node& n = nodes_[i];
    if (n.parent < 0) continue;
    const int child = static_cast<int>(i);
    if (link_between(n.parent, child)) continue;
    const Node& p = node(n.parent);
    if (n.kind == NodeKind::net) {
      const std::string* speed = n.attribute("speed");  // Mb/s
      add_link(n.parent, child, LinkType::network, speed ? std::strtod(speed->c_str(), nullptr) / 8000.0 : 0);
    } else if (n.attribute("busid") && (p.kind == NodeKind::host_bridge || p.kind == NodeKind::pci_switch ||
                                        p.kind == NodeKind::package || p.kind == NodeKind::pci_device)) {
      add_link(n.parent, child, LinkType::pci, pci_link_bandwidth(n));
    } else {
      add_link(n.parent, child, LinkType::local, 0);
    }
  }
  // Packages reach each other over the SMP interconnect.
  const auto packages = of_kind(NodeKind::package);
  for (std::size_t i = 0; i < packages.size(); ++i) {
    for (std::size_t j = i + 1; j < packages.size(); ++j) {
      if (link_between(packages[i], packages[j])) continue;
      add_link(packages[i], packages[j], LinkType::smp,
               std::min(smp_bandwidth(node(packages[i])), smp_bandwidth(node(packages[j]))));
    }
  }
}

int Topology::depth_of(int n) const {
  int d = 0;
  while (node(n).parent >= 0) {
    n = node(n).parent;
    ++d;
  }
  return d;
}

int Topology::package_of(int n) const {
  for (int at = n; at >= 0; at = node(at).parent) {
    if (node(at).kind == NodeKind::package) return at;
  }
  // Devices hwloc hangs off the machine itself belong to its only package.
  const auto packages = of_kind(NodeKind::package);
  return packages.size() == 1 ? packages.front() : -1;
}

Path Topology::path(int a, int b) const {
  Path p;
  if (a == b) {
    p.cls = PathClass::self;
    return p;
  }
  // NVLink: direct, or both ends on one NVSwitch.
  int direct = 0;
  double direct_bw = 0;
  std::vector<std::pair<int, const Link*>> switch_links_a;
  for (const auto& l : links_) {
    if (l.type != LinkType::nvlink) continue;
    if ((l.a == a && l.b == b) || (l.a == b && l.b == a)) {
      // Both GPUs list the same bonded links; count them once.
      direct = std::max(direct, l.count);
      direct_bw = std::max(direct_bw, l.bandwidth);
    }
  }
  if (direct > 0) {
    p.cls = PathClass::nvlink;
    p.nvlinks = direct;
    p.bandwidth = direct_bw;
    p.hops = 1;
    return p;
  }
  // Through NVSwitches: every link of each end into the switch fabric
  // counts (a DGX-2's GPU has one link to each of its baseboard's six
  // switches: NV6 between any two GPUs).
  struct Into {
    int links = 0;
    double bandwidth = 0;
    std::vector<int> switches;
  } into_a, into_b;
  for (const auto& l : links_) {
    if (l.type != LinkType::nvlink) continue;
    for (auto [end, into] : {std::pair{a, &into_a}, std::pair{b, &into_b}}) {
      if (l.a != end && l.b != end) continue;
      const int other = l.a == end ? l.b : l.a;
      if (node(other).kind != NodeKind::nvswitch) continue;
      into->links += l.count;
      into->bandwidth += l.bandwidth;
      into->switches.push_back(other);
    }
  }
  if (into_a.links > 0 && into_b.links > 0) {
    // One node's NVSwitches are one fabric (a DGX-2's two baseboards are
    // trunked, which NVML does not report): the ends reach each other.
    bool common = false;
    for (int sw : into_b.switches)
      common = common || std::find(into_a.switches.begin(), into_a.switches.end(), sw) != into_a.switches.end();
    p.cls = PathClass::nvlink;
    p.nvlinks = std::min(into_a.links, into_b.links);
    p.bandwidth = std::min(into_a.bandwidth, into_b.bandwidth);
    p.hops = common ? 2 : 3;
    return p;
  }
  // The tree path through the lowest common ancestor.
  int x = a;
  int y = b;
  int dx = depth_of(x);
  int dy = depth_of(y);
  double bw = std::numeric_limits<double>::infinity();
  int bridges = 0;
  auto climb = [&](int& at, int& depth) {
    if (const Link* l = link_between(at, node(at).parent); l && l->bandwidth > 0) bw = std::min(bw, l->bandwidth);
    at = node(at).parent;
    --depth;
    ++p.hops;
    if (node(at).kind == NodeKind::pci_switch) ++bridges;
  };
  while (dx > dy)
    climb(x, dx);
  while (dy > dx)
    climb(y, dy);
  while (x != y) {
    climb(x, dx);
    climb(y, dy);
  }
  const int lca = x;
  // A switch reached from both sides was counted twice.
  if (node(lca).kind == NodeKind::pci_switch && lca != a && lca != b) --bridges;

  const int pa = package_of(a);
  const int pb = package_of(b);
  if (pa != pb) {
    p.cls = PathClass::sys;
    if (pa >= 0 && pb >= 0) {
      if (const Link* l = link_between(pa, pb); l && l->bandwidth > 0) bw = std::min(bw, l->bandwidth);
    }
  } else {
    switch (node(lca).kind) {
      case NodeKind::pci_switch:
      case NodeKind::pci_device:
      case NodeKind::gpu:
      case NodeKind::nic:
      case NodeKind::nvswitch:
      case NodeKind::net:
        p.cls = bridges <= 1 ? PathClass::pix : PathClass::pxb;
        break;
      case NodeKind::host_bridge:
        p.cls = PathClass::phb;
        break;
      default:
        p.cls = PathClass::node;
        break;
    }
  }
  p.bandwidth = std::isinf(bw) ? 0 : bw;
  return p;
}

bool Topology::same_graph(const Topology& other) const {
  if (nodes_.size() != other.nodes_.size() || links_.size() != other.links_.size()) return false;
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    const Node& x = nodes_[i];
    const Node& y = other.nodes_[i];
    if (x.kind != y.kind || x.origin != y.origin || x.parent != y.parent || x.children != y.children ||
        x.name != y.name || x.index != y.index || x.attributes != y.attributes || x.implicit != y.implicit) {
      return false;
    }
  }
  return links_ == other.links_;
}

namespace {

// A GPU's entry in the model table: NVIDIA's ids sit on the GPU node
// (hwloc) or on the <pci> function above it (NCCL's files).
const GpuModel* model_entry(const Topology& t, int gpu) {
  const std::uint32_t device = t.gpu_device(gpu);
  return device != 0 ? gpu_model_of(device) : nullptr;
}

}  // namespace

std::uint32_t Topology::gpu_device(int gpu) const {
  for (int at = gpu, step = 0; at >= 0 && step < 2; at = node(at).parent, ++step) {
    const Node& n = node(at);
    if (parse_hex(n.attribute("vendor")) == kVendorNvidia && n.attribute("device"))
      return parse_hex(n.attribute("device"));
  }
  return 0;
}

std::string Topology::gpu_model(int gpu) const {
  const GpuModel* m = model_entry(*this, gpu);
  return m ? m->name : std::string();
}

void Topology::check_board_nvlinks(bool add) {
  const auto all = gpus();
  if (all.size() < 2) return;
  for (const auto& l : links_) {
    if (l.type == LinkType::nvlink) return;  // the source says how they are joined
  }
  const GpuModel* model = nullptr;
  for (int g : all) {
    const GpuModel* m = model_entry(*this, g);
    if (!m || m->board_nvlinks == 0 || (model && m != model)) return;
    model = m;
  }
  warn(
      fmt::format("{} {} GPUs and no NVLink declared: every board with these GPUs (AWS p4d, p4de and p5 among "
                  "them) joins them through NVSwitches, NV{} between any two, which this source does not say; "
                  "the paths shown between them are {}",
                  all.size(), model->name, model->board_nvlinks,
                  add ? "the board's (added on request)" : "PCIe only (add the board's links: --board-nvlinks)"));
  if (!add) return;
  const auto machines = of_kind(NodeKind::machine);
  const int sw = add_node(NodeKind::nvswitch, machines.empty() ? -1 : machines.front(), "NVSwitch (board)");
  node(sw).implicit = true;
  for (int g : all) {
    const std::string* sm = node(g).attribute("sm");
    add_link(g, sw, LinkType::nvlink, model->board_nvlinks * nvlink_bandwidth(sm ? std::atoi(sm->c_str()) : 0),
             model->board_nvlinks);
  }
}

std::string Topology::summary() const {
  const auto count = [&](NodeKind k) { return of_kind(k).size(); };
  std::string s = origin_ == Origin::declared ? fmt::format("declared by {}: ", source_) : fmt::format("{}: ", source_);
  s += fmt::format("{} package{}, {} GPU{}, {} NIC{}", count(NodeKind::package),
                   count(NodeKind::package) == 1 ? "" : "s", count(NodeKind::gpu), count(NodeKind::gpu) == 1 ? "" : "s",
                   count(NodeKind::nic), count(NodeKind::nic) == 1 ? "" : "s");
  if (const auto cores = count(NodeKind::core)) s += fmt::format(", {} cores", cores);
  if (const auto sw = count(NodeKind::pci_switch)) s += fmt::format(", {} PCI switch{}", sw, sw == 1 ? "" : "es");
  if (const auto nvs = count(NodeKind::nvswitch)) s += fmt::format(", {} NVSwitch{}", nvs, nvs == 1 ? "" : "es");
  std::size_t unknown = 0;
  for (int d : of_kind(NodeKind::pci_device)) {
    if (!node(d).attribute("class")) ++unknown;
  }
  if (unknown) s += fmt::format(", {} PCI device{} of unknown class", unknown, unknown == 1 ? "" : "s");
  std::vector<std::string> nets;
  for (int n : of_kind(NodeKind::net))
    nets.push_back(node(n).name);
  if (!nets.empty()) s += fmt::format(" ({})", fmt::join(nets, ", "));
  return s;
}

}  // namespace ringmaster::topo

// Text and JSON views of a topology: the lstopo-like tree, the
// nvidia-smi-like matrix, and the JSON the console draws from.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <nlohmann/json.hpp>
#include <sstream>
#include <unordered_map>

#include "ringmaster/tools/topology.h"
#include "topo/pci.h"

namespace ringmaster::topo {
namespace {

// "000000ff,ffff0000,00ffffff" -> "0-23,48-71".
std::string cpu_ranges(const std::string& mask) {
  std::vector<std::uint32_t> words;  // least significant first
  std::string_view rest = mask;
  while (!rest.empty()) {
    const auto comma = rest.rfind(',');
    const std::string word(comma == std::string_view::npos ? rest : rest.substr(comma + 1));
    words.push_back(static_cast<std::uint32_t>(std::strtoul(word.c_str(), nullptr, 16)));
    rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(0, comma);
  }
  std::vector<std::string> ranges;
  int start = -1;
  const int bits = static_cast<int>(words.size()) * 32;
  for (int b = 0; b <= bits; ++b) {
    const bool set = b < bits && ((words[static_cast<std::size_t>(b / 32)] >> (b % 32)) & 1u);
    if (set && start < 0) start = b;
    if (!set && start >= 0) {
      ranges.push_back(start == b - 1 ? std::to_string(start) : fmt::format("{}-{}", start, b - 1));
      start = -1;
    }
  }
  return ranges.empty() ? "N/A" : fmt::format("{}", fmt::join(ranges, ","));
}

std::string bandwidth_text(double gbps) {
  return gbps > 0 ? fmt::format("{:.1f} GB/s", gbps) : "";
}

std::string ids_text(const Node& n) {
  const std::string* vendor = n.attribute("vendor");
  const std::string* device = n.attribute("device");
  if (!vendor || !device) return "";
  return fmt::format(" [{:04x}:{:04x}]", parse_hex(vendor), parse_hex(device));
}

const Link* parent_link(const Topology& t, int id) {
  const int parent = t.node(id).parent;
  return parent < 0 ? nullptr : t.link_between(parent, id);
}

// The NVLinks each node lists, gathered once for the whole tree (a scan of
// every link for each node made 45,000 NICs take most of a minute).
using NvlinksFrom = std::unordered_map<int, std::vector<const Link*>>;

NvlinksFrom nvlinks_from(const Topology& t) {
  NvlinksFrom out;
  for (const auto& l : t.links()) {
    if (l.type == LinkType::nvlink) out[l.a].push_back(&l);
  }
  return out;
}

std::string describe(const Topology& t, int id, const NvlinksFrom& nvlinks) {
  const Node& n = t.node(id);
  std::string s = n.name;
  const std::string* bus = n.attribute("busid");
  switch (n.kind) {
    case NodeKind::machine:
      if (const std::string* host = n.attribute("hostname")) s += " " + *host;
      break;
    case NodeKind::package: {
      std::vector<std::string> parts;
      if (const std::string* numa = n.attribute("numaid"))
        parts.push_back(*numa == "-1" ? std::string("NUMA node unknown") : "numaid " + *numa);
      if (const std::string* v = n.attribute("vendor")) parts.push_back(*v);
      if (const std::string* m = n.attribute("model")) {
        const auto end = m->find_last_not_of(' ');
        parts.push_back(m->substr(0, end == std::string::npos ? 0 : end + 1));
      }
      if (const std::string* a = n.attribute("affinity")) parts.push_back("CPUs " + cpu_ranges(*a));
      if (!parts.empty()) s += fmt::format(" ({})", fmt::join(parts, ", "));
      break;
    }
    case NodeKind::numa:
      if (const std::string* mem = n.attribute("local_memory")) {
        s += fmt::format(" ({:.1f} GiB)", std::strtod(mem->c_str(), nullptr) / (1024.0 * 1024 * 1024));
      }
      break;
    case NodeKind::host_bridge:
      if (n.implicit) s += " (implied: NCCL hangs PCI trees off the CPU)";
      break;
    case NodeKind::pci_switch:
      s += ids_text(n);
      break;
    case NodeKind::gpu:
    case NodeKind::nic:
    case NodeKind::nvswitch:
    case NodeKind::pci_device:
      if (bus && n.kind != NodeKind::pci_device && n.kind != NodeKind::nvswitch) s += " " + *bus;
      s += ids_text(n);
      if (n.kind == NodeKind::pci_device && !n.attribute("class")) s += " (class not in the file)";
      if (n.kind == NodeKind::gpu) {
        if (const std::string model = t.gpu_model(id); !model.empty()) s += " " + model;
        if (const std::string* sm = n.attribute("sm")) s += " sm_" + *sm;
        if (const std::string* cuda = n.attribute("cuda")) s += " " + *cuda;
      }
      break;
    case NodeKind::net:
      if (const std::string* speed = n.attribute("speed")) s += fmt::format(" {} Mb/s", *speed);
      if (const std::string* addr = n.attribute("address")) s += " " + *addr;
      break;
    case NodeKind::core:
      break;
  }
  if (const Link* l = parent_link(t, id); l && l->type == LinkType::pci && l->bandwidth > 0) {
    s += "  PCIe " + bandwidth_text(l->bandwidth);
  }
  if (const auto it = nvlinks.find(id); it != nvlinks.end()) {
    for (const Link* l : it->second)
      s += fmt::format("  NVLink x{} to {} ({})", l->count, t.node(l->b).name, bandwidth_text(l->bandwidth));
  }
  return s;
}

void tree_lines(const Topology& t, int id, int depth, const NvlinksFrom& nvlinks, std::ostringstream& out) {
  const Node& n = t.node(id);
  const std::string pad(static_cast<std::size_t>(depth) * 2, ' ');
  out << pad << describe(t, id, nvlinks) << "  [" << name_of(n.origin) << "]\n";
  // Cores on one line per parent: lstopo's one line per core is too long
  // to read for a 128-core machine.
  std::vector<int> cores;
  int pus = 0;
  for (int c : n.children) {
    if (t.node(c).kind == NodeKind::core) {
      cores.push_back(t.node(c).index);
      if (const std::string* p = t.node(c).attribute("pus")) pus += std::atoi(p->c_str());
    }
  }
  for (int c : n.children) {
    if (t.node(c).kind == NodeKind::numa) tree_lines(t, c, depth + 1, nvlinks, out);
  }
  if (!cores.empty()) {
    out << pad << "  " << cores.size() << " cores, " << pus << " PUs (core P#"
        << fmt::format("{}", fmt::join(cores, " ")) << ")  [" << name_of(t.node(n.children.front()).origin) << "]\n";
  }
  for (int c : n.children) {
    const NodeKind k = t.node(c).kind;
    if (k != NodeKind::core && k != NodeKind::numa) tree_lines(t, c, depth + 1, nvlinks, out);
  }
}

std::string origin_line(const Topology& t) {
  return t.origin() == Origin::declared
             ? fmt::format("Topology declared by {} (not discovered on this machine)", t.source())
             : fmt::format("Topology from {}", t.source());
}

}  // namespace

std::string Topology::render_tree() const {
  std::ostringstream out;
  out << origin_line(*this) << "\n" << summary() << "\n\n";
  const NvlinksFrom nvlinks = nvlinks_from(*this);
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    if (nodes_[i].parent < 0) tree_lines(*this, static_cast<int>(i), 0, nvlinks, out);
  }
  return out.str();
}

std::string Topology::render_matrix() const {
  std::ostringstream out;
  out << origin_line(*this) << "\n\n";
  std::vector<int> devices = gpus();
  const auto n = nics();
  devices.insert(devices.end(), n.begin(), n.end());
  if (devices.empty()) {
    out << "No GPUs or NICs in this topology (" << summary() << ").\n";
    return out.str();
  }
  constexpr int kWidth = 8;
  std::vector<std::pair<std::string, std::string>> affinity;  // per row: CPUs, NUMA node
  std::size_t cpu_width = std::string_view("CPU Affinity").size();
  for (int row : devices) {
    const int pkg = package_of(row);
    std::string cpus = "N/A";
    std::string numa = "N/A";
    if (pkg >= 0) {
      if (const std::string* a = node(pkg).attribute("affinity")) cpus = cpu_ranges(*a);
      if (const std::string* id = node(pkg).attribute("numaid")) numa = *id;
    }
    cpu_width = std::max(cpu_width, cpus.size());
    affinity.emplace_back(std::move(cpus), std::move(numa));
  }
  cpu_width += 4;
  out << fmt::format("{:<{}}", "", kWidth);
  for (int d : devices)
    out << fmt::format("{:<{}}", node(d).name, kWidth);
  out << fmt::format("{:<{}}{}\n", "CPU Affinity", cpu_width, "NUMA Affinity");
  for (std::size_t i = 0; i < devices.size(); ++i) {
    out << fmt::format("{:<{}}", node(devices[i]).name, kWidth);
    for (int col : devices)
      out << fmt::format("{:<{}}", path(devices[i], col).label(), kWidth);
    out << fmt::format("{:<{}}{}\n", affinity[i].first, cpu_width, affinity[i].second);
  }
  out << "\nLegend:\n\n"
         "  X    = Self\n"
         "  SYS  = Path crosses PCIe and the SMP interconnect between NUMA nodes (QPI/UPI, Infinity Fabric)\n"
         "  NODE = Path crosses PCIe and the interconnect between PCIe host bridges within a NUMA node\n"
         "  PHB  = Path crosses PCIe and a PCIe host bridge (typically the CPU)\n"
         "  PXB  = Path crosses several PCIe bridges, no PCIe host bridge\n"
         "  PIX  = Path crosses at most one PCIe bridge\n"
         "  NV#  = Path over a bonded set of # NVLinks\n";
  if (!n.empty()) {
    out << "\nNIC Legend:\n\n";
    for (int nic : n) {
      std::vector<std::string> names;
      for (int c : node(nic).children) {
        if (node(c).kind == NodeKind::net) names.push_back(node(c).name);
      }
      const std::string* bus = node(nic).attribute("busid");
      if (names.empty() && bus) names.push_back(*bus);
      if (names.empty() && node(nic).parent >= 0) {
        if (const std::string* pb = node(node(nic).parent).attribute("busid")) names.push_back(*pb);
      }
      out << fmt::format("  {}: {}\n", node(nic).name, fmt::join(names, ", "));
    }
  }
  return out.str();
}

std::string Topology::to_json() const {
  using nlohmann::ordered_json;
  ordered_json j;
  j["source"] = source_;
  j["origin"] = name_of(origin_);
  j["summary"] = summary();
  j["warnings"] = warnings_;
  auto& nodes = j["nodes"] = ordered_json::array();
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    const Node& n = nodes_[i];
    ordered_json o;
    o["id"] = i;
    o["kind"] = name_of(n.kind);
    o["name"] = n.name;
    o["origin"] = name_of(n.origin);
    o["parent"] = n.parent;
    o["index"] = n.index;
    o["children"] = n.children;
    if (n.implicit) o["implicit"] = true;
    if (n.kind == NodeKind::gpu) {
      if (auto model = gpu_model(static_cast<int>(i)); !model.empty()) o["model"] = model;
    }
    auto& attrs = o["attributes"] = ordered_json::object();
    for (const auto& [k, v] : n.attributes)
      attrs[k] = v;
    nodes.push_back(std::move(o));
  }
  auto& links = j["links"] = ordered_json::array();
  for (const auto& l : links_) {
    links.push_back(
        {{"a", l.a}, {"b", l.b}, {"type", name_of(l.type)}, {"bandwidth_gbps", l.bandwidth}, {"count", l.count}});
  }
  std::vector<int> devices = gpus();
  const auto n = nics();
  devices.insert(devices.end(), n.begin(), n.end());
  ordered_json matrix;
  matrix["devices"] = ordered_json::array();
  for (int d : devices)
    matrix["devices"].push_back({{"id", d}, {"name", node(d).name}});
  matrix["paths"] = ordered_json::array();
  for (int row : devices) {
    ordered_json r = ordered_json::array();
    for (int col : devices) {
      const Path p = path(row, col);
      r.push_back({{"class", p.label()}, {"bandwidth_gbps", p.bandwidth}, {"hops", p.hops}});
    }
    matrix["paths"].push_back(std::move(r));
  }
  j["matrix"] = std::move(matrix);
  return j.dump(2);
}

}  // namespace ringmaster::topo

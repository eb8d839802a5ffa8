// NCCL topology XML (NCCL_TOPO_FILE): system > cpu > pci (nested) > gpu
// (> nvlink) | nic (> net). Read into the graph and written back from it.
#include <fmt/format.h>

#include <fstream>
#include <map>
#include <pugixml.hpp>
#include <set>
#include <sstream>

#include "ringmaster/status.h"
#include "ringmaster/tools/topology.h"
#include "topo/pci.h"
#include "topo/xml.h"

namespace ringmaster::topo {
namespace {

// NVLink bandwidth per link of a GPU by its generation (the <gpu sm="...">
// attribute).
double nvlink_bandwidth(const Node& gpu) {
  const std::string* sm = gpu.attribute("sm");
  return topo::nvlink_bandwidth(sm ? std::atoi(sm->c_str()) : 0);
}

std::string read_sysfs(const std::string& path) {
  std::ifstream in(path);
  std::string value;
  if (in) std::getline(in, value);
  return value;
}

struct PendingNvlink {
  int gpu;
  int line;
  std::vector<std::pair<std::string, std::string>> attributes;
};

class NcclReader {
 public:
  NcclReader(std::string_view text, std::string_view source, const LoadOptions& options)
      : text_(text), lines_(text), source_(source), options_(options), topo_(std::string(source), Origin::declared) {}

  Topology read(const pugi::xml_node& system) {
    const int machine = add(NodeKind::machine, -1, "Machine", system);
    for (const auto& child : system.children()) {
      if (child.type() != pugi::node_element) continue;
      if (!expect(child, "system", {"cpu"}, machine)) continue;
      read_cpu(child, machine);
    }
    resolve_nvlinks(machine);
    topo_.finish();
    topo_.check_board_nvlinks(options_.add_board_nvlinks);
    for (const auto& [what, seen] : unknown_)
      topo_.warn(fmt::format("{}:{}: {} not known to this reader{}: kept as written (export writes it back), not read",
                             source_, seen.first, what,
                             seen.second > 1 ? fmt::format(" ({} times)", seen.second) : std::string()));
    return std::move(topo_);
  }

 private:
  [[noreturn]] void fail(const pugi::xml_node& at, const std::string& what) const {
    throw Error(ErrorCategory::config, fmt::format("{}:{}: {}", source_, lines_.line_of(at.offset_debug()), what));
  }

  // Whether `child` is one of the elements NCCL puts inside `parent`. One
  // that is not (a newer NCCL's, another tool's) is kept verbatim on the
  // node `keeper` for export and reported once, never a refusal: NCCL
  // itself skips what it does not know.
  bool expect(const pugi::xml_node& child, std::string_view parent, std::initializer_list<std::string_view> allowed,
              int keeper) {
    for (auto name : allowed) {
      if (child.name() == name) return true;
    }
    keep(child, keeper);
    note(fmt::format("element <{}> inside <{}>", child.name(), parent), child);
    return false;
  }

  void keep(const pugi::xml_node& child, int keeper) {
    std::ostringstream text;
    child.print(text, "", pugi::format_raw);
    topo_.node(keeper).kept_xml.push_back(text.str());
  }

  void note(std::string what, const pugi::xml_node& at) {
    auto [it, fresh] = unknown_.try_emplace(std::move(what), lines_.line_of(at.offset_debug()), 0);
    ++it->second.second;
  }

  int add(NodeKind kind, int parent, std::string name, const pugi::xml_node& element) {
    const int id = topo_.add_node(kind, parent, std::move(name));
    Node& n = topo_.node(id);
    n.line = lines_.line_of(element.offset_debug());
    for (const auto& a : element.attributes()) {
      n.attributes.emplace_back(a.name(), a.value());
      check_attribute(element, a);
    }
    return id;
  }

  // The attributes NCCL (2.18 to its current release) reads and writes; any other is kept
  // (it is in the node's attributes) and reported.
  void check_attribute(const pugi::xml_node& element, const pugi::xml_attribute& a) {
    static const std::set<std::string_view> known = {"affinity",
                                                     "arch",
                                                     "busid",
                                                     "bw",
                                                     "class",
                                                     "coll",
                                                     "count",
                                                     "dev",
                                                     "device",
                                                     "familyid",
                                                     "gdr",
                                                     "gin",
                                                     "guid",
                                                     "host_hash",
                                                     "id",
                                                     "keep",
                                                     "latency",
                                                     "link_speed",
                                                     "link_width",
                                                     "maxconn",
                                                     "mlopart",
                                                     "modelid",
                                                     "name",
                                                     "net",
                                                     "numaid",
                                                     "plane",
                                                     "port",
                                                     "rail",
                                                     "rank",
                                                     "rma",
                                                     "sm",
                                                     "speed",
                                                     "subsystem_device",
                                                     "subsystem_vendor",
                                                     "target",
                                                     "tclass",
                                                     "vendor",
                                                     "version",
                                                     "virtual"};
    if (!known.contains(a.name())) note(fmt::format("attribute {}=\"...\" of <{}>", a.name(), element.name()), element);
  }

  void read_cpu(const pugi::xml_node& cpu, int machine) {
    const std::string* numaid = nullptr;
    const int package = add(NodeKind::package, machine, "", cpu);
    numaid = topo_.node(package).attribute("numaid");
    topo_.node(package).index =
        numaid ? std::atoi(numaid->c_str()) : static_cast<int>(topo_.of_kind(NodeKind::package).size()) - 1;
    // NCCL writes numaid="-1" where the kernel did not say.
    topo_.node(package).name =
        topo_.node(package).index < 0 ? std::string("Package ?") : fmt::format("Package {}", topo_.node(package).index);
    // NCCL attaches PCI trees straight to the CPU: its root complex is
    // implied. Make it explicit so paths through it read PHB.
    const int bridge = topo_.add_node(NodeKind::host_bridge, package, "HostBridge");
    topo_.node(bridge).implicit = true;
    for (const auto& child : cpu.children()) {
      if (child.type() != pugi::node_element) continue;
      if (!expect(child, "cpu", {"pci", "nic"}, package)) continue;
      if (std::string_view(child.name()) == "pci") {
        read_pci(child, bridge);
      } else {
        read_nic(child, bridge);
      }
    }
  }

  void read_pci(const pugi::xml_node& pci, int parent) {
    const int id = add(NodeKind::pci_device, parent, "", pci);
    Node* n = &topo_.node(id);
    const std::string* busid = n->attribute("busid");
    if (!busid || busid->empty()) fail(pci, "<pci> without a busid attribute");
    const std::string bus = *busid;
    n->name = "PCI " + bus;
    if (!n->attribute("class") && !options_.sysfs_root.empty()) {
      const std::string dir = options_.sysfs_root + "/bus/pci/devices/" + bus + "/";
      for (const char* key : {"class", "vendor", "device", "subsystem_vendor", "subsystem_device"}) {
        if (auto value = read_sysfs(dir + key); !value.empty()) n->set_attribute(key, value);
      }
    }
    if (n->attribute("class"))
      n->kind = kind_of_pci(parse_hex(n->attribute("class")), parse_hex(n->attribute("vendor")));
    bool holds_element = false;
    for (const auto& child : pci.children()) {
      if (child.type() != pugi::node_element) continue;
      if (!expect(child, "pci", {"pci", "gpu", "nic", "pcilink"}, id)) continue;
      const std::string_view name = child.name();
      if (name == "pcilink") {
        keep(child, id);  // a PCIe switch's peer-to-peer link (Broadcom): written back, not drawn
      } else if (name == "pci") {
        read_pci(child, id);
      } else if (name == "gpu") {
        holds_element = true;
        read_gpu(child, id);
      } else {
        holds_element = true;
        read_nic(child, id);
      }
    }
    // The <gpu>/<nic> element is the device; this <pci> is its function.
    n = &topo_.node(id);
    if (holds_element && (n->kind == NodeKind::gpu || n->kind == NodeKind::nic)) n->kind = NodeKind::pci_device;
    if (n->kind == NodeKind::nvswitch) n->name = "NVSwitch " + bus;
    if (n->kind == NodeKind::pci_switch) n->name = "PCISwitch " + bus;
  }

  void read_gpu(const pugi::xml_node& gpu, int parent) {
    const int id = add(NodeKind::gpu, parent, "", gpu);
    if (const std::string* dev = topo_.node(id).attribute("dev")) topo_.node(id).index = std::atoi(dev->c_str());
    for (const auto& child : gpu.children()) {
      if (child.type() != pugi::node_element) continue;
      if (!expect(child, "gpu", {"nvlink", "c2c"}, id)) continue;
      PendingNvlink link{id, lines_.line_of(child.offset_debug()), {}};
      for (const auto& a : child.attributes()) {
        link.attributes.emplace_back(a.name(), a.value());
        check_attribute(child, a);
      }
      if (std::string_view(child.name()) == "c2c") {
        c2cs_.push_back(std::move(link));
        continue;
      }
      if (!child.attribute("target")) fail(child, "<nvlink> without a target attribute");
      nvlinks_.push_back(std::move(link));
    }
  }

  void read_nic(const pugi::xml_node& nic, int parent) {
    const int id = add(NodeKind::nic, parent, "", nic);
    for (const auto& child : nic.children()) {
      if (child.type() != pugi::node_element) continue;
      if (!expect(child, "nic", {"net"}, id)) continue;
      const int net = add(NodeKind::net, id, child.attribute("name").value(), child);
      if (topo_.node(net).name.empty()) topo_.node(net).name = fmt::format("net{}", child.attribute("dev").value());
    }
  }

  void resolve_nvlinks(int machine) {
    std::map<std::string, int> by_busid;
    for (std::size_t i = 0; i < topo_.nodes().size(); ++i) {
      if (const std::string* b = topo_.nodes()[i].attribute("busid")) by_busid[*b] = static_cast<int>(i);
    }
    std::map<std::string, int> nvswitches;
    for (const auto& pending : nvlinks_) {
      std::string target;
      std::string tclass;
      int count = 1;
      for (const auto& [k, v] : pending.attributes) {
        if (k == "target") target = v;
        if (k == "tclass") tclass = v;
        if (k == "count") count = std::max(1, std::atoi(v.c_str()));
      }
      int to = -1;
      if (auto it = by_busid.find(target); it != by_busid.end()) {
        to = it->second;
        // A GPU's <pci> function: the link ends at its <gpu>.
        for (int c : topo_.node(to).children) {
          if (topo_.node(c).kind == NodeKind::gpu) to = c;
        }
      } else if (parse_hex(&tclass) >> 8 == 0x0680) {
        auto [it2, fresh] = nvswitches.try_emplace(target, -1);
        if (fresh) {
          it2->second = topo_.add_node(NodeKind::nvswitch, machine, "NVSwitch " + target);
          topo_.node(it2->second).implicit = true;
          topo_.node(it2->second).set_attribute("busid", target);
        }
        to = it2->second;
      } else {
        throw Error(ErrorCategory::config, fmt::format("{}:{}: <nvlink> target {} is not a PCI device in this file",
                                                       source_, pending.line, target));
      }
      topo_.add_link(pending.gpu, to, LinkType::nvlink, count * nvlink_bandwidth(topo_.node(pending.gpu)), count)
          .attributes = pending.attributes;
    }
    // <c2c bw="MB/s per link" count="links">: the GPU's chip-to-chip link
    // to the CPU it sits beside (Grace Hopper, Grace Blackwell).
    for (const auto& pending : c2cs_) {
      int count = 1;
      double mbps = 0;
      for (const auto& [k, v] : pending.attributes) {
        if (k == "count") count = std::max(1, std::atoi(v.c_str()));
        if (k == "bw") mbps = std::strtod(v.c_str(), nullptr);
      }
      int cpu = pending.gpu;
      while (cpu >= 0 && topo_.node(cpu).kind != NodeKind::package)
        cpu = topo_.node(cpu).parent;
      if (cpu < 0) continue;
      topo_.add_link(pending.gpu, cpu, LinkType::c2c, count * mbps / 1000.0, count).attributes = pending.attributes;
    }
  }

  std::string_view text_;
  LineIndex lines_;
  std::string_view source_;
  const LoadOptions& options_;
  Topology topo_;
  std::vector<PendingNvlink> nvlinks_;
  std::vector<PendingNvlink> c2cs_;
  // What it did not know: the first line it was met on, and how often.
  std::map<std::string, std::pair<int, int>> unknown_;
};

void write_attributes(std::ostringstream& out, const std::vector<std::pair<std::string, std::string>>& attributes) {
  for (const auto& [k, v] : attributes)
    out << ' ' << k << "=\"" << xml_escape(v) << '"';
}

class NcclWriter {
 public:
  explicit NcclWriter(const Topology& t) : t_(t) {}

  std::string write() {
    const auto machines = t_.of_kind(NodeKind::machine);
    out_ << "<system";
    if (!machines.empty() && t_.node(machines.front()).attribute("version")) {
      write_attributes(out_, t_.node(machines.front()).attributes);
    } else {
      out_ << " version=\"1\"";
    }
    out_ << ">\n";
    const auto packages = t_.of_kind(NodeKind::package);
    for (std::size_t i = 0; i < packages.size(); ++i) {
      const Node& p = t_.node(packages[i]);
      out_ << "  <cpu";
      // A file's <cpu> as it was (NCCL dumps of Grace machines carry no
      // numaid); hwloc's packages have theirs, or their index.
      if (p.attribute("numaid") || (p.origin == Origin::declared && !p.attributes.empty())) {
        write_attributes(out_, p.attributes);
      } else {
        out_ << " numaid=\"" << p.index << '"';
      }
      out_ << ">\n";
      for (int c : p.children)
        device(c, 2);
      // hwloc may hang host bridges off the machine; NCCL wants a <cpu>.
      if (i == 0 && !machines.empty()) {
        for (int c : t_.node(machines.front()).children) {
          if (t_.node(c).kind == NodeKind::host_bridge) device(c, 2);
        }
      }
      for (const auto& kept : p.kept_xml)
        out_ << "    " << kept << "\n";
      out_ << "  </cpu>\n";
    }
    if (!machines.empty()) {
      for (const auto& kept : t_.node(machines.front()).kept_xml)
        out_ << "  " << kept << "\n";
    }
    out_ << "</system>\n";
    return out_.str();
  }

 private:
  void device(int id, int depth) {
    const Node& n = t_.node(id);
    const std::string pad(static_cast<std::size_t>(depth) * 2, ' ');
    std::string element;
    if (n.kind == NodeKind::host_bridge) {
      for (int c : n.children)
        device(c, depth);
      return;
    }
    if (n.attribute("busid") && n.kind != NodeKind::nvswitch) {
      element = "pci";
    } else if (n.kind == NodeKind::gpu) {
      element = "gpu";
    } else if (n.kind == NodeKind::nic) {
      element = "nic";
    } else if (n.kind == NodeKind::net) {
      element = "net";
    } else {
      return;  // cores, NUMA nodes: not part of NCCL's schema
    }
    if (n.implicit) return;
    out_ << pad << '<' << element;
    write_attributes(out_, n.attributes);
    std::vector<const Link*> nvlinks;
    if (element == "gpu") {
      for (const auto& l : t_.links()) {
        if ((l.type == LinkType::nvlink || l.type == LinkType::c2c) && l.a == id && !l.attributes.empty())
          nvlinks.push_back(&l);
      }
    }
    bool any = !nvlinks.empty() || !n.kept_xml.empty();
    for (int c : n.children) {
      const Node& k = t_.node(c);
      if (k.kind == NodeKind::pci_switch || k.kind == NodeKind::pci_device || k.kind == NodeKind::gpu ||
          k.kind == NodeKind::nic || k.kind == NodeKind::net) {
        any = true;
      }
    }
    if (!any) {
      out_ << "/>\n";
      return;
    }
    out_ << ">\n";
    // A NIC known by its PCI function (hwloc) holds its network devices in
    // the <nic> element NCCL expects between <pci> and <net>.
    const bool wrap = element == "pci" && n.kind == NodeKind::nic;
    if (wrap) out_ << pad << "  <nic>\n";
    for (int c : n.children)
      device(c, depth + (wrap ? 2 : 1));
    if (wrap) out_ << pad << "  </nic>\n";
    for (const Link* l : nvlinks) {
      out_ << pad << (l->type == LinkType::c2c ? "  <c2c" : "  <nvlink");
      write_attributes(out_, l->attributes);
      out_ << "/>\n";
    }
    for (const auto& kept : n.kept_xml)
      out_ << pad << "  " << kept << "\n";
    out_ << pad << "</" << element << ">\n";
  }

  const Topology& t_;
  std::ostringstream out_;
};

}  // namespace

double nvlink_bandwidth(int sm) {
  // What a collective sees per link, as NCCL models it.
  if (sm >= 100) return 40.0;
  if (sm >= 90) return 20.6;
  if (sm == 86 || sm == 87 || sm == 89) return 12.0;
  if (sm >= 70) return 20.0;
  if (sm >= 60) return 18.0;
  return 20.0;
}

Topology read_nccl_document(std::string_view text, std::string_view source, const pugi::xml_node& root,
                            const LoadOptions& options) {
  return NcclReader(text, source, options).read(root);
}

Topology Topology::from_nccl_xml(std::string_view text, std::string_view source_name, const LoadOptions& options) {
  pugi::xml_document doc;
  const pugi::xml_node root = parse_xml(doc, text, source_name);
  if (std::string_view(root.name()) != "system") {
    throw Error(ErrorCategory::config, fmt::format("{}:{}: root element <{}> is not NCCL's <system>", source_name,
                                                   line_of(text, root.offset_debug()), root.name()));
  }
  return read_nccl_document(text, source_name, root, options);
}

std::string Topology::to_nccl_xml() const {
  return NcclWriter(*this).write();
}

}  // namespace ringmaster::topo

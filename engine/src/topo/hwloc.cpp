// hwloc: discovery of this machine and hwloc XML files, both read through
// one walk of hwloc's object tree into our graph.
#include <fmt/format.h>
#include <hwloc.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <memory>
#include <optional>
#include <pugixml.hpp>
#include <unordered_map>
#include <vector>

#include "base/log.h"
#include "ringmaster/status.h"
#include "ringmaster/tools/topology.h"
#include "topo/pci.h"
#include "topo/xml.h"

namespace ringmaster::topo {
namespace {

// An enum field of an hwloc object as the integer it holds. hwloc keeps
// what an XML file says there (bridge_type="2-1"), in or out of the
// enum's range, and loading an out-of-range value as the enum is
// undefined (found by fuzz_topology_xml under UBSan).
template <class Enum>
int enum_value(const Enum& field) noexcept {
  static_assert(sizeof(Enum) == sizeof(int));
  int value = 0;
  std::memcpy(&value, &field, sizeof(value));
  return value;
}

struct TopologyDeleter {
  void operator()(hwloc_topology* t) const { hwloc_topology_destroy(t); }
};
using HwlocTopology = std::unique_ptr<hwloc_topology, TopologyDeleter>;

// NCCL's affinity mask: 32-bit hex words, most significant first.
std::string nccl_mask(hwloc_const_bitmap_t set) {
  if (!set || hwloc_bitmap_iszero(set)) return "";
  const int last = hwloc_bitmap_last(set);
  if (last < 0) return "";
  std::string out;
  for (int word = last / 32; word >= 0; --word) {
    std::uint32_t bits = 0;
    for (int b = 0; b < 32; ++b) {
      if (hwloc_bitmap_isset(set, static_cast<unsigned>(word * 32 + b))) bits |= 1u << b;
    }
    out += fmt::format("{}{:08x}", out.empty() ? "" : ",", bits);
  }
  return out;
}

std::string busid(unsigned domain, unsigned bus, unsigned dev, unsigned func) {
  return fmt::format("{:04x}:{:02x}:{:02x}.{:x}", domain, bus, dev, func);
}

const char* info(hwloc_obj_t obj, const char* name) {
  const char* v = hwloc_obj_get_info_by_name(obj, name);
  return v ? v : nullptr;
}

class HwlocReader {
 public:
  HwlocReader(hwloc_topology_t hw, Topology& topo) : hw_(hw), topo_(topo) {}

  void read() {
    hwloc_obj_t root = hwloc_get_root_obj(hw_);
    const int machine = topo_.add_node(NodeKind::machine, -1, "Machine");
    if (const char* host = info(root, "HostName")) topo_.node(machine).set_attribute("hostname", host);
    if (const char* arch = info(root, "Architecture")) arch_ = arch;
    walk_children(root, machine, false);
    read_nvlinks();
  }

 private:
  // The NUMA node(s) attached to an object, through memory-side caches.
  static bool holds_numa(hwloc_obj_t obj) {
    for (hwloc_obj_t c = obj->memory_first_child; c; c = c->next_sibling) {
      if (c->type == HWLOC_OBJ_NUMANODE || (c->type == HWLOC_OBJ_MEMCACHE && holds_numa(c))) return true;
    }
    return false;
  }
  static bool numa_below(hwloc_obj_t obj) {
    for (hwloc_obj_t c = obj->first_child; c; c = c->next_sibling) {
      if (holds_numa(c) || numa_below(c)) return true;
    }
    return false;
  }

  void walk_children(hwloc_obj_t obj, int parent, bool in_domain) {
    for (hwloc_obj_t c = obj->memory_first_child; c; c = c->next_sibling)
      walk(c, parent, in_domain);
    for (hwloc_obj_t c = obj->first_child; c; c = c->next_sibling)
      walk(c, parent, in_domain);
    for (hwloc_obj_t c = obj->io_first_child; c; c = c->next_sibling)
      walk(c, parent, in_domain);
  }

  // Our packages are NCCL's <cpu>: one NUMA domain each, the object hwloc
  // attaches a NUMA node to. That is the Package on most machines, a Group
  // holding several packages on others (then the packages are looked
  // through), or a Die or Group inside a package with sub-NUMA clusters.
  // Where the NUMA node hangs off the machine itself, each Package is one.
  int add_domain(hwloc_obj_t obj, int parent) {
    const bool is_package = obj->type == HWLOC_OBJ_PACKAGE;
    const int numa = obj->nodeset ? hwloc_bitmap_first(obj->nodeset) : -1;
    const int id = topo_.add_node(
        NodeKind::package, parent,
        is_package ? fmt::format("Package {}", obj->os_index)
                   : (numa >= 0 ? fmt::format("NUMA {} ({})", numa, hwloc_obj_type_string(obj->type)) : "NUMA ?"));
    Node& n = topo_.node(id);
    n.index = is_package ? static_cast<int>(obj->os_index) : numa;
    if (numa >= 0) n.set_attribute("numaid", std::to_string(numa));
    if (auto mask = nccl_mask(obj->cpuset); !mask.empty()) n.set_attribute("affinity", mask);
    if (!arch_.empty()) n.set_attribute("arch", arch_);
    // The CPU's identity is on the Package, at or below a domain.
    hwloc_obj_t cpu = obj;
    while (cpu && cpu->type != HWLOC_OBJ_PACKAGE && cpu->arity > 0)
      cpu = cpu->first_child;
    if (cpu && cpu->type != HWLOC_OBJ_PACKAGE) cpu = hwloc_get_ancestor_obj_by_type(hw_, HWLOC_OBJ_PACKAGE, obj);
    if (cpu) {
      if (const char* v = info(cpu, "CPUVendor")) n.set_attribute("vendor", v);
      if (const char* v = info(cpu, "CPUFamilyNumber")) n.set_attribute("familyid", v);
      if (const char* v = info(cpu, "CPUModelNumber")) n.set_attribute("modelid", v);
      if (const char* v = info(cpu, "CPUModel")) n.set_attribute("model", v);
    }
    return id;
  }

  void walk(hwloc_obj_t obj, int parent, bool in_domain) {
    if (!in_domain && obj->type != HWLOC_OBJ_MACHINE && obj->type != HWLOC_OBJ_NUMANODE && holds_numa(obj)) {
      const int id = add_domain(obj, parent);
      walk_children(obj, id, true);
      return;
    }
    switch (obj->type) {
      case HWLOC_OBJ_PACKAGE: {
        if (in_domain || numa_below(obj)) {
          walk_children(obj, parent, in_domain);  // the domain is around it, or inside it
          return;
        }
        const int id = add_domain(obj, parent);
        walk_children(obj, id, true);
        return;
      }
      case HWLOC_OBJ_NUMANODE: {
        const int id = topo_.add_node(NodeKind::numa, parent, fmt::format("NUMANode {}", obj->os_index));
        topo_.node(id).index = static_cast<int>(obj->os_index);
        if (obj->attr) topo_.node(id).set_attribute("local_memory", std::to_string(obj->attr->numanode.local_memory));
        return;
      }
      case HWLOC_OBJ_CORE: {
        const int id = topo_.add_node(NodeKind::core, parent, fmt::format("Core {}", obj->os_index));
        topo_.node(id).index = static_cast<int>(obj->os_index);
        const int pus = obj->cpuset ? hwloc_bitmap_weight(obj->cpuset) : 1;
        topo_.node(id).set_attribute("pus", std::to_string(pus));
        return;
      }
      case HWLOC_OBJ_PU:
        return;  // counted by its core
      case HWLOC_OBJ_BRIDGE: {
        const auto& b = obj->attr->bridge;
        int id = -1;
        if (enum_value(b.upstream_type) == HWLOC_OBJ_BRIDGE_HOST) {
          id = topo_.add_node(NodeKind::host_bridge, parent, "HostBridge");
        } else {
          const auto& p = b.upstream.pci;
          const std::string bus = busid(p.domain, p.bus, p.dev, p.func);
          id = topo_.add_node(NodeKind::pci_switch, parent, "PCISwitch " + bus);
          set_pci(topo_.node(id), p);
        }
        walk_children(obj, id, in_domain);
        return;
      }
      case HWLOC_OBJ_PCI_DEVICE: {
        const auto& p = obj->attr->pcidev;
        const int id = topo_.add_node(NodeKind::pci_device, parent, "PCI " + busid(p.domain, p.bus, p.dev, p.func));
        Node& n = topo_.node(id);
        set_pci(n, p);
        n.kind = kind_of_pci(static_cast<std::uint32_t>(p.class_id) << 8, p.vendor_id);
        // hwloc names NVSwitches whose PCI identity it could not read.
        if (obj->subtype && std::string_view(obj->subtype) == "NVSwitch") n.kind = NodeKind::nvswitch;
        if (n.kind == NodeKind::nvswitch) n.name = "NVSwitch " + busid(p.domain, p.bus, p.dev, p.func);
        ids_[obj] = id;
        walk_children(obj, id, in_domain);
        return;
      }
      case HWLOC_OBJ_OS_DEVICE: {
        const int type = enum_value(obj->attr->osdev.type);
        const std::string name = obj->name ? obj->name : "";
        Node& up = topo_.node(parent);
        if (type == HWLOC_OBJ_OSDEV_NETWORK || type == HWLOC_OBJ_OSDEV_OPENFABRICS) {
          if (up.kind == NodeKind::pci_device) up.kind = NodeKind::nic;
          const int id = topo_.add_node(NodeKind::net, parent, name);
          topo_.node(id).set_attribute("name", name);
          if (const char* addr = info(obj, "Address")) topo_.node(id).set_attribute("address", addr);
        } else if ((type == HWLOC_OBJ_OSDEV_GPU || type == HWLOC_OBJ_OSDEV_COPROC) &&
                   (name.rfind("cuda", 0) == 0 || name.rfind("nvml", 0) == 0)) {
          if (up.kind == NodeKind::pci_device) up.kind = NodeKind::gpu;
          up.set_attribute(name.rfind("cuda", 0) == 0 ? "cuda" : "nvml", name);
          ids_[obj] = parent;
        }
        return;
      }
      default:
        walk_children(obj, parent, in_domain);  // groups, dies, caches: look through them
    }
  }

  // hwloc's NVML backend gives NVLinks as a bandwidth matrix between GPUs
  // (their nvml OS devices) and NVSwitches (PCI devices), in MB/s: each
  // link adds 20,000 (NVLink 1), 25,000 (2 to 4) or 50,000 (5) both ways.
  void read_nvlinks() {
    unsigned count = 1;
    hwloc_distances_s* matrix = nullptr;
    if (hwloc_distances_get_by_name(hw_, "NVLinkBandwidth", &count, &matrix, 0) != 0 || count == 0 || !matrix) return;
    const unsigned n = matrix->nbobjs;
    for (unsigned i = 0; i < n; ++i) {
      for (unsigned j = i + 1; j < n; ++j) {
        const auto mbps = std::max(matrix->values[i * n + j], matrix->values[j * n + i]);
        const auto a = ids_.find(matrix->objs[i]), b = ids_.find(matrix->objs[j]);
        if (mbps == 0 || a == ids_.end() || b == ids_.end() || a->second == b->second) continue;
        const auto links = static_cast<int>(mbps % 25000 == 0   ? mbps / 25000
                                            : mbps % 20000 == 0 ? mbps / 20000
                                                                : std::max<std::uint64_t>(1, (mbps + 12500) / 25000));
        topo_.add_link(a->second, b->second, LinkType::nvlink, static_cast<double>(mbps) / 1000.0, links);
      }
    }
    hwloc_distances_release(hw_, matrix);
  }

  template <class PciAttr>
  static void set_pci(Node& n, const PciAttr& p) {
    n.set_attribute("busid", busid(p.domain, p.bus, p.dev, p.func));
    n.set_attribute("class", fmt::format("0x{:04x}00", p.class_id));
    n.set_attribute("vendor", fmt::format("0x{:04x}", p.vendor_id));
    n.set_attribute("device", fmt::format("0x{:04x}", p.device_id));
    n.set_attribute("subsystem_vendor", fmt::format("0x{:04x}", p.subvendor_id));
    n.set_attribute("subsystem_device", fmt::format("0x{:04x}", p.subdevice_id));
    if (p.linkspeed > 0) n.set_attribute("link_bw", fmt::format("{:g}", p.linkspeed));
  }

  hwloc_topology_t hw_;
  Topology& topo_;
  std::string arch_;
  std::unordered_map<hwloc_obj_t, int> ids_;  // GPUs' OS devices and PCI devices: their nodes
};

HwlocTopology make_topology() {
  hwloc_topology_t raw = nullptr;
  if (hwloc_topology_init(&raw) != 0) {
    throw Error(ErrorCategory::internal, fmt::format("hwloc_topology_init failed: {}", std::strerror(errno)));
  }
  return HwlocTopology(raw);
}

}  // namespace

Topology Topology::discover() {
  auto hw = make_topology();
  hwloc_topology_set_io_types_filter(hw.get(), HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
  // Linux's own backend reads the PCI tree from sysfs; the libpciaccess
  // plugin adds nothing there, costs 5 ms and never frees its globals.
  hwloc_topology_set_components(hw.get(), HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, "pci");
  // The GL plugin opens X displays (a TCP connect that hangs where traffic
  // is dropped) to name GPUs' screens; nothing here needs it.
  hwloc_topology_set_components(hw.get(), HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, "gl");
  if (hwloc_topology_load(hw.get()) != 0) {
    throw Error(ErrorCategory::internal,
                fmt::format("hwloc could not discover this machine: {}", std::strerror(errno)));
  }
  char host[256] = {};
  ::gethostname(host, sizeof(host) - 1);
  Topology topo(fmt::format("hwloc discovery of {}", host), Origin::discovered);
  HwlocReader(hw.get(), topo).read();
  topo.finish();
  RM_INFO(graph, "Topology {}", topo.summary());
  return topo;
}

namespace {

// A bitmap as hwloc writes one: "0xf...f" (all), or 0x-hex words of at
// most 8 digits separated by commas (an empty word between two commas is
// a zero), after an optional "0xf...f,". hwloc 2.9 asserts on anything
// else (a leading empty word aborted the process).
bool is_hwloc_bitmap(std::string_view text) {
  constexpr std::string_view kAll = "0xf...f";
  if (text == kAll) return true;
  if (text.starts_with(kAll)) {
    if (text.size() == kAll.size() || text[kAll.size()] != ',') return false;
    text.remove_prefix(kAll.size() + 1);
  }
  // hwloc writes a zero word as nothing ("0xffffff00,,0x0"), but its
  // reader asserts on a bitmap that starts with a comma.
  if (text.starts_with(',')) return false;
  for (;;) {
    const auto comma = text.find(',');
    const std::string_view word = text.substr(0, comma);
    if (word.empty() && comma != std::string_view::npos) {
      text.remove_prefix(comma + 1);
      continue;
    }
    if (word.size() < 3 || word.size() > 10 || !word.starts_with("0x")) return false;
    for (const char c : word.substr(2)) {
      if (!std::isxdigit(static_cast<unsigned char>(c))) return false;
    }
    if (comma == std::string_view::npos) return true;
    text.remove_prefix(comma + 1);
  }
}

// More processors or NUMA nodes than any machine has (Linux's NR_CPUS
// tops out at 8192): a bitmap this wide is 128 KiB.
constexpr unsigned kMaxOsIndex = 1u << 20;

// A decimal number and nothing else ("12", not "12x", "-1" or "").
std::optional<std::size_t> whole_number(std::string_view text) {
  std::size_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

// What hwloc 2.9 trusts an XML file to be, as its export writes it, checked
// here first, without recursion: bitmaps, PUs' and NUMA nodes' os_index,
// both or neither of a set and its complete one, and the size of distance
// matrices. Each of them stopped or swelled the process inside
// hwloc_topology_load (found by fuzz_topology_xml).
void check_what_hwloc_trusts(const pugi::xml_node& root, std::string_view text, std::string_view source) {
  std::vector<pugi::xml_node> pending = {root};
  std::vector<pugi::xml_node> matrices;
  std::size_t objects = 0;
  while (!pending.empty()) {
    const pugi::xml_node node = pending.back();
    pending.pop_back();
    for (const pugi::xml_node child : node.children())
      pending.push_back(child);
    const std::string_view element = node.name();
    if (element.starts_with("distances")) matrices.push_back(node);
    // Objects' sets, and those of <cpukind> and memory attributes'
    // initiators, go through the same bitmap parser.
    for (const pugi::xml_attribute attribute : node.attributes()) {
      const std::string_view name = attribute.name();
      if ((name.ends_with("cpuset") || name.ends_with("nodeset")) && !is_hwloc_bitmap(attribute.value())) {
        const std::string what = element == "object"
                                     ? fmt::format("<object type=\"{}\">", node.attribute("type").value())
                                     : fmt::format("<{}>", element);
        throw Error(ErrorCategory::config,
                    fmt::format("{}:{}: {} {} is not an hwloc bitmap (0x-hex words separated by commas)", source,
                                line_of(text, node.offset_debug()), what, name));
      }
    }
    if (element != "object") continue;
    ++objects;
    // A PU's or NUMA node's os_index is a bit in hwloc's cpusets and
    // nodesets: without one hwloc takes "unknown" (2^32 - 1) and allocates a
    // 512 MiB bitmap to hold that bit (found by fuzz_topology_xml: a 3 KiB
    // file took 535 MB). hwloc always writes it for these two types.
    const std::string_view type = node.attribute("type").value();
    if (type == "PU" || type == "NUMANode") {
      const std::string_view index = node.attribute("os_index").value();
      const auto value = whole_number(index);
      if (!value || *value >= kMaxOsIndex) {
        throw Error(ErrorCategory::config,
                    fmt::format("{}:{}: <object type=\"{}\"> needs an os_index below {} (has {})", source,
                                line_of(text, node.offset_debug()), type, kMaxOsIndex,
                                index.empty() ? std::string("none") : fmt::format("\"{}\"", index)));
      }
    }
    for (const char* set : {"cpuset", "nodeset"}) {
      const std::string complete = std::string("complete_") + set;
      const bool has_set = !node.attribute(set).empty();
      const bool has_complete = !node.attribute(complete.c_str()).empty();
      if (has_set != has_complete) {
        throw Error(ErrorCategory::config,
                    fmt::format("{}:{}: <object type=\"{}\"> has {} but not {}; hwloc writes both", source,
                                line_of(text, node.offset_debug()), node.attribute("type").value(),
                                has_set ? set : complete, has_set ? complete : set));
      }
    }
  }
  // A distance matrix (<distances> in 1.x files, <distances2> and
  // <distances2hetero> in 2.x) names nbobjs of the file's objects and
  // writes nbobjs^2 values; hwloc allocates the matrix from nbobjs before
  // reading them (found by fuzz_topology_xml: nbobjs="20000" asked for
  // 3.2 GB). A count the file cannot hold is refused.
  for (const pugi::xml_node& node : matrices) {
    const std::string_view count = node.attribute("nbobjs").value();
    const auto value = whole_number(count);
    if (!value || *value > objects || *value * *value > text.size()) {
      throw Error(ErrorCategory::config,
                  fmt::format("{}:{}: <{}> nbobjs=\"{}\" is not a matrix this file holds ({} objects, {} bytes)",
                              source, line_of(text, node.offset_debug()), node.name(), count, objects, text.size()));
    }
  }
}

}  // namespace

Topology read_hwloc_xml(std::string_view text, std::string_view source) {
  // hwloc reports problems on stderr without a line; check what we can
  // name first. hwloc 2.x reads its own 2.x files and 1.x ones.
  pugi::xml_document doc;
  const pugi::xml_node root = parse_xml(doc, text, source);
  if (std::string_view(root.name()) != "topology") {
    throw Error(ErrorCategory::config, fmt::format("{}:{}: root element <{}> is not hwloc's <topology>", source,
                                                   line_of(text, root.offset_debug()), root.name()));
  }
  const std::string version = root.attribute("version").value();
  if (!version.empty() && std::atoi(version.c_str()) > HWLOC_API_VERSION >> 16) {
    throw Error(ErrorCategory::config,
                fmt::format("{}:{}: hwloc XML version {} is newer than this hwloc reads (versions 1.x and {}.x)",
                            source, line_of(text, root.offset_debug()), version, HWLOC_API_VERSION >> 16));
  }
  check_what_hwloc_trusts(root, text, source);
  auto hw = make_topology();
  hwloc_topology_set_io_types_filter(hw.get(), HWLOC_TYPE_FILTER_KEEP_ALL);
  // The whole machine the file describes, not only what the process that
  // wrote it was allowed to use (its allowed_cpuset).
  hwloc_topology_set_flags(hw.get(), HWLOC_TOPOLOGY_FLAG_INCLUDE_DISALLOWED);
  const std::string copy(text);  // hwloc wants a NUL-terminated buffer
  if (hwloc_topology_set_xmlbuffer(hw.get(), copy.c_str(), static_cast<int>(copy.size() + 1)) != 0 ||
      hwloc_topology_load(hw.get()) != 0) {
    throw Error(ErrorCategory::config,
                fmt::format("{}: hwloc could not read this XML ({}); check it with `lstopo --if xml --input {}`",
                            source, std::strerror(errno), source));
  }
  Topology topo(std::string(source), Origin::declared);
  HwlocReader(hw.get(), topo).read();
  topo.finish();
  topo.check_board_nvlinks(false);
  return topo;
}

Topology Topology::from_hwloc_xml(std::string_view text, std::string_view source_name) {
  return read_hwloc_xml(text, source_name);
}

std::string hwloc_library_version() {
  const unsigned v = hwloc_get_api_version();
  return fmt::format("{}.{}.{}", v >> 16, (v >> 8) & 0xff, v & 0xff);
}

}  // namespace ringmaster::topo

#include "models/topology_layout.h"

#include <QFontMetricsF>
#include <QStringList>
#include <algorithm>
#include <cmath>
#include <map>
#include <utility>

namespace ringmaster::ui {

bool is_container(const QString& kind) {
  return kind == "machine" || kind == "package" || kind == "host_bridge" || kind == "pci_switch" ||
         kind == "group_open";
}

// The font a box's label is drawn in: bold for what matters most.
QFont label_font(const QFont& base, const QString& kind) {
  QFont f = base;
  f.setPointSizeF(8.5);
  f.setBold(kind == "package" || kind == "machine" || kind == "gpu" || kind == "group");
  return f;
}

// A container says what it is on one line at its top, cut to its width;
// a device says it in the middle, wrapped.
QRectF label_area(const TopologyBox& b) {
  return is_container(b.kind) ? b.rect.adjusted(6, 3, -4, 0) : b.rect.adjusted(3, 2, -3, -2);
}
int label_flags(const TopologyBox& b) {
  return is_container(b.kind) ? Qt::AlignLeft | Qt::AlignTop : Qt::AlignCenter | Qt::TextWordWrap;
}
QString label_text(const TopologyBox& b, const QFontMetricsF& fm) {
  return is_container(b.kind) ? fm.elidedText(b.label, Qt::ElideRight, label_area(b).width()) : b.label;
}
// Where the label's ink is, in drawing units.
QRectF label_rect(const TopologyBox& b, const QFont& base) {
  const QFontMetricsF fm(label_font(base, b.kind));
  return fm.boundingRect(label_area(b), label_flags(b), label_text(b, fm));
}

namespace {

constexpr double kPad = kTopologyGap;
constexpr double kHeader = 22;
constexpr double kLeafW = 150;
constexpr double kLeafH = 48;
constexpr int kGroupFrom = 3;  // alike neighbours collapsed from this many

using agent::TopologyNode;

QString s(const std::string& text) {
  return QString::fromStdString(text);
}
QString attr(const TopologyNode& n, const char* key) {
  return QString::fromStdString(n.attribute(key));
}

// "0000:4f:00.0" → "4f:00.0": the domain is the same on every node here.
QString short_bus(const QString& busid) {
  return busid.startsWith("0000:") ? busid.mid(5) : busid;
}

// hwloc's and NCCL's CPU mask ("00000000,0000ffff,ffffffff", most
// significant word first) as a list of ranges: "0-47".
QString cpu_list(const QString& mask) {
  if (mask.isEmpty()) return {};
  std::vector<int> cpus;
  const QStringList words = mask.split(',');
  int base = 0;
  for (auto w = words.rbegin(); w != words.rend(); ++w, base += 32) {
    bool ok = false;
    const unsigned long bits = w->trimmed().toULong(&ok, 16);
    if (!ok) return {};
    for (int b = 0; b < 32; ++b)
      if (bits & (1UL << b)) cpus.push_back(base + b);
  }
  QStringList ranges;
  for (std::size_t i = 0; i < cpus.size();) {
    std::size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1)
      ++j;
    ranges << (i == j ? QString::number(cpus[i]) : QString("%1-%2").arg(cpus[i]).arg(cpus[j]));
    i = j + 1;
  }
  return ranges.join(',');
}

// A PCI link as people say it: "Gen5 x16" (from NCCL's "32.0 GT/s PCIe"
// and width), or hwloc's bandwidth.
QString pci_link(const TopologyNode& n) {
  const QString width = attr(n, "link_width"), speed = attr(n, "link_speed");
  if (!width.isEmpty() || !speed.isEmpty()) {
    const double gts = speed.section(' ', 0, 0).toDouble();
    const int gen = gts >= 60 ? 6 : gts >= 30 ? 5 : gts >= 15 ? 4 : gts >= 7.5 ? 3 : gts >= 4.5 ? 2 : gts > 0 ? 1 : 0;
    return QString("%1x%2").arg(gen > 0 ? QString("Gen%1 ").arg(gen) : QString(), width.isEmpty() ? "?" : width);
  }
  const QString bw = attr(n, "link_bw");
  return bw.isEmpty() ? QString() : QString("%1 GB/s").arg(bw.toDouble(), 0, 'f', 1);
}

QString pci_ids(const TopologyNode& n) {
  const QString v = attr(n, "vendor"), d = attr(n, "device");
  if (v.isEmpty() || d.isEmpty()) return {};
  return QString("[%1:%2]").arg(v.startsWith("0x") ? v.mid(2) : v, d.startsWith("0x") ? d.mid(2) : d);
}

// Megabits per second as a NIC's speed is said: "100 Gb/s".
QString link_speed(double mbps) {
  if (mbps <= 0) return {};
  if (mbps >= 1000) return QString("%1 Gb/s").arg(mbps / 1000, 0, 'g', 4);
  return QString("%1 Mb/s").arg(mbps, 0, 'g', 4);
}

// One box to be, before it has a place.
struct Item {
  TopologyBox box;
  std::vector<Item> children;
  QStringList switches;  // a chain of PCIe switches drawn as one box
  QString alike;         // what makes neighbours alike enough to collapse; empty: never
  QString short_name;    // in a group's label
  QPointF at;            // place within the parent
  QSizeF size;
};

class Builder {
 public:
  Builder(const agent::TopologyInfo& topology, const std::set<int>& expanded)
      : topology_(topology), expanded_(expanded) {}

  std::vector<Item> roots() {
    std::vector<Item> out;
    for (const auto& n : topology_.nodes) {
      if (n.parent >= 0) continue;
      if (auto item = build(n.id)) out.push_back(std::move(*item));
    }
    return out;
  }

 private:
  const TopologyNode& node(int id) const { return topology_.node(id); }
  static const std::vector<int>& children_of(const TopologyNode& n) { return n.children; }
  static bool is_device(const std::string& kind) { return kind == "gpu" || kind == "nic" || kind == "nvswitch"; }

  // A device's box; `pci` is the PCI function it sits on when that is a
  // node of its own (NCCL's files), else the device itself (hwloc's).
  Item device(int id, const TopologyNode& pci) {
    const TopologyNode& n = node(id);
    const std::string& kind = n.kind;
    Item item;
    item.box = TopologyBox{id, QString::fromStdString(kind), {}, {}, {}, 0, n.origin == "declared", {}, {}};
    const QString busid = attr(pci, "busid").isEmpty() ? attr(n, "busid") : attr(pci, "busid");
    const QString link = pci_link(pci).isEmpty() ? pci_link(n) : pci_link(pci);
    QStringList details;
    if (!busid.isEmpty()) details << "PCI " + busid;
    if (!link.isEmpty()) details << "link " + link;
    if (kind == "gpu") {
      // The engine's name for it, from the PCI device id wherever the file
      // puts it (the GPU, or the <pci> function above it).
      const QString model = !n.model.empty() ? s(n.model) : attr(n, "model");
      const QString sm = attr(n, "sm");
      const QString what = !model.isEmpty() ? model : !sm.isEmpty() ? "sm_" + sm : pci_ids(n);
      item.box.label = s(n.name) + (what.isEmpty() ? "" : "\n" + what) + (link.isEmpty() ? "" : " · " + link);
      if (!attr(n, "nvml").isEmpty()) details << "NVML " + attr(n, "nvml");
    } else if (kind == "nic") {
      QStringList nets;
      double mbps = 0;
      for (int c : children_of(n)) {
        const TopologyNode& k = node(c);
        if (k.kind != "net") continue;
        nets << s(k.name);
        mbps = std::max(mbps, attr(k, "speed").toDouble());
        details << QString("%1: %2 (port %3, GPUDirect %4)")
                       .arg(s(k.name), link_speed(attr(k, "speed").toDouble()), attr(k, "port"),
                            attr(k, "gdr") == "1" ? "yes" : "no");
      }
      item.short_name = nets.isEmpty() ? s(n.name) : nets.join(", ");
      item.box.label = s(n.name) + (nets.isEmpty() ? "" : " " + nets.join(", ")) +
                       (mbps > 0 ? "\n" + link_speed(mbps) : "") + (link.isEmpty() ? "" : " · " + link);
      item.alike = "nic " + link_speed(mbps);
    } else {  // nvswitch
      item.short_name = short_bus(busid);
      item.box.label = "NVSwitch\n" + short_bus(busid);
      item.alike = "nvswitch";
    }
    item.box.tooltip = s(n.name) + "\n" + details.join("\n");
    return item;
  }

  std::optional<Item> build(int id) {
    const TopologyNode& n = node(id);
    const std::string& kind = n.kind;
    if (is_device(kind)) return device(id, n);
    if (kind == "pci_device") {
      const auto kids = children_of(n);
      if (kids.size() == 1 && is_device(node(kids[0]).kind)) return device(kids[0], n);
      Item item;
      const QString ids = pci_ids(n);
      item.box = TopologyBox{id,
                             "pci_device",
                             "PCI " + short_bus(attr(n, "busid")) + (ids.isEmpty() ? "" : "\n" + ids),
                             s(n.name),
                             {},
                             0,
                             n.origin == "declared",
                             {},
                             {}};
      item.short_name = short_bus(attr(n, "busid"));
      item.alike = "pci " + ids;
      return item;
    }
    if (kind != "machine" && kind != "package" && kind != "host_bridge" && kind != "pci_switch") return std::nullopt;

    Item item;
    item.box = TopologyBox{id, QString::fromStdString(kind), {}, {}, {}, 0, n.origin == "declared", {}, {}};
    if (kind == "package") {
      // Cores and NUMA nodes: one summary box.
      int cores = 0, pus = 0, numa = 0;
      double memory = 0;
      for (int c : children_of(n)) {
        const TopologyNode& k = node(c);
        const std::string& ck = k.kind;
        if (ck == "core") {
          ++cores;
          pus += std::max(1, attr(k, "pus").toInt());
        }
        if (ck == "numa") {
          ++numa;
          memory += attr(k, "local_memory").toDouble();
        }
      }
      if (cores > 0 || numa > 0) {
        QStringList parts;
        if (numa > 0) {
          parts << QString("%1 NUMA node%2").arg(numa).arg(numa == 1 ? "" : "s") +
                       (memory > 0 ? QString(", %1 GiB").arg(memory / (1 << 30), 0, 'f', 0) : "");
        }
        if (cores > 0) parts << QString("%1 cores, %2 PUs").arg(cores).arg(pus);
        Item summary;
        summary.box = TopologyBox{-1, "cores", parts.join("\n"), {}, {}, 0, item.box.declared, {}, {}};
        item.children.push_back(std::move(summary));
      }
    }
    for (int c : children_of(n)) {
      if (auto child = build(c)) item.children.push_back(std::move(*child));
    }
    if (kind == "pci_switch") {
      const QString me = short_bus(attr(n, "busid"));
      if (item.children.empty()) return std::nullopt;
      if (item.children.size() == 1 && item.children.front().box.kind == "pci_switch") {
        Item chain = std::move(item.children.front());  // a chain with one branch: one box
        chain.switches.prepend(me);
        return chain;
      }
      if (item.children.size() == 1 && !is_container(item.children.front().box.kind)) {
        Item device = std::move(item.children.front());  // a switch for one device: the device
        device.box.tooltip += "\nbehind PCIe switch " + attr(n, "busid");
        return device;
      }
      item.switches.prepend(me);
      item.box.tooltip = "PCIe switch " + attr(n, "busid") + " " + pci_ids(n) + "\nlink " + pci_link(n);
    } else if (kind == "package") {
      QStringList header = {s(n.name)};
      if (!attr(n, "numaid").isEmpty())
        header << (attr(n, "numaid") == "-1" ? QString("NUMA unknown") : "NUMA " + attr(n, "numaid"));
      const QString cpus = cpu_list(attr(n, "affinity"));
      if (!cpus.isEmpty()) header << "CPUs " + cpus;
      const QString model = attr(n, "model").isEmpty() ? attr(n, "vendor") : attr(n, "model");
      item.box.tooltip = header.join(" · ") + (model.isEmpty() ? "" : "\n" + model);
      if (!model.isEmpty()) header << model;
      item.box.label = header.join(" · ");
    } else if (kind == "host_bridge") {
      item.box.label = n.implicit ? "Host bridge (implied)" : "Host bridge";
    } else {
      const QString host = attr(n, "hostname");
      item.box.label = host.isEmpty() ? "Machine" : "Machine " + host;
    }
    group_alike(item);
    return item;
  }

  // Three or more alike devices side by side become one box, unless that
  // group was expanded, when they get a frame that collapses them again.
  void group_alike(Item& parent) {
    std::vector<Item> out;
    auto& kids = parent.children;
    for (std::size_t i = 0; i < kids.size();) {
      std::size_t j = i + 1;
      while (j < kids.size() && !kids[i].alike.isEmpty() && kids[j].alike == kids[i].alike)
        ++j;
      if (j - i < kGroupFrom) {
        for (; i < j; ++i)
          out.push_back(std::move(kids[i]));
        continue;
      }
      Item group;
      const Item& first = kids[i];
      const Item& last = kids[j - 1];
      const QString what = first.box.kind == "nic" ? "NIC" : first.box.kind == "nvswitch" ? "NVSwitch" : "PCI device";
      QStringList tips;
      std::vector<int> members;
      for (std::size_t k = i; k < j; ++k) {
        members.push_back(kids[k].box.node);
        tips << kids[k].box.label.section('\n', 0, 0);
      }
      const bool open = expanded_.count(first.box.node) > 0;
      // "rdmap79s0…82s0": the last without the letters both begin with.
      QString tail = last.short_name;
      int common = 0;
      while (common < first.short_name.size() && common < tail.size() && first.short_name[common] == tail[common])
        ++common;
      while (common > 0 && first.short_name[common - 1].isDigit())
        --common;
      tail = tail.mid(common);
      QString label = QString("%1 × %2\n%3…%4").arg(j - i).arg(what, first.short_name, tail);
      const QString speed = first.alike.section(' ', 1);  // "nic 100 Gb/s"
      if (first.box.kind == "nic" && !speed.isEmpty()) label += "\n" + speed + " each";
      group.box =
          TopologyBox{open ? -1 : first.box.node,
                      open ? "group_open" : "group",
                      open ? QString(label).replace('\n', ' ').section(" each", 0, 0) + " (click to collapse)" : label,
                      tips.join("\n") + (open ? "" : "\n(click or Enter to expand)"),
                      {},
                      0,
                      first.box.declared,
                      members,
                      first.box.kind};
      if (open) {
        for (std::size_t k = i; k < j; ++k)
          group.children.push_back(std::move(kids[k]));
      }
      out.push_back(std::move(group));
      i = j;
    }
    kids = std::move(out);
  }

  const agent::TopologyInfo& topology_;
  const std::set<int>& expanded_;
};

// Sizes every box and places children within their parent, in rows that
// wrap where the drawing comes out largest in a view of `aspect` (width
// over height). A container of containers also tries its children drawn
// narrower or wider, so that two packages can sit side by side.
void measure(Item& item, double aspect) {
  if (!is_container(item.box.kind)) {
    item.size = {kLeafW, kLeafH};
    return;
  }
  const auto place_rows = [&](double limit, bool commit) {
    double x = kPad, y = kHeader, row_h = 0, widest = 0;
    for (auto& c : item.children) {
      if (x > kPad && x + c.size.width() > limit) {
        y += row_h + kPad;
        x = kPad;
        row_h = 0;
      }
      if (commit) c.at = {x, y};
      x += c.size.width() + kPad;
      widest = std::max(widest, x);
      row_h = std::max(row_h, c.size.height());
    }
    return QSizeF(std::max(widest, kLeafW + 2 * kPad), y + row_h + kPad);
  };
  const bool nested =
      std::any_of(item.children.begin(), item.children.end(), [](const Item& c) { return is_container(c.box.kind); });
  std::vector<double> tries = {aspect};
  if (nested && item.children.size() > 1) tries = {aspect, aspect / 2, aspect / 3, aspect * 2};
  double best_score = -1, best_limit = 0, best_try = aspect;
  for (const double t : tries) {
    for (auto& c : item.children)
      measure(c, t);
    // Each way of breaking the first row is a candidate width.
    double running = kPad;
    for (const auto& c : item.children) {
      running += c.size.width() + kPad;
      const QSizeF sz = place_rows(running, false);
      const double score = std::min(aspect / sz.width(), 1.0 / sz.height());  // the scale it would be drawn at
      if (score > best_score * (1 + 1e-9)) {
        best_score = score;
        best_limit = running;
        best_try = t;
      }
    }
  }
  if (best_try != tries.back()) {
    for (auto& c : item.children)
      measure(c, best_try);
  }
  item.size = place_rows(best_limit, true);
}

void emit_boxes(const Item& item, QPointF origin, int depth, std::vector<TopologyBox>& out) {
  TopologyBox box = item.box;
  box.rect = QRectF(origin, item.size);
  box.depth = depth;
  if (box.kind == "pci_switch") {
    const auto n = item.switches.size();
    box.label = n == 1 ? "PCIe switch " + item.switches.front()
                : n == 2
                    ? "PCIe " + item.switches.join(" → ")
                    : QString("PCIe %1 → … → %2 (%3 switches)").arg(item.switches.front(), item.switches.back()).arg(n);
    box.tooltip = "PCIe switches " + item.switches.join(" → ") + "\n" + box.tooltip;
  }
  out.push_back(box);
  for (const auto& c : item.children)
    emit_boxes(c, origin + c.at, depth + 1, out);
}

}  // namespace

std::vector<TopologyBox> layout_topology(const agent::TopologyInfo& topology, QSizeF* size,
                                         const std::set<int>& expanded, double aspect) {
  // The roots side by side (normally one machine).
  std::vector<Item> roots = Builder(topology, expanded).roots();
  for (auto& c : roots)
    measure(c, aspect);
  std::vector<TopologyBox> boxes;
  double x = 0, height = 0;
  for (const auto& c : roots) {
    emit_boxes(c, {x, 0}, 0, boxes);
    x += c.size.width() + kPad;
    height = std::max(height, c.size.height());
  }
  if (size) *size = QSizeF(std::max(0.0, x - kPad), height);
  return boxes;
}

}  // namespace ringmaster::ui

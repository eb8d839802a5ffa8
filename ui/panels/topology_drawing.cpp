#include "topology_drawing.h"

#include <QAccessible>
#include <QHelpEvent>
#include <QKeyEvent>
#include <QMouseEvent>
#include <QPainter>
#include <QPainterPath>
#include <QToolTip>
#include <QWheelEvent>
#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <utility>

namespace ringmaster::ui {

using nlohmann::json;

namespace {

constexpr double kPad = 8;
constexpr double kHeader = 22;
constexpr double kLeafW = 150;
constexpr double kLeafH = 48;
constexpr int kGroupFrom = 3;  // alike neighbours collapsed from this many
constexpr double kMostZoom = 12;
constexpr double kLegend = 20;

QString s(const json& j, const char* key) {
  const auto it = j.find(key);
  return it != j.end() && it->is_string() ? QString::fromStdString(it->get<std::string>()) : QString();
}
QString attr(const json& n, const char* key) {
  const auto it = n.find("attributes");
  return it == n.end() ? QString() : s(*it, key);
}

bool is_container(const QString& kind) {
  return kind == "machine" || kind == "package" || kind == "host_bridge" || kind == "pci_switch" ||
         kind == "group_open";
}

QColor fill_of(const QString& kind) {
  if (kind == "machine") return QColor(0xfa, 0xfa, 0xfa);
  if (kind == "package") return QColor(0xe8, 0xea, 0xf6);
  if (kind == "host_bridge") return QColor(0xff, 0xf8, 0xe1);
  if (kind == "pci_switch") return QColor(0xe1, 0xf5, 0xfe);
  if (kind == "group_open") return QColor(0xff, 0xf3, 0xe0);
  if (kind == "gpu") return QColor(0xa5, 0xd6, 0xa7);
  if (kind == "nic") return QColor(0xff, 0xcc, 0x80);
  if (kind == "nvswitch") return QColor(0x80, 0xcb, 0xc4);
  if (kind == "cores" || kind == "numa") return QColor(0xd1, 0xc4, 0xe9);
  return QColor(0xee, 0xee, 0xee);
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
QString pci_link(const json& n) {
  const QString width = attr(n, "link_width"), speed = attr(n, "link_speed");
  if (!width.isEmpty() || !speed.isEmpty()) {
    const double gts = speed.section(' ', 0, 0).toDouble();
    const int gen = gts >= 60 ? 6 : gts >= 30 ? 5 : gts >= 15 ? 4 : gts >= 7.5 ? 3 : gts >= 4.5 ? 2 : gts > 0 ? 1 : 0;
    return QString("%1x%2").arg(gen > 0 ? QString("Gen%1 ").arg(gen) : QString(), width.isEmpty() ? "?" : width);
  }
  const QString bw = attr(n, "link_bw");
  return bw.isEmpty() ? QString() : QString("%1 GB/s").arg(bw.toDouble(), 0, 'f', 1);
}

QString pci_ids(const json& n) {
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
  Builder(const json& topology, const std::set<int>& expanded)
      : nodes_(topology.value("nodes", json::array())), expanded_(expanded) {}

  std::vector<Item> roots() {
    std::vector<Item> out;
    for (std::size_t i = 0; i < nodes_.size(); ++i) {
      if (nodes_[i].value("parent", -1) >= 0) continue;
      if (auto item = build(static_cast<int>(i))) out.push_back(std::move(*item));
    }
    return out;
  }

 private:
  const json& node(int id) const { return nodes_[static_cast<std::size_t>(id)]; }
  std::vector<int> children_of(const json& n) const {
    std::vector<int> out;
    for (const auto& c : n.value("children", json::array())) {
      if (c.is_number_integer() && c.get<int>() >= 0 && c.get<int>() < static_cast<int>(nodes_.size()))
        out.push_back(c.get<int>());
    }
    return out;
  }
  static bool is_device(const std::string& kind) { return kind == "gpu" || kind == "nic" || kind == "nvswitch"; }

  // A device's box; `pci` is the PCI function it sits on when that is a
  // node of its own (NCCL's files), else the device itself (hwloc's).
  Item device(int id, const json& pci) {
    const json& n = node(id);
    const std::string kind = n.value("kind", "");
    Item item;
    item.box = TopologyBox{id, QString::fromStdString(kind), {}, {}, {}, 0, s(n, "origin") == "declared", {}, {}};
    const QString busid = attr(pci, "busid").isEmpty() ? attr(n, "busid") : attr(pci, "busid");
    const QString link = pci_link(pci).isEmpty() ? pci_link(n) : pci_link(pci);
    QStringList details;
    if (!busid.isEmpty()) details << "PCI " + busid;
    if (!link.isEmpty()) details << "link " + link;
    if (kind == "gpu") {
      // The engine's name for it, from the PCI device id wherever the file
      // puts it (the GPU, or the <pci> function above it).
      const QString model = !s(n, "model").isEmpty() ? s(n, "model") : attr(n, "model");
      const QString sm = attr(n, "sm");
      const QString what = !model.isEmpty() ? model : !sm.isEmpty() ? "sm_" + sm : pci_ids(n);
      item.box.label = s(n, "name") + (what.isEmpty() ? "" : "\n" + what) + (link.isEmpty() ? "" : " · " + link);
      if (!attr(n, "nvml").isEmpty()) details << "NVML " + attr(n, "nvml");
    } else if (kind == "nic") {
      QStringList nets;
      double mbps = 0;
      for (int c : children_of(n)) {
        const json& k = node(c);
        if (k.value("kind", "") != "net") continue;
        nets << s(k, "name");
        mbps = std::max(mbps, attr(k, "speed").toDouble());
        details << QString("%1: %2 (port %3, GPUDirect %4)")
                       .arg(s(k, "name"), link_speed(attr(k, "speed").toDouble()), attr(k, "port"),
                            attr(k, "gdr") == "1" ? "yes" : "no");
      }
      item.short_name = nets.isEmpty() ? s(n, "name") : nets.join(", ");
      item.box.label = s(n, "name") + (nets.isEmpty() ? "" : " " + nets.join(", ")) +
                       (mbps > 0 ? "\n" + link_speed(mbps) : "") + (link.isEmpty() ? "" : " · " + link);
      item.alike = "nic " + link_speed(mbps);
    } else {  // nvswitch
      item.short_name = short_bus(busid);
      item.box.label = "NVSwitch\n" + short_bus(busid);
      item.alike = "nvswitch";
    }
    item.box.tooltip = s(n, "name") + "\n" + details.join("\n");
    return item;
  }

  std::optional<Item> build(int id) {
    const json& n = node(id);
    const std::string kind = n.value("kind", "");
    if (is_device(kind)) return device(id, n);
    if (kind == "pci_device") {
      const auto kids = children_of(n);
      if (kids.size() == 1 && is_device(node(kids[0]).value("kind", ""))) return device(kids[0], n);
      Item item;
      const QString ids = pci_ids(n);
      item.box = TopologyBox{id,
                             "pci_device",
                             "PCI " + short_bus(attr(n, "busid")) + (ids.isEmpty() ? "" : "\n" + ids),
                             s(n, "name"),
                             {},
                             0,
                             s(n, "origin") == "declared",
                             {},
                             {}};
      item.short_name = short_bus(attr(n, "busid"));
      item.alike = "pci " + ids;
      return item;
    }
    if (kind != "machine" && kind != "package" && kind != "host_bridge" && kind != "pci_switch") return std::nullopt;

    Item item;
    item.box = TopologyBox{id, QString::fromStdString(kind), {}, {}, {}, 0, s(n, "origin") == "declared", {}, {}};
    if (kind == "package") {
      // Cores and NUMA nodes: one summary box.
      int cores = 0, pus = 0, numa = 0;
      double memory = 0;
      for (int c : children_of(n)) {
        const json& k = node(c);
        const std::string ck = k.value("kind", "");
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
      QStringList header = {s(n, "name")};
      if (!attr(n, "numaid").isEmpty())
        header << (attr(n, "numaid") == "-1" ? QString("NUMA unknown") : "NUMA " + attr(n, "numaid"));
      const QString cpus = cpu_list(attr(n, "affinity"));
      if (!cpus.isEmpty()) header << "CPUs " + cpus;
      const QString model = attr(n, "model").isEmpty() ? attr(n, "vendor") : attr(n, "model");
      item.box.tooltip = header.join(" · ") + (model.isEmpty() ? "" : "\n" + model);
      if (!model.isEmpty()) header << model;
      item.box.label = header.join(" · ");
    } else if (kind == "host_bridge") {
      item.box.label = n.value("implicit", false) ? "Host bridge (implied)" : "Host bridge";
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

  const json nodes_;
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

std::vector<TopologyBox> layout_topology(const json& topology, QSizeF* size, const std::set<int>& expanded,
                                         double aspect) {
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

TopologyDrawing::TopologyDrawing(QWidget* parent) : QWidget(parent) {
  setObjectName("topologyDrawing");
  setMinimumHeight(120);
  setFocusPolicy(Qt::StrongFocus);
  setMouseTracking(false);
  setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Expanding);  // never widens the window
  setAccessibleName("Topology drawing");
  setAccessibleDescription(
      "Arrows move between devices; Enter opens the device in the tree or expands a group; + and - zoom, 0 fits.");
}

void TopologyDrawing::set_topology(const json& topology) {
  topology_ = topology;
  expanded_.clear();
  zoom_ = 1;
  pan_ = {};
  selected_ = -1;
  relayout();
}

void TopologyDrawing::relayout() {
  const double aspect =
      std::clamp(static_cast<double>(std::max(width(), 1)) / std::max(height() - kLegend, 1.0), 0.5, 6.0);
  const int selected_node = selected_ >= 0 ? boxes_[static_cast<std::size_t>(selected_)].node : -1;
  boxes_ = layout_topology(topology_, &size_, expanded_, aspect);
  laid_out_for_ = aspect;
  index_devices();
  selected_ = -1;
  for (std::size_t i = 0; i < boxes_.size() && selected_node >= 0; ++i) {
    if (boxes_[i].node == selected_node) selected_ = static_cast<int>(i);
  }
  update();
}

void TopologyDrawing::resizeEvent(QResizeEvent*) {
  if (topology_.is_null()) return;
  const double aspect = static_cast<double>(std::max(width(), 1)) / std::max(height() - kLegend, 1.0);
  if (std::abs(std::log(aspect / laid_out_for_)) > 0.15) relayout();
}

QTransform TopologyDrawing::to_widget() const {
  if (size_.width() <= 0 || size_.height() <= 0) return {};
  // The legend takes the bottom kLegend pixels.
  // Fitted, but on a large screen no larger than twice the layout's
  // size: text twice the window's reads well from afar; more only
  // wastes the room (zoom is there for that).
  const double fit = std::min({(width() - 8) / size_.width(), (height() - kLegend - 8) / size_.height(), 2.0});
  const double scale = std::max(1e-3, fit * zoom_);
  const double ox = (width() - size_.width() * scale) / 2 + pan_.x();
  const double oy = (height() - kLegend - size_.height() * scale) / 2 + pan_.y();
  return QTransform().translate(ox, oy).scale(scale, scale);
}

void TopologyDrawing::set_zoom(double zoom, QPointF about) {
  const QPointF anchor = to_widget().inverted().map(about);
  zoom_ = std::clamp(zoom, 1.0, kMostZoom);
  pan_ = {};
  if (zoom_ > 1) pan_ = about - to_widget().map(anchor);
  update();
}

int TopologyDrawing::box_at(QPointF widget_point) const {
  const QPointF at = to_widget().inverted().map(widget_point);
  // The innermost box under the point: children come after parents.
  for (int i = static_cast<int>(boxes_.size()) - 1; i >= 0; --i) {
    if (boxes_[static_cast<std::size_t>(i)].rect.contains(at)) return i;
  }
  return -1;
}

void TopologyDrawing::toggle_group(int index) {
  if (index < 0 || index >= static_cast<int>(boxes_.size())) return;
  const auto& b = boxes_[static_cast<std::size_t>(index)];
  if (b.members.empty()) return;
  const int key = b.members.front();
  if (!expanded_.erase(key)) expanded_.insert(key);
  relayout();
  // The group (or its frame) stays selected.
  for (std::size_t i = 0; i < boxes_.size(); ++i) {
    if (!boxes_[i].members.empty() && boxes_[i].members.front() == key) select(static_cast<int>(i));
  }
}

void TopologyDrawing::select(int box) {
  selected_ = box;
  if (box >= 0) {
    const auto& b = boxes_[static_cast<std::size_t>(box)];
    setAccessibleDescription(QString("%1: %2").arg(b.kind, QString(b.label).replace('\n', ' ')));
    QAccessibleEvent changed(this, QAccessible::DescriptionChanged);
    QAccessible::updateAccessibility(&changed);
  }
  update();
}

void TopologyDrawing::keyPressEvent(QKeyEvent* event) {
  switch (event->key()) {
    case Qt::Key_Plus:
    case Qt::Key_Equal:
      set_zoom(zoom_ * 1.25, rect().center());
      return;
    case Qt::Key_Minus:
      set_zoom(zoom_ / 1.25, rect().center());
      return;
    case Qt::Key_0:
      set_zoom(1, rect().center());
      return;
    default:
      break;
  }
  // Devices only (the leaves), in drawing order: containers hold them.
  std::vector<int> devices;
  for (std::size_t i = 0; i < boxes_.size(); ++i)
    if (!is_container(boxes_[i].kind)) devices.push_back(static_cast<int>(i));
  if (devices.empty()) {
    QWidget::keyPressEvent(event);
    return;
  }
  const auto at = std::find(devices.begin(), devices.end(), selected_);
  const int i = at == devices.end() ? -1 : static_cast<int>(at - devices.begin());
  const int last = static_cast<int>(devices.size()) - 1;
  switch (event->key()) {
    case Qt::Key_Right:
    case Qt::Key_Down:
      select(devices[static_cast<std::size_t>(std::min(i + 1, last))]);
      return;
    case Qt::Key_Left:
    case Qt::Key_Up:
      select(devices[static_cast<std::size_t>(std::max(i - 1, 0))]);
      return;
    case Qt::Key_Home:
      select(devices.front());
      return;
    case Qt::Key_End:
      select(devices.back());
      return;
    case Qt::Key_Return:
    case Qt::Key_Enter:
    case Qt::Key_Space: {
      if (selected_ < 0) select(devices.front());
      const auto& b = boxes_[static_cast<std::size_t>(selected_)];
      if (!b.members.empty()) {
        toggle_group(selected_);
      } else if (b.node >= 0) {
        emit device_activated(b.node);
      }
      return;
    }
    default:
      QWidget::keyPressEvent(event);
  }
}

void TopologyDrawing::mousePressEvent(QMouseEvent* event) {
  pressed_at_ = event->position();
  pan_at_press_ = pan_;
  dragging_ = false;
}

void TopologyDrawing::mouseMoveEvent(QMouseEvent* event) {
  if (!(event->buttons() & Qt::LeftButton) || zoom_ <= 1) return;
  const QPointF moved = event->position() - pressed_at_;
  if (!dragging_ && moved.manhattanLength() < 4) return;
  dragging_ = true;
  pan_ = pan_at_press_ + moved;
  setCursor(Qt::ClosedHandCursor);
  update();
}

void TopologyDrawing::mouseReleaseEvent(QMouseEvent* event) {
  unsetCursor();
  if (dragging_) {
    dragging_ = false;
    return;
  }
  const int i = box_at(event->position());
  if (i < 0) return;
  const auto& b = boxes_[static_cast<std::size_t>(i)];
  if (!b.members.empty()) {
    toggle_group(i);
    return;
  }
  select(i);
  if (b.node >= 0) emit device_activated(b.node);
}

void TopologyDrawing::wheelEvent(QWheelEvent* event) {
  const double steps = event->angleDelta().y() / 120.0;
  if (steps == 0) return;
  set_zoom(zoom_ * std::pow(1.25, steps), event->position());
  event->accept();
}

bool TopologyDrawing::event(QEvent* e) {
  if (e->type() == QEvent::ToolTip) {
    auto* help = static_cast<QHelpEvent*>(e);
    const int i = box_at(help->pos());
    if (i >= 0 && !boxes_[static_cast<std::size_t>(i)].tooltip.isEmpty()) {
      QToolTip::showText(help->globalPos(), boxes_[static_cast<std::size_t>(i)].tooltip, this);
    } else {
      QToolTip::hideText();
    }
    return true;
  }
  return QWidget::event(e);
}

void TopologyDrawing::set_path(DevicePath path) {
  path_ = std::move(path);
  // The devices the path goes through are drawn one by one: a group
  // holding one of them opens.
  for (const auto& hop : path_.hops) {
    for (const auto* end : {&hop.from, &hop.to}) {
      const int b = box_of(*end);
      if (b < 0 || boxes_[static_cast<std::size_t>(b)].kind != "group") continue;
      expanded_.insert(boxes_[static_cast<std::size_t>(b)].members.front());
      relayout();
    }
  }
  update();
}

int TopologyDrawing::box_of(const DevicePath::End& end) const {
  if (end.kind == DevicePath::End::Kind::away || end.index < 0) return -1;
  const auto it = device_boxes_.find({end.kind == DevicePath::End::Kind::gpu, end.index});
  return it == device_boxes_.end() ? -1 : it->second;
}

void TopologyDrawing::index_devices() {
  device_boxes_.clear();
  const auto nodes = topology_.find("nodes");
  if (nodes == topology_.end() || !nodes->is_array()) return;
  // Per GPU and NIC: its own box; else the group it is collapsed into.
  for (std::size_t i = 0; i < nodes->size(); ++i) {
    const json& n = (*nodes)[i];
    const std::string kind = n.value("kind", "");
    if (kind != "gpu" && kind != "nic") continue;
    const int id = static_cast<int>(i);
    int found = -1;
    for (std::size_t b = 0; b < boxes_.size(); ++b) {
      const auto& box = boxes_[b];
      if (box.node == id) {
        found = static_cast<int>(b);
        break;
      }
      if (found < 0 && std::find(box.members.begin(), box.members.end(), id) != box.members.end())
        found = static_cast<int>(b);
    }
    if (found >= 0) device_boxes_[{kind == "gpu", n.value("index", -1)}] = found;
  }
}

void TopologyDrawing::paint_path(QPainter& p) {
  if (path_.hops.empty()) {
    if (!path_.why_empty.isEmpty()) {
      const QRectF band(0, 0, width(), p.fontMetrics().height() * 2 + 8);
      p.fillRect(band, palette().toolTipBase());
      p.setPen(palette().toolTipText().color());
      p.drawText(band.adjusted(8, 2, -8, -2), Qt::AlignLeft | Qt::AlignVCenter | Qt::TextWordWrap,
                 path_.title + ": " + path_.why_empty);
    }
    return;
  }
  const QTransform t = to_widget();
  // Where an end is drawn: its box's centre; an end on another node at
  // the edge (left when the path comes from there, right when it goes),
  // level with the hop's other end.
  auto at = [&](const DevicePath::End& end) -> std::optional<QPointF> {
    const int b = box_of(end);
    if (b < 0) return std::nullopt;
    return t.map(boxes_[static_cast<std::size_t>(b)].rect.center());
  };
  // An end on another node: just below the device the hop joins it at,
  // left of its middle when the path comes from there, right when it goes.
  auto away_at = [&](const DevicePath::End& partner, bool coming) {
    const int b = box_of(partner);
    if (b < 0) return QPointF(coming ? 14.0 : width() - 14.0, height() / 2.0);
    const QRectF r = t.mapRect(boxes_[static_cast<std::size_t>(b)].rect);
    return QPointF(std::clamp(r.center().x() + (coming ? -40.0 : 40.0), 40.0, width() - 40.0),
                   std::min(r.bottom() + 26, height() - 24.0));
  };
  const QColor colour(0xd8, 0x1b, 0x60);
  QFont small = font();
  small.setPointSizeF(8);
  p.setFont(small);
  const QFontMetricsF fm(small);
  for (std::size_t i = 0; i < path_.hops.size(); ++i) {
    const auto& hop = path_.hops[i];
    auto from = at(hop.from);
    auto to = at(hop.to);
    if (!from && !to) continue;
    const bool from_away = hop.from.kind == DevicePath::End::Kind::away;
    const bool to_away = hop.to.kind == DevicePath::End::Kind::away;
    if (!from) from = from_away ? away_at(hop.to, true) : *to;
    if (!to) to = to_away ? away_at(hop.from, false) : *from;
    // A hop between two ends in one box (collapsed devices) loops out.
    const QPointF mid = (*from + *to) / 2;
    const double bend = QLineF(*from, *to).length() < 4 ? 24 : 10 + 4.0 * static_cast<double>(i % 3);
    const QPointF control = mid + QPointF(bend, -bend);
    // Zoomed in, most of a hop lies outside the view: the curve is drawn
    // as 24 segments, only those in view (stroking whole curves thousands
    // of pixels long made frames spike to 60 ms).
    const QRectF view = QRectF(rect()).adjusted(-60, -30, 60, 30);
    if (!QPolygonF({*from, control, *to}).boundingRect().intersects(view)) continue;
    QVector<QLineF> segments;
    QPointF last = *from;
    for (int k = 1; k <= 24; ++k) {
      const double t = k / 24.0;
      const QPointF next = (1 - t) * (1 - t) * *from + 2 * (1 - t) * t * control + t * t * *to;
      if (QRectF(last, next).normalized().adjusted(-3, -3, 3, 3).intersects(view)) segments.append(QLineF(last, next));
      last = next;
    }
    p.setPen(QPen(colour, 2.5, Qt::SolidLine, Qt::RoundCap, Qt::RoundJoin));
    p.setBrush(Qt::NoBrush);
    p.drawLines(segments);
    // The arrowhead, along the curve's last tangent.
    const QLineF tangent(control, *to);
    const double angle = std::atan2(-tangent.dy(), tangent.dx());
    const QPointF tip = *to;
    QPolygonF head;
    head << tip << tip - QPointF(std::cos(angle - 0.4) * 9, -std::sin(angle - 0.4) * 9)
         << tip - QPointF(std::cos(angle + 0.4) * 9, -std::sin(angle + 0.4) * 9);
    p.setBrush(colour);
    p.drawPolygon(head);
    // The hop's number on the curve, what carries it beside.
    const QPointF on_curve = 0.25 * *from + 0.5 * control + 0.25 * *to;
    const bool badge_in_view = view.contains(on_curve);
    if (badge_in_view) {
      p.setPen(Qt::white);
      p.drawEllipse(on_curve, 8, 8);
      p.drawText(QRectF(on_curve - QPointF(8, 8), QSizeF(16, 16)), Qt::AlignCenter, QString::number(i + 1));
    }
    if (badge_in_view && !hop.label.isEmpty()) {
      const QRectF text(on_curve + QPointF(10, -7), QSizeF(fm.horizontalAdvance(hop.label) + 6, 14));
      p.fillRect(text, QColor(255, 255, 255, 210));
      p.setPen(colour.darker(130));
      p.drawText(text, Qt::AlignCenter, hop.label);
    }
    // The other node, named at the edge.
    for (const auto* end : {&hop.from, &hop.to}) {
      if (end->kind != DevicePath::End::Kind::away) continue;
      const QPointF where = end == &hop.from ? *from : *to;
      const QString name = (end == &hop.from ? "from " : "to ") + end->text;
      const double w = fm.horizontalAdvance(name) + 10;
      // Beside each other below the device: where it comes from on the
      // left, where it goes on the right.
      const QRectF pill(end == &hop.from ? std::max(2.0, where.x() - w) : std::min(where.x(), width() - w - 2),
                        where.y() - 7, w, 15);
      p.setPen(colour);
      p.setBrush(QColor(0xfc, 0xe4, 0xec));
      p.drawRoundedRect(pill, 6, 6);
      p.setPen(colour.darker(130));
      p.drawText(pill, Qt::AlignCenter, name);
    }
  }
  // Named at the bottom right, on the legend's line.
  const QString title = QString("%1: %2 hops").arg(path_.title).arg(path_.hops.size());
  const double w = fm.horizontalAdvance(title) + 16;
  const QRectF band(width() - w - 4, height() - 19, w, fm.height() + 4);
  p.fillRect(band, QColor(0xfc, 0xe4, 0xec));
  p.setPen(colour.darker(130));
  p.drawText(band, Qt::AlignCenter, title);
}

void TopologyDrawing::paintEvent(QPaintEvent*) {
  QPainter p(this);
  p.fillRect(rect(), palette().base());
  if (boxes_.empty() || size_.width() <= 0) {
    p.setPen(palette().text().color());
    p.drawText(rect(), Qt::AlignCenter, "No topology yet.");
    return;
  }
  p.setRenderHint(QPainter::Antialiasing);
  const QTransform transform = to_widget();
  p.setTransform(transform);
  // Zoomed in, most boxes are out of view: their text, laid out at the
  // zoom's size, cost the most of a frame.
  const QRectF view = transform.inverted().mapRect(QRectF(rect()));
  QFont font = p.font();
  font.setPointSizeF(8.5);
  QFont bold = font;
  bold.setBold(true);
  for (const auto& b : boxes_) {
    if (!b.rect.intersects(view)) continue;
    p.setPen(QPen(b.declared ? QColor(0xe6, 0x51, 0x00) : QColor(0x60, 0x60, 0x60), b.declared ? 1.5 : 1,
                  b.declared ? Qt::DashLine : Qt::SolidLine));
    p.setBrush(fill_of(b.kind == "group" ? b.member_kind : b.kind));
    p.drawRoundedRect(b.rect, 4, 4);
    if (b.kind == "group") {  // a stack: alike devices behind the front one
      p.setBrush(Qt::NoBrush);
      p.drawLine(b.rect.topLeft() + QPointF(4, -3), b.rect.topRight() + QPointF(-2, -3));
    }
    p.setPen(Qt::black);
    if (is_container(b.kind)) {
      p.setFont(b.kind == "package" || b.kind == "machine" ? bold : font);
      const QRectF header = b.rect.adjusted(6, 3, -4, 0);
      p.drawText(header, Qt::AlignLeft | Qt::AlignTop,
                 p.fontMetrics().elidedText(b.label, Qt::ElideRight, static_cast<int>(header.width())));
    } else {
      p.setFont(b.kind == "gpu" || b.kind == "group" ? bold : font);
      p.drawText(b.rect.adjusted(3, 2, -3, -2), Qt::AlignCenter | Qt::TextWordWrap, b.label);
    }
  }
  if (selected_ >= 0 && selected_ < static_cast<int>(boxes_.size())) {
    p.setPen(QPen(palette().highlight().color(), hasFocus() ? 3 : 2, hasFocus() ? Qt::SolidLine : Qt::DotLine));
    p.setBrush(Qt::NoBrush);
    p.drawRoundedRect(boxes_[static_cast<std::size_t>(selected_)].rect.adjusted(-2, -2, 2, 2), 5, 5);
  }
  // The legend and the path, in the view's own pixels.
  p.resetTransform();
  paint_path(p);
  p.setFont(QFont(font.family(), 8));
  double x = 6;
  const double y = height() - 18;
  for (const auto& [kind, name] : std::vector<std::pair<QString, QString>>{{"gpu", "GPU"},
                                                                           {"nic", "NIC"},
                                                                           {"nvswitch", "NVSwitch"},
                                                                           {"pci_switch", "PCIe switch"},
                                                                           {"package", "CPU package"},
                                                                           {"cores", "cores, NUMA"}}) {
    p.setPen(QColor(0x60, 0x60, 0x60));
    p.setBrush(fill_of(kind));
    p.drawRect(QRectF(x, y + 3, 10, 10));
    p.setPen(palette().text().color());
    const double w = p.fontMetrics().horizontalAdvance(name);
    p.drawText(QRectF(x + 14, y, w + 4, 16), Qt::AlignVCenter | Qt::AlignLeft, name);
    x += w + 28;
  }
  if (zoom_ > 1) {
    p.drawText(QRectF(x, y, 200, 16), Qt::AlignVCenter | Qt::AlignLeft,
               QString("zoom %1× (0 fits)").arg(zoom_, 0, 'f', 1));
  }
}

}  // namespace ringmaster::ui

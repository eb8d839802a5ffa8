#include "topology_drawing.h"

#include <QAccessible>
#include <QKeyEvent>
#include <QMouseEvent>
#include <QPainter>
#include <algorithm>
#include <functional>

namespace ringmaster::ui {

using nlohmann::json;

namespace {

constexpr double kPad = 8;
constexpr double kHeader = 20;
constexpr double kLeafW = 112;
constexpr double kLeafH = 40;

QString s(const json& j, const char* key) {
  return QString::fromStdString(j.value(key, std::string()));
}

bool is_container(const QString& kind) {
  return kind == "machine" || kind == "package" || kind == "host_bridge" || kind == "pci_switch";
}

QColor fill_of(const QString& kind) {
  if (kind == "machine") return QColor(0xfa, 0xfa, 0xfa);
  if (kind == "package") return QColor(0xe8, 0xea, 0xf6);
  if (kind == "host_bridge") return QColor(0xff, 0xf8, 0xe1);
  if (kind == "pci_switch") return QColor(0xe1, 0xf5, 0xfe);
  if (kind == "gpu") return QColor(0xa5, 0xd6, 0xa7);
  if (kind == "nic") return QColor(0xff, 0xcc, 0x80);
  if (kind == "nvswitch") return QColor(0x81, 0xc7, 0x84);
  if (kind == "cores" || kind == "numa") return QColor(0xd1, 0xc4, 0xe9);
  return QColor(0xee, 0xee, 0xee);
}

}  // namespace

std::vector<TopologyBox> layout_topology(const json& topology, QSizeF* size) {
  std::vector<TopologyBox> boxes;
  const json nodes = topology.value("nodes", json::array());
  auto node = [&](int id) -> const json& { return nodes[static_cast<std::size_t>(id)]; };

  // Returns the size of `id`'s box laid out at (x, y), appending its boxes.
  std::function<QSizeF(int, double, double, int)> place = [&](int id, double x, double y, int depth) -> QSizeF {
    const json& n = node(id);
    const QString kind = s(n, "kind");
    TopologyBox box{id, kind, s(n, "name"), {}, depth, s(n, "origin") == "declared"};
    if (kind == "gpu" || kind == "nic" || kind == "pci_device" || kind == "nvswitch") {
      const json attrs = n.value("attributes", json::object());
      QString second = s(attrs, "busid");
      if (kind == "nic") {
        QStringList nets;
        for (const auto& c : n.value("children", json::array())) {
          const json& k = node(c.get<int>());
          if (k.value("kind", "") == "net") nets << s(k, "name");
        }
        if (!nets.isEmpty()) second = nets.join(", ");
      }
      box.label = s(n, "name") + (second.isEmpty() ? "" : "\n" + second);
      box.rect = QRectF(x, y, kLeafW, kLeafH);
      boxes.push_back(box);
      return box.rect.size();
    }
    if (!is_container(kind)) return {0, 0};
    const std::size_t self = boxes.size();
    boxes.push_back(box);
    double cx = x + kPad;
    double height = 0;
    // Cores and NUMA nodes of a package: one summary box.
    int cores = 0, pus = 0, numa = 0;
    for (const auto& c : n.value("children", json::array())) {
      const json& k = node(c.get<int>());
      const std::string ck = k.value("kind", "");
      if (ck == "core") {
        ++cores;
        pus += std::atoi(k.value("attributes", json::object()).value("pus", std::string("1")).c_str());
      }
      if (ck == "numa") ++numa;
    }
    if (cores > 0 || numa > 0) {
      QStringList parts;
      if (numa > 0) parts << QString("%1 NUMA").arg(numa);
      if (cores > 0) parts << QString("%1 cores, %2 PUs").arg(cores).arg(pus);
      boxes.push_back(
          TopologyBox{-1, "cores", parts.join("\n"), QRectF(cx, y + kHeader, kLeafW, kLeafH), depth + 1, box.declared});
      cx += kLeafW + kPad;
      height = kLeafH;
    }
    for (const auto& c : n.value("children", json::array())) {
      const QSizeF child = place(c.get<int>(), cx, y + kHeader, depth + 1);
      if (child.width() <= 0) continue;
      cx += child.width() + kPad;
      height = std::max(height, child.height());
    }
    const double width = std::max(cx - x, kLeafW + 2 * kPad);
    boxes[self].rect = QRectF(x, y, width, kHeader + height + kPad);
    if (kind == "package") {
      boxes[self].label = s(n, "name");
    } else if (kind == "pci_switch") {
      boxes[self].label = "PCIe switch " + s(n.value("attributes", json::object()), "busid");
    } else if (kind == "host_bridge") {
      boxes[self].label = n.value("implicit", false) ? "Host bridge (implied)" : "Host bridge";
    } else if (kind == "machine") {
      boxes[self].label = "Machine " + s(n.value("attributes", json::object()), "hostname");
    }
    return boxes[self].rect.size();
  };

  QSizeF total(0, 0);
  double x = 0;
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    if (nodes[i].value("parent", -1) >= 0) continue;
    const QSizeF sz = place(static_cast<int>(i), x, 0, 0);
    x += sz.width() + kPad;
    total = QSizeF(x, std::max(total.height(), sz.height()));
  }
  if (size) *size = total;
  return boxes;
}

TopologyDrawing::TopologyDrawing(QWidget* parent) : QWidget(parent) {
  setObjectName("topologyDrawing");
  setMinimumHeight(160);
  setFocusPolicy(Qt::StrongFocus);
  setAccessibleName("Topology drawing");
  setAccessibleDescription("Arrows move between devices; Enter opens the device in the tree.");
}

void TopologyDrawing::set_topology(const json& topology) {
  boxes_ = layout_topology(topology, &size_);
  declared_ = topology.value("origin", "") == "declared";
  selected_ = -1;
  update();
}

QTransform TopologyDrawing::to_widget() const {
  const double scale = std::min({(width() - 8) / size_.width(), (height() - 8) / size_.height(), 1.6});
  return QTransform().translate(4, 4).scale(scale, scale);
}

void TopologyDrawing::select(int box) {
  selected_ = box;
  if (box >= 0) {
    const auto& b = boxes_[static_cast<std::size_t>(box)];
    setAccessibleDescription(QString("%1: %2").arg(b.kind, b.label));
    QAccessibleEvent changed(this, QAccessible::DescriptionChanged);
    QAccessible::updateAccessibility(&changed);
  }
  update();
}

void TopologyDrawing::keyPressEvent(QKeyEvent* event) {
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
    case Qt::Key_Space:
      if (selected_ < 0) select(devices.front());
      if (boxes_[static_cast<std::size_t>(selected_)].node >= 0)
        emit device_activated(boxes_[static_cast<std::size_t>(selected_)].node);
      return;
    default:
      QWidget::keyPressEvent(event);
  }
}

void TopologyDrawing::mousePressEvent(QMouseEvent* event) {
  if (boxes_.empty() || size_.width() <= 0) return;
  const QPointF at = to_widget().inverted().map(event->position());
  // The innermost box under the pointer: children come after parents.
  for (int i = static_cast<int>(boxes_.size()) - 1; i >= 0; --i) {
    const auto& b = boxes_[static_cast<std::size_t>(i)];
    if (!b.rect.contains(at)) continue;
    select(i);
    if (b.node >= 0) emit device_activated(b.node);
    return;
  }
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
  p.setTransform(to_widget());
  QFont font = p.font();
  font.setPointSizeF(std::max(6.0, font.pointSizeF() * 0.9));
  p.setFont(font);
  for (const auto& b : boxes_) {
    p.setPen(QPen(b.declared ? QColor(0xe6, 0x51, 0x00) : QColor(0x60, 0x60, 0x60), b.declared ? 1.5 : 1,
                  b.declared ? Qt::DashLine : Qt::SolidLine));
    p.setBrush(fill_of(b.kind));
    p.drawRoundedRect(b.rect, 4, 4);
    p.setPen(Qt::black);
    if (is_container(b.kind)) {
      p.drawText(b.rect.adjusted(6, 2, -4, 0), Qt::AlignLeft | Qt::AlignTop, b.label);
    } else {
      p.drawText(b.rect.adjusted(3, 2, -3, -2), Qt::AlignCenter | Qt::TextWordWrap, b.label);
    }
  }
  if (selected_ >= 0 && selected_ < static_cast<int>(boxes_.size())) {
    p.setPen(QPen(palette().highlight().color(), hasFocus() ? 3 : 2, hasFocus() ? Qt::SolidLine : Qt::DotLine));
    p.setBrush(Qt::NoBrush);
    p.drawRoundedRect(boxes_[static_cast<std::size_t>(selected_)].rect.adjusted(-2, -2, 2, 2), 5, 5);
  }
}

}  // namespace ringmaster::ui

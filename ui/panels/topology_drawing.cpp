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

#include "models/box_router.h"

namespace ringmaster::ui {

namespace {
constexpr double kMostZoom = 12;
constexpr double kLegend = 20;
constexpr double kStrip = 22;  // above the legend: where a path leaves for or comes from another node
constexpr double kBelow = kLegend + kStrip;
constexpr double kLane = kTopologyGap / 2;  // a route keeps this far from boxes: the middle of the gap between two
constexpr double kPad = kTopologyGap;

// A route's polyline with its corners rounded.
QPainterPath rounded(const QPolygonF& line) {
  QPainterPath curve(line.front());
  for (int k = 1; k < line.size(); ++k) {
    const QPointF corner = line[k];
    if (k + 1 == line.size()) {
      curve.lineTo(corner);
      break;
    }
    const double r =
        std::min({6.0, QLineF(line[k - 1], corner).length() / 2, QLineF(corner, line[k + 1]).length() / 2});
    const QLineF in(corner, line[k - 1]), out(corner, line[k + 1]);
    curve.lineTo(in.pointAt(r / std::max(in.length(), 1e-9)));
    curve.quadTo(corner, out.pointAt(r / std::max(out.length(), 1e-9)));
  }
  return curve;
}

// The head of an arrow along the line's last segment, its tip at the end.
QPolygonF arrowhead(const QPolygonF& line, double length) {
  const QLineF last(line[line.size() - 2], line.back());
  const double angle = std::atan2(-last.dy(), last.dx());
  const QPointF tip = line.back();
  QPolygonF head;
  head << tip << tip - QPointF(std::cos(angle - 0.45) * length, -std::sin(angle - 0.45) * length)
       << tip - QPointF(std::cos(angle + 0.45) * length, -std::sin(angle + 0.45) * length);
  return head;
}

// Where a hop's number (a circle) and, beside it, its label of `text_w`
// pixels go on its route: inside `area`, clear of everything `taken`;
// tried along each segment, the longest first, the label dropped where
// only the number fits. None where not even that fits.
struct BadgeRoom {
  QRectF circle;
  QRectF text;  // empty: the number alone
};
std::optional<BadgeRoom> find_badge_room(const QPolygonF& line, double text_w, const QRectF& area,
                                         const std::vector<QRectF>& taken) {
  std::vector<int> order(static_cast<std::size_t>(line.size() - 1));
  for (std::size_t k = 0; k < order.size(); ++k)
    order[k] = static_cast<int>(k);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    return QLineF(line[a], line[a + 1]).length() > QLineF(line[b], line[b + 1]).length();
  });
  const auto clear = [&](const QRectF& r) {
    return area.contains(r) &&
           std::none_of(taken.begin(), taken.end(), [&](const QRectF& o) { return o.intersects(r); });
  };
  for (const bool with_text : {text_w > 0, false}) {
    for (int k : order) {
      const QLineF seg(line[k], line[k + 1]);
      if (seg.length() < 18) continue;
      for (double f : {0.5, 0.3, 0.7, 0.15, 0.85}) {
        const QPointF c = seg.pointAt(f);
        BadgeRoom room{QRectF(c - QPointF(8, 8), QSizeF(16, 16)), {}};
        if (with_text) room.text = QRectF(c + QPointF(10, -7), QSizeF(text_w, 14));
        if (clear(room.circle) && (!with_text || clear(room.text))) return room;
      }
    }
  }
  return std::nullopt;
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

}  // namespace

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

void TopologyDrawing::set_topology(const agent::TopologyInfo& topology) {
  topology_ = topology;
  expanded_.clear();
  zoom_ = 1;
  pan_ = {};
  selected_ = -1;
  relayout();
}

void TopologyDrawing::relayout() {
  const double aspect =
      std::clamp(static_cast<double>(std::max(width(), 1)) / std::max(height() - kBelow, 1.0), 0.5, 6.0);
  const int selected_node = selected_ >= 0 ? boxes_[static_cast<std::size_t>(selected_)].node : -1;
  boxes_ = layout_topology(topology_, &size_, expanded_, aspect);
  laid_out_for_ = aspect;
  label_rects_.clear();
  for (const auto& b : boxes_)
    label_rects_.push_back(label_rect(b, font()));
  index_devices();
  route_path();
  selected_ = -1;
  for (std::size_t i = 0; i < boxes_.size() && selected_node >= 0; ++i) {
    if (boxes_[i].node == selected_node) selected_ = static_cast<int>(i);
  }
  update();
}

void TopologyDrawing::resizeEvent(QResizeEvent*) {
  if (topology_.empty()) return;
  const double aspect = static_cast<double>(std::max(width(), 1)) / std::max(height() - kBelow, 1.0);
  if (std::abs(std::log(aspect / laid_out_for_)) > 0.15) relayout();
}

QRectF TopologyDrawing::drawing_area() const {
  return QRectF(0, 0, width(), std::max(0.0, height() - kBelow));
}

QTransform TopologyDrawing::to_widget() const {
  if (size_.width() <= 0 || size_.height() <= 0) return {};
  // The legend and the strip above it take the bottom kBelow pixels.
  // Fitted, but on a large screen no larger than twice the layout's
  // size: text twice the window's reads well from afar; more only
  // wastes the room (zoom is there for that).
  const double fit = std::min({(width() - 8) / size_.width(), (height() - kBelow - 8) / size_.height(), 2.0});
  const double scale = std::max(1e-3, fit * zoom_);
  const double ox = (width() - size_.width() * scale) / 2 + pan_.x();
  const double oy = (height() - kBelow - size_.height() * scale) / 2 + pan_.y();
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
    if (help->pos().y() >= height() - kBelow && help->pos().y() < height() - kLegend && path_.hops.empty() &&
        !path_.why_empty.isEmpty()) {  // the strip says why the path is empty, maybe cut
      QToolTip::showText(help->globalPos(), path_.title + ": " + path_.why_empty, this);
      return true;
    }
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
  bool opened = false;
  for (const auto& hop : path_.hops) {
    for (const auto* end : {&hop.from, &hop.to}) {
      const int b = box_of(*end);
      if (b < 0 || boxes_[static_cast<std::size_t>(b)].kind != "group") continue;
      expanded_.insert(boxes_[static_cast<std::size_t>(b)].members.front());
      relayout();
      opened = true;
    }
  }
  if (!opened) route_path();  // relayout routed it
  update();
}

void TopologyDrawing::route_path() {
  routes_.assign(path_.hops.size(), {});
  if (path_.hops.empty() || boxes_.empty()) return;
  // What no route may cross: every device's box with its label, and the
  // label of every container (its header).
  std::vector<QRectF> obstacles;
  for (std::size_t i = 0; i < boxes_.size(); ++i) {
    const auto& b = boxes_[i];
    // A header's text gets room beyond the lane: a route passes a box's
    // border at the lane's width, text a little further off.
    obstacles.push_back(is_container(b.kind) ? label_rects_[i].adjusted(-kPad / 2, -kPad / 2, kPad / 2, kPad / 2)
                                             : b.rect.united(label_rects_[i]));
  }
  std::vector<int> ends;
  for (const auto& hop : path_.hops) {
    ends.push_back(box_of(hop.from));
    ends.push_back(box_of(hop.to));
  }
  BoxRouter router(std::move(obstacles), QRectF(QPointF(0, 0), size_), ends, kLane);
  for (std::size_t i = 0; i < path_.hops.size(); ++i) {
    const auto& hop = path_.hops[i];
    const int from = box_of(hop.from), to = box_of(hop.to);
    const bool from_away = hop.from.kind == DevicePath::End::Kind::away;
    const bool to_away = hop.to.kind == DevicePath::End::Kind::away;
    if (from >= 0 && to >= 0) {
      routes_[i] = router.route(from, to);
    } else if (from_away && to >= 0) {
      routes_[i] = router.route_to_strip(to, true);
    } else if (to_away && from >= 0) {
      routes_[i] = router.route_to_strip(from, false);
    }
  }
}

int TopologyDrawing::box_of(const DevicePath::End& end) const {
  if (end.kind == DevicePath::End::Kind::away || end.index < 0) return -1;
  const auto it = device_boxes_.find({end.kind == DevicePath::End::Kind::gpu, end.index});
  return it == device_boxes_.end() ? -1 : it->second;
}

void TopologyDrawing::index_devices() {
  device_boxes_.clear();
  // Per GPU and NIC: its own box; else the group it is collapsed into.
  for (const auto& n : topology_.nodes) {
    const std::string& kind = n.kind;
    if (kind != "gpu" && kind != "nic") continue;
    const int id = n.id;
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
    if (found >= 0) device_boxes_[{kind == "gpu", n.index}] = found;
  }
}

void TopologyDrawing::paint_path(QPainter& p) {
  const QColor colour(0xd8, 0x1b, 0x60);
  QFont small = font();
  small.setPointSizeF(8);
  p.setFont(small);
  const QFontMetricsF fm(small);
  // The strip between the drawing and the legend: the other nodes' ends.
  const QRectF strip(0, height() - kBelow, width(), kStrip);
  if (path_.hops.empty()) {
    if (!path_.why_empty.isEmpty()) {
      p.fillRect(strip, palette().toolTipBase());
      p.setPen(palette().toolTipText().color());
      p.drawText(strip.adjusted(8, 0, -8, 0), Qt::AlignLeft | Qt::AlignVCenter,
                 fm.elidedText(path_.title + ": " + path_.why_empty, Qt::ElideRight, strip.width() - 16));
    }
    return;
  }
  const QTransform t = to_widget();
  const QRectF view = QRectF(rect()).adjusted(-60, -30, 60, 30);
  // Where the devices and the containers' labels are on screen: the
  // numbers of the hops keep off them.
  std::vector<QRectF> taken;
  for (std::size_t b = 0; b < boxes_.size(); ++b) {
    const QRectF on =
        t.mapRect(is_container(boxes_[b].kind) ? label_rects_[b] : boxes_[b].rect.united(label_rects_[b]));
    if (on.intersects(rect())) taken.push_back(on.adjusted(-1, -1, 1, 1));  // and the edges' smoothing
  }
  // The routes run in the middle of the gaps between boxes (kLane from
  // each): drawn small, the line thins so that it stays in its lane.
  const double scale = t.m11();
  const double pen = std::clamp(2 * (kLane * scale - 1.0), 1.0, 2.5);
  std::vector<std::pair<double, QString>> pills;  // the other nodes' names: where, what
  for (std::size_t i = 0; i < path_.hops.size() && i < routes_.size(); ++i) {
    const auto& hop = path_.hops[i];
    QPolygonF line = t.map(routes_[i]);
    if (line.size() < 2) continue;
    const bool from_away = hop.from.kind == DevicePath::End::Kind::away;
    const bool to_away = hop.to.kind == DevicePath::End::Kind::away;
    // The end on another node goes on down into the strip, at its middle.
    const double strip_y = strip.center().y();
    if (from_away && line.front().y() < strip_y) line.prepend(QPointF(line.front().x(), strip_y));
    if (to_away && line.back().y() < strip_y) line.append(QPointF(line.back().x(), strip_y));
    const QPainterPath curve = rounded(line);
    if (!curve.boundingRect().intersects(view)) continue;  // zoomed in, most routes are out of view
    p.setPen(QPen(colour, pen, Qt::SolidLine, Qt::FlatCap, Qt::RoundJoin));
    p.setBrush(Qt::NoBrush);
    p.drawPath(curve);
    // The arrowhead, its tip on the box's border, no longer than the gap
    // before the box is wide.
    if (!to_away) {
      p.setPen(QPen(colour, 1));
      p.setBrush(colour);
      p.drawPolygon(arrowhead(line, std::clamp(2 * kLane * scale - 0.5, 4.0, 9.0)));
    }
    // The hop's number (and what carries it) on its route where no label
    // and no other number is.
    const double text_w = hop.label.isEmpty() ? 0 : fm.horizontalAdvance(hop.label) + 6;
    if (const auto badge = find_badge_room(line, text_w, drawing_area(), taken)) {
      p.setPen(Qt::white);
      p.setBrush(colour);
      p.drawEllipse(badge->circle);
      p.drawText(badge->circle, Qt::AlignCenter, QString::number(i + 1));
      taken.push_back(badge->circle);
      if (!badge->text.isEmpty()) {
        p.fillRect(badge->text, QColor(255, 255, 255, 210));
        p.setPen(colour.darker(130));
        p.drawText(badge->text, Qt::AlignCenter, hop.label);
        taken.push_back(badge->text);
      }
    }
    // The other node, named in the strip where the route meets it.
    for (const auto* end : {&hop.from, &hop.to}) {
      if (end->kind != DevicePath::End::Kind::away) continue;
      pills.emplace_back((end == &hop.from ? line.front() : line.back()).x(),
                         (end == &hop.from ? "from " : "to ") + end->text);
    }
  }
  // Each centred on its route, left to right, none over the one before.
  std::sort(pills.begin(), pills.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  double next_pill = 2;
  for (const auto& [x, name] : pills) {
    const double w = fm.horizontalAdvance(name) + 10;
    const QRectF pill(std::clamp(std::max(x - w / 2, next_pill), 2.0, std::max(2.0, width() - w - 2)),
                      strip.center().y() - 7.5, w, 15);
    next_pill = pill.right() + 4;
    p.setPen(colour);
    p.setBrush(QColor(0xfc, 0xe4, 0xec));
    p.drawRoundedRect(pill, 6, 6);
    p.setPen(colour.darker(130));
    p.drawText(pill, Qt::AlignCenter, name);
  }
  // Named at the bottom right, on the legend's line.
  p.setClipping(false);
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
  // Zoomed in, the drawing stops above the strip and the legend.
  p.setClipRect(drawing_area());
  const QTransform transform = to_widget();
  p.setTransform(transform);
  // Zoomed in, most boxes are out of view: their text, laid out at the
  // zoom's size, cost the most of a frame.
  const QRectF view = transform.inverted().mapRect(QRectF(rect()));
  const QFont base = font();
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
    const QFont f = label_font(base, b.kind);
    p.setFont(f);
    p.drawText(label_area(b), label_flags(b), label_text(b, QFontMetricsF(f)));
  }
  if (selected_ >= 0 && selected_ < static_cast<int>(boxes_.size())) {
    p.setPen(QPen(palette().highlight().color(), hasFocus() ? 3 : 2, hasFocus() ? Qt::SolidLine : Qt::DotLine));
    p.setBrush(Qt::NoBrush);
    p.drawRoundedRect(boxes_[static_cast<std::size_t>(selected_)].rect.adjusted(-2, -2, 2, 2), 5, 5);
  }
  // The legend and the path, in the view's own pixels.
  p.resetTransform();
  p.setClipRect(QRectF(0, 0, width(), height() - kLegend));  // a path goes on into the strip
  paint_path(p);
  p.setClipping(false);
  p.setFont(QFont(base.family(), 8));
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

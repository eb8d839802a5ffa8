#include "rings_view.h"

#include <QAccessible>
#include <QKeyEvent>
#include <QPainter>
#include <QPainterPath>
#include <algorithm>
#include <cmath>

namespace ringmaster::ui {

namespace {

constexpr double kDot = 11;  // a rank's dot's radius

// One box per agent across `area`, its ranks spread along the middle.
void place(const std::vector<int>& placement, const QRectF& area, std::vector<QRectF>& boxes,
           std::vector<QPointF>& ranks) {
  const int nodes = placement.empty() ? 0 : *std::max_element(placement.begin(), placement.end()) + 1;
  if (nodes <= 0 || area.width() <= 0) return;
  const double gap = 24;
  const double w = (area.width() - gap * (nodes - 1)) / nodes;
  for (int n = 0; n < nodes; ++n)
    boxes.emplace_back(area.left() + n * (w + gap), area.top() + 28, w, std::max(area.height() - 40, 30.0));
  std::vector<int> seen(static_cast<std::size_t>(nodes), 0), count(static_cast<std::size_t>(nodes), 0);
  for (int node : placement) {
    if (node >= 0) ++count[static_cast<std::size_t>(node)];
  }
  ranks.resize(placement.size());
  for (std::size_t r = 0; r < placement.size(); ++r) {
    const int node = placement[r];
    if (node < 0) {  // placed on no agent: drawn below, outside the boxes
      ranks[r] = QPointF(area.center().x(), area.bottom() - 4);
      continue;
    }
    const QRectF& box = boxes[static_cast<std::size_t>(node)];
    const int k = seen[static_cast<std::size_t>(node)]++;
    const int per = count[static_cast<std::size_t>(node)];
    ranks[r] = QPointF(box.left() + box.width() * (k + 1) / (per + 1), box.center().y());
  }
}

}  // namespace

RingsLayout layout_rings(const std::vector<int>& placement, const std::vector<std::vector<int>>& rings,
                         const QRectF& area, const std::vector<std::vector<int>>& trees) {
  RingsLayout out;
  const bool with_trees = !trees.empty();
  const QRectF ring_area = with_trees ? QRectF(area.left(), area.top(), area.width(), area.height() / 2) : area;
  place(placement, ring_area, out.nodes, out.ranks);
  if (out.nodes.empty()) return out;
  if (with_trees) {
    place(placement, QRectF(area.left(), area.center().y(), area.width(), area.height() / 2), out.tree_nodes,
          out.tree_ranks);
    for (std::size_t t = 0; t < trees.size(); ++t) {
      std::vector<RingsLayout::TreeEdge> edges;
      const double side = t % 2 ? 1 : -1;  // tree 0 above its edges, tree 1 below
      for (std::size_t r = 0; r < trees[t].size() && r < out.tree_ranks.size(); ++r) {
        const int up = trees[t][r];
        if (up < 0 || up >= static_cast<int>(out.tree_ranks.size())) continue;
        const QPointF parent = out.tree_ranks[static_cast<std::size_t>(up)];
        const QPointF child = out.tree_ranks[r];
        const QPointF control = (parent + child) / 2 + QPointF(0, side * (18 + std::abs(child.x() - parent.x()) / 6));
        // From the rim of one dot to the rim of the other, along the curve.
        const auto rim = [](QPointF centre, QPointF toward) {
          const QLineF l(centre, toward);
          return l.length() < 1e-9 ? centre : l.pointAt((kDot + 1) / l.length());
        };
        RingsLayout::TreeEdge e{rim(parent, control), control, rim(child, control), {}};
        const QLineF tangent(control, e.to);
        const double angle = std::atan2(-tangent.dy(), tangent.dx());
        e.head << e.to << e.to - QPointF(std::cos(angle - 0.45) * 10, -std::sin(angle - 0.45) * 10)
               << e.to - QPointF(std::cos(angle + 0.45) * 10, -std::sin(angle + 0.45) * 10);
        edges.push_back(e);
      }
      out.tree_edges.push_back(std::move(edges));
    }
  }
  for (std::size_t c = 0; c < rings.size(); ++c) {
    std::vector<QPointF> path;
    const double lift = 10.0 * static_cast<double>(c + 1);  // channels stacked above and below
    for (std::size_t i = 0; i < rings[c].size(); ++i) {
      const int r = rings[c][i];
      if (r < 0 || r >= static_cast<int>(out.ranks.size())) continue;
      path.push_back(out.ranks[static_cast<std::size_t>(r)] + QPointF(0, (c % 2 ? 1 : -1) * lift));
    }
    if (!path.empty()) path.push_back(path.front());
    out.channel_paths.push_back(std::move(path));
  }
  return out;
}

RingsLayout RingsView::current_layout() const {
  return layout_rings(run_.placement(), run_.rings(), QRectF(rect()).adjusted(12, 12, -12, -12), run_.trees());
}

QColor RingsView::tree_colour(int t) {
  return t % 2 ? QColor(0x8d, 0x6e, 0x63) : QColor(0x00, 0x83, 0x8f);
}

RingsView::RingsView(const RunState& run, QWidget* parent) : QWidget(parent), run_(run) {
  setObjectName("ringsView");
  setFocusPolicy(Qt::StrongFocus);
  setAccessibleName("Rings and trees");
  setAccessibleDescription("Arrows pick a channel; Enter shows its ring in order.");
  connect(&run_, &RunState::rings_changed, this, [this] { update(); });
  connect(&run_, &RunState::started, this, [this] {
    selected_ = -1;
    shown_detail_.clear();
    update();
  });
}

QString RingsView::channel_detail(int channel) const {
  if (channel < 0 || channel >= static_cast<int>(run_.rings().size())) return {};
  const auto& ring = run_.rings()[static_cast<std::size_t>(channel)];
  QString text = QString("channel %1:").arg(channel);
  for (std::size_t i = 0; i < ring.size(); ++i) {
    text += QString(" %1").arg(ring[i]);
    const int next = ring[(i + 1) % ring.size()];
    const QString via = run_.transport(ring[i], next);
    text += via.isEmpty() ? QString(" →") : QString(" →(%1)").arg(via);
  }
  if (!ring.empty()) text += QString(" %1").arg(ring.front());
  return text;
}

void RingsView::select(int channel) {
  selected_ = channel;
  const QString what = channel < 0 ? QString("all channels") : channel_detail(channel);
  setAccessibleDescription(what);
  QAccessibleEvent changed(this, QAccessible::DescriptionChanged);
  QAccessible::updateAccessibility(&changed);
  if (!shown_detail_.isEmpty()) shown_detail_ = channel < 0 ? QString() : what;
  update();
}

void RingsView::keyPressEvent(QKeyEvent* event) {
  const int channels = static_cast<int>(run_.rings().size());
  switch (event->key()) {
    case Qt::Key_Right:
    case Qt::Key_Down:
      if (channels > 0) select(selected_ + 1 >= channels ? -1 : selected_ + 1);
      return;
    case Qt::Key_Left:
    case Qt::Key_Up:
      if (channels > 0) select(selected_ <= -1 ? channels - 1 : selected_ - 1);
      return;
    case Qt::Key_Return:
    case Qt::Key_Enter:
    case Qt::Key_Space:
      if (selected_ < 0 && channels > 0) select(0);
      if (selected_ >= 0) {
        shown_detail_ = channel_detail(selected_);
        emit channel_activated(selected_);
        update();
      }
      return;
    case Qt::Key_Escape:
      shown_detail_.clear();
      update();
      return;
    default:
      QWidget::keyPressEvent(event);
  }
}

void RingsView::paintEvent(QPaintEvent*) {
  QPainter p(this);
  p.fillRect(rect(), palette().base());
  p.setRenderHint(QPainter::Antialiasing);
  if (run_.rings().empty()) {
    p.setPen(palette().text().color());
    p.drawText(rect(), Qt::AlignCenter, "The rings of each channel appear here once a run is connected.");
    return;
  }
  const auto layout = current_layout();
  p.setPen(QPen(palette().color(QPalette::Mid), 1));
  for (std::size_t n = 0; n < layout.nodes.size(); ++n) {
    p.setBrush(palette().alternateBase());
    p.drawRoundedRect(layout.nodes[n], 6, 6);
    p.setPen(palette().text().color());
    p.drawText(layout.nodes[n].adjusted(8, 4, -4, 0), Qt::AlignLeft | Qt::AlignTop, QString("agent %1 — rings").arg(n));
    p.setPen(QPen(palette().color(QPalette::Mid), 1));
  }
  for (std::size_t n = 0; n < layout.tree_nodes.size(); ++n) {
    p.setBrush(palette().alternateBase());
    p.drawRoundedRect(layout.tree_nodes[n], 6, 6);
    p.setPen(palette().text().color());
    p.drawText(layout.tree_nodes[n].adjusted(8, 4, -4, 0), Qt::AlignLeft | Qt::AlignTop,
               QString("agent %1 — trees").arg(n));
    p.setPen(QPen(palette().color(QPalette::Mid), 1));
  }
  // Trees: tree 0 solid teal above its edges, tree 1 dashed brown below,
  // parent to child.
  for (std::size_t t = 0; t < layout.tree_edges.size(); ++t) {
    const QColor colour = tree_colour(static_cast<int>(t));
    for (const auto& e : layout.tree_edges[t]) {
      p.setPen(QPen(colour, 2, t % 2 ? Qt::DashLine : Qt::SolidLine, Qt::FlatCap));
      p.setBrush(Qt::NoBrush);  // an arc is an open curve, not a filled chord
      QPainterPath arc(e.from);
      arc.quadTo(e.control, e.to);
      p.drawPath(arc);
      p.setPen(QPen(colour, 1));
      p.setBrush(colour);
      p.drawPolygon(e.head);
    }
    p.setPen(colour);
    const QString name = QString("tree %1 (all_reduce, parent → child)").arg(t);
    p.drawText(
        QPointF(width() - 16 - p.fontMetrics().horizontalAdvance(name), height() - 10 - 16.0 * static_cast<double>(t)),
        name);
  }
  static const QColor colors[] = {QColor(0x1e, 0x88, 0xe5), QColor(0xe5, 0x39, 0x35), QColor(0x43, 0xa0, 0x47),
                                  QColor(0xfb, 0x8c, 0x00), QColor(0x8e, 0x24, 0xaa), QColor(0x00, 0x89, 0x7b)};
  for (std::size_t c = 0; c < layout.channel_paths.size(); ++c) {
    const auto& path = layout.channel_paths[c];
    QPainterPath line;
    for (std::size_t i = 0; i < path.size(); ++i) {
      if (i == 0) {
        line.moveTo(path[i]);
      } else {
        line.lineTo(path[i]);
      }
    }
    // A picked channel stands out; the others fade.
    QColor colour = colors[c % 6];
    if (selected_ >= 0 && static_cast<int>(c) != selected_) colour.setAlpha(50);
    p.setPen(QPen(colour, static_cast<int>(c) == selected_ ? 4 : 2));
    p.setBrush(Qt::NoBrush);
    p.drawPath(line);
    p.drawText(QPointF(16, height() - 10 - 16.0 * static_cast<double>(c)), QString("channel %1").arg(c));
  }
  // What carries each hop of channel 0's ring, at the middle of the hop
  // (shared memory within a host, sockets across).
  if (!run_.rings().empty() && !layout.channel_paths.empty()) {
    const auto& ring = run_.rings()[0];
    const auto& path = layout.channel_paths[0];
    QFont small = font();
    small.setPointSizeF(small.pointSizeF() * 0.8);
    p.setFont(small);
    for (std::size_t i = 0; i + 1 < path.size() && i < ring.size(); ++i) {
      const QString via = run_.transport(ring[i], ring[(i + 1) % ring.size()]);
      if (via.isEmpty()) continue;
      // The hop that closes the ring runs back over the others: its label
      // goes below the line and names its ends.
      const bool closing = i + 1 == ring.size();
      const QPointF mid = (path[i] + path[i + 1]) / 2 + QPointF(0, closing ? 10 : -8);
      p.setPen(via == "SHM"   ? QColor(0x2e, 0x7d, 0x32)
               : via == "OFI" ? QColor(0x15, 0x65, 0xc0)
                              : QColor(0x61, 0x61, 0x61));
      p.drawText(QRectF(mid - QPointF(60, 8), QSizeF(120, 16)), Qt::AlignCenter,
                 closing ? QString("%1 → %2 %3").arg(ring[i]).arg(ring[0]).arg(via) : via);
    }
    p.setFont(font());
  }
  p.setPen(Qt::black);
  for (const auto* ranks : {&layout.ranks, &layout.tree_ranks}) {
    for (std::size_t r = 0; r < ranks->size(); ++r) {
      p.setBrush(QColor(0xff, 0xff, 0xff));
      p.drawEllipse((*ranks)[r], kDot, kDot);
      p.drawText(QRectF((*ranks)[r] - QPointF(kDot, kDot), QSizeF(2 * kDot, 2 * kDot)), Qt::AlignCenter,
                 QString::number(r));
    }
  }
  // The picked channel's ring, once Enter asked for it, on a band at the top.
  if (!shown_detail_.isEmpty()) {
    const QRectF band(0, 0, width(), p.fontMetrics().height() + 8);
    p.fillRect(band, palette().toolTipBase());
    p.setPen(palette().toolTipText().color());
    p.drawText(band.adjusted(8, 0, -8, 0), Qt::AlignLeft | Qt::AlignVCenter, shown_detail_);
  }
  if (hasFocus()) {
    p.setPen(QPen(palette().highlight().color(), 1, Qt::DashLine));
    p.setBrush(Qt::NoBrush);
    p.drawRect(rect().adjusted(1, 1, -2, -2));
  }
}

}  // namespace ringmaster::ui

#include "rings_view.h"

#include <QPainter>
#include <QPainterPath>
#include <algorithm>

namespace ringmaster::ui {

RingsLayout layout_rings(const std::vector<int>& placement, const std::vector<std::vector<int>>& rings,
                         const QRectF& area) {
  RingsLayout out;
  const int nodes = placement.empty() ? 0 : *std::max_element(placement.begin(), placement.end()) + 1;
  if (nodes <= 0 || area.width() <= 0) return out;
  const double gap = 24;
  const double w = (area.width() - gap * (nodes - 1)) / nodes;
  for (int n = 0; n < nodes; ++n)
    out.nodes.emplace_back(area.left() + n * (w + gap), area.top() + 28, w, area.height() - 40);
  std::vector<int> seen(static_cast<std::size_t>(nodes), 0), count(static_cast<std::size_t>(nodes), 0);
  for (int node : placement) {
    if (node >= 0) ++count[static_cast<std::size_t>(node)];
  }
  out.ranks.resize(placement.size());
  for (std::size_t r = 0; r < placement.size(); ++r) {
    const int node = placement[r];
    if (node < 0) {  // placed on no agent: drawn below, outside the boxes
      out.ranks[r] = QPointF(area.center().x(), area.bottom() - 4);
      continue;
    }
    const QRectF& box = out.nodes[static_cast<std::size_t>(node)];
    const int k = seen[static_cast<std::size_t>(node)]++;
    const int per = count[static_cast<std::size_t>(node)];
    out.ranks[r] = QPointF(box.left() + box.width() * (k + 1) / (per + 1), box.center().y());
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

RingsView::RingsView(const RunState& run, QWidget* parent) : QWidget(parent), run_(run) {
  setObjectName("ringsView");
  connect(&run_, &RunState::rings_changed, this, [this] { update(); });
  connect(&run_, &RunState::started, this, [this] { update(); });
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
  const auto layout = layout_rings(run_.placement(), run_.rings(), QRectF(rect()).adjusted(12, 12, -12, -12));
  p.setPen(QPen(QColor(0x75, 0x75, 0x75), 1));
  for (std::size_t n = 0; n < layout.nodes.size(); ++n) {
    p.setBrush(QColor(0xf5, 0xf5, 0xf5));
    p.drawRoundedRect(layout.nodes[n], 6, 6);
    p.drawText(layout.nodes[n].adjusted(8, 4, -4, 0), Qt::AlignLeft | Qt::AlignTop, QString("agent %1").arg(n));
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
    p.setPen(QPen(colors[c % 6], 2));
    p.setBrush(Qt::NoBrush);
    p.drawPath(line);
    p.drawText(QPointF(16, height() - 10 - 16.0 * static_cast<double>(c)), QString("channel %1").arg(c));
  }
  p.setPen(Qt::black);
  for (std::size_t r = 0; r < layout.ranks.size(); ++r) {
    p.setBrush(QColor(0xff, 0xff, 0xff));
    p.drawEllipse(layout.ranks[r], 11, 11);
    p.drawText(QRectF(layout.ranks[r] - QPointF(11, 11), QSizeF(22, 22)), Qt::AlignCenter, QString::number(r));
  }
}

}  // namespace ringmaster::ui

#include "rails_view.h"

#include <QPainter>
#include <algorithm>

namespace ringmaster::ui {

std::vector<RailBar> rail_bars(const RunState& run) {
  std::vector<RailBar> out;
  const auto series = run.bandwidth().read();
  const auto seen = series->nics();
  const int nodes = std::max(run.agents(), static_cast<int>(run.rails().size()));
  auto add = [&](int node, const QString& device) {
    const NicKey key{node, device};
    const bool used = std::find(seen.begin(), seen.end(), key) != seen.end();
    out.push_back({node, device, used ? series->nic_recent_gbs(key) : 0.0, used});
  };
  for (int node = -1; node < nodes; ++node) {
    if (node >= 0 && node < static_cast<int>(run.rails().size())) {
      for (const auto& device : run.rails()[static_cast<std::size_t>(node)])
        add(node, device);
    }
    for (const auto& key : seen) {
      if (key.node != node) continue;
      const bool listed = std::any_of(out.begin(), out.end(),
                                      [&](const RailBar& b) { return b.node == node && b.device == key.device; });
      if (!listed) add(node, key.device);
    }
  }
  return out;
}

RailsView::RailsView(const RunState& run, QWidget* parent) : QWidget(parent), run_(run) {
  setObjectName("railsView");
  setAccessibleName("Bandwidth per NIC rail");
  connect(&run_, &RunState::started, this, [this] { refresh(); });
}

void RailsView::refresh() {
  bars_ = rail_bars(run_);
  QStringList idle;
  for (const auto& b : bars_) {
    if (b.gbs <= 0) idle << b.device;
  }
  setAccessibleDescription(bars_.empty() ? QString("No NIC yet")
                                         : QString("%1 NICs, %2 idle").arg(bars_.size()).arg(idle.size()));
  update();
}

void RailsView::paintEvent(QPaintEvent*) {
  QPainter p(this);
  p.fillRect(rect(), palette().base());
  p.setPen(palette().text().color());
  if (bars_.empty()) {
    p.drawText(rect(), Qt::AlignCenter | Qt::TextWordWrap,
               "Each NIC's traffic appears here once a run's channels cross nodes.");
    return;
  }
  double top = 0.1;
  for (const auto& b : bars_)
    top = std::max(top, b.gbs);
  // Rows of bars, in as many columns as the height needs (a p5 node has 32).
  const QFontMetrics fm = p.fontMetrics();
  const int row_h = std::max(fm.height() + 2, 12);
  int headers = 0;
  for (std::size_t i = 0; i < bars_.size(); ++i)
    headers += i == 0 || bars_[i].node != bars_[i - 1].node ? 1 : 0;
  const int rows_fit = std::max(1, (height() - 8) / row_h);
  const int lines = static_cast<int>(bars_.size()) + headers;
  const int columns = std::max(1, (lines + rows_fit - 1) / rows_fit);
  const double col_w = static_cast<double>(width() - 8) / columns;
  const int label_w = std::min(static_cast<int>(col_w * 0.4), fm.horizontalAdvance("rdmap200s0 ") + 4);
  const int value_w = fm.horizontalAdvance("000.00 GB/s ");
  int line = 0;
  auto place = [&](int at) { return QPointF(4 + (at / rows_fit) * col_w, 4 + (at % rows_fit) * row_h); };
  for (std::size_t i = 0; i < bars_.size(); ++i) {
    const auto& b = bars_[i];
    if (i == 0 || b.node != bars_[i - 1].node) {
      const QPointF at = place(line++);
      QString name = b.node < 0 ? QString("rank on no agent") : QString("agent %1").arg(b.node);
      if (b.node >= 0 && b.node < static_cast<int>(run_.agent_addresses().size()))
        name += " — " + run_.agent_addresses()[static_cast<std::size_t>(b.node)];
      QFont bold = font();
      bold.setBold(true);
      p.setFont(bold);
      p.setPen(palette().text().color());
      p.drawText(QRectF(at, QSizeF(col_w - 8, row_h)), Qt::AlignLeft | Qt::AlignVCenter,
                 fm.elidedText(name, Qt::ElideRight, static_cast<int>(col_w) - 8));
      p.setFont(font());
    }
    const QPointF at = place(line++);
    p.setPen(palette().text().color());
    p.drawText(QRectF(at.x() + 8, at.y(), label_w, row_h), Qt::AlignLeft | Qt::AlignVCenter,
               fm.elidedText(b.device, Qt::ElideMiddle, label_w));
    const double bar_w = std::max(10.0, col_w - label_w - value_w - 20);
    const QRectF track(at.x() + 8 + label_w, at.y() + 2, bar_w, row_h - 4);
    p.setPen(QPen(palette().color(QPalette::Mid), 1));
    p.setBrush(Qt::NoBrush);
    p.drawRect(track);
    if (b.gbs > 0) {
      p.setPen(Qt::NoPen);
      p.setBrush(QColor(0x15, 0x65, 0xc0));
      p.drawRect(QRectF(track.topLeft(), QSizeF(track.width() * b.gbs / top, track.height())));
    }
    p.setPen(b.gbs > 0 ? palette().text().color() : QColor(0xc6, 0x28, 0x28));
    p.drawText(QRectF(track.right() + 4, at.y(), value_w, row_h), Qt::AlignLeft | Qt::AlignVCenter,
               b.gbs > 0 ? QString("%1 GB/s").arg(b.gbs, 0, 'f', 2)
               : b.used  ? QString("idle now")
                         : QString("idle"));
  }
}

}  // namespace ringmaster::ui

#include "timeline_view.h"

#include <QMouseEvent>
#include <QPainter>

namespace ringmaster::ui {

QColor stage_color(int stage) {
  static const QColor colors[] = {QColor(0x90, 0xca, 0xf9), QColor(0x64, 0xb5, 0xf6), QColor(0x42, 0xa5, 0xf5),
                                  QColor(0x1e, 0x88, 0xe5), QColor(0xa5, 0xd6, 0xa7), QColor(0x81, 0xc7, 0x84),
                                  QColor(0x66, 0xbb, 0x6a), QColor(0xff, 0xe0, 0x82), QColor(0xff, 0xb7, 0x4d),
                                  QColor(0x9e, 0x9e, 0x9e)};
  return colors[stage % 10];
}

namespace {
constexpr int kLabelWidth = 70;
constexpr int kLegendHeight = 24;
}  // namespace

TimelineView::TimelineView(const TimelineModel& model, QWidget* parent) : QWidget(parent), model_(model) {
  setObjectName("timeline");
  setMinimumHeight(120);
  connect(&model_, &QAbstractItemModel::dataChanged, this, [this] { update(); });
  connect(&model_, &QAbstractItemModel::modelReset, this, [this] { update(); });
}

QRectF TimelineView::plot_area() const {
  return QRectF(kLabelWidth, 4, std::max(10, width() - kLabelWidth - 8), std::max(10, height() - kLegendHeight - 8));
}

void TimelineView::paintEvent(QPaintEvent*) {
  QPainter p(this);
  p.fillRect(rect(), palette().base());
  const QRectF area = plot_area();
  const int ranks = model_.ranks();
  if (ranks == 0) {
    p.setPen(palette().text().color());
    p.drawText(rect(), Qt::AlignCenter, "No run yet: the init stages of every rank appear here.");
    return;
  }
  const double row_h = area.height() / ranks;
  p.setPen(palette().text().color());
  for (int r = 0; r < ranks; ++r) {
    p.drawText(QRectF(0, area.top() + r * row_h, kLabelWidth - 6, row_h), Qt::AlignRight | Qt::AlignVCenter,
               QString("rank %1").arg(r));
  }
  for (const auto& s : layout_timeline(model_, area)) {
    p.fillRect(s.rect, s.failed ? QColor(0xe5, 0x39, 0x35) : stage_color(s.stage));
    if (s.failed) {
      p.setPen(Qt::white);
      p.drawText(s.rect, Qt::AlignCenter, stage_names()[s.stage] + " FAILED");
    }
  }
  // Legend and scale.
  p.setPen(palette().text().color());
  double x = kLabelWidth;
  const double y = height() - kLegendHeight + 4;
  for (int s = 0; s < stage_names().size() && x < width(); ++s) {
    p.fillRect(QRectF(x, y + 4, 10, 10), stage_color(s));
    const QString name = stage_names()[s];
    p.drawText(QPointF(x + 13, y + 13), name);
    x += 18 + p.fontMetrics().horizontalAdvance(name);
  }
  p.drawText(QRectF(area.right() - 120, y - 2, 120, 18), Qt::AlignRight,
             QString("%1 ms").arg(model_.span_ms(), 0, 'f', 1));
}

void TimelineView::mousePressEvent(QMouseEvent* event) {
  for (const auto& s : layout_timeline(model_, plot_area())) {
    if (s.rect.adjusted(-2, 0, 2, 0).contains(event->position())) {
      emit segment_clicked(s.rank, s.stage);
      return;
    }
  }
}

}  // namespace ringmaster::ui

#include "timeline_view.h"

#include <QAccessible>
#include <QKeyEvent>
#include <QMouseEvent>
#include <QPainter>
#include <algorithm>

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
  setFocusPolicy(Qt::StrongFocus);
  setAccessibleName("Rendezvous timeline");
  setAccessibleDescription(
      "Ranks by init stage. Arrows move between stages and ranks; Enter shows the stage's detail.");
  connect(&model_, &QAbstractItemModel::dataChanged, this, [this] { update(); });
  connect(&model_, &QAbstractItemModel::modelReset, this, [this] {
    current_rank_ = current_stage_ = -1;  // a new run
    update();
  });
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
    p.fillRect(s.rect, s.failed ? QColor(0xe5, 0x39, 0x35) : s.live ? QColor(0xff, 0xb3, 0x00) : stage_color(s.stage));
    if (s.failed) {
      p.setPen(Qt::white);
      p.drawText(s.rect, Qt::AlignCenter, stage_names()[s.stage] + " FAILED");
    } else if (s.live) {
      // What the retrying connects meet, before any timeout.
      p.setPen(Qt::black);
      p.drawText(s.rect.adjusted(4, 0, -4, 0), Qt::AlignLeft | Qt::AlignVCenter | Qt::TextSingleLine,
                 p.fontMetrics().elidedText(model_.cell(s.rank, s.stage).live_text, Qt::ElideRight,
                                            static_cast<int>(s.rect.width()) - 8));
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
  // The keyboard cursor, when the view has the focus.
  if (hasFocus()) {
    for (const auto& s : layout_timeline(model_, area)) {
      if (s.rank != current_rank_ || s.stage != current_stage_) continue;
      p.setPen(QPen(palette().highlight().color(), 2, Qt::DashLine));
      p.setBrush(Qt::NoBrush);
      p.drawRect(s.rect.adjusted(-2, -1, 2, 1));
    }
  }
}

void TimelineView::set_current(int rank, int stage) {
  current_rank_ = rank;
  current_stage_ = stage;
  if (rank >= 0 && stage >= 0 && rank < model_.ranks() && stage < stage_names().size()) {
    const auto& c = model_.cell(rank, stage);
    setAccessibleDescription(QString("rank %1, %2: %3, %4 ms")
                                 .arg(rank)
                                 .arg(stage_names()[stage])
                                 .arg(!c.seen  ? "not reached"
                                      : c.live ? "retrying"
                                      : c.ok   ? "ok"
                                               : "FAILED")
                                 .arg(c.duration_ms, 0, 'f', 1));
    QAccessibleEvent changed(this, QAccessible::DescriptionChanged);
    QAccessible::updateAccessibility(&changed);
  }
  update();
}

void TimelineView::focusInEvent(QFocusEvent* event) {
  // The first segment drawn, when the cursor is on none.
  if (current_rank_ < 0) {
    const auto segments = layout_timeline(model_, plot_area());
    if (!segments.empty()) set_current(segments.front().rank, segments.front().stage);
  }
  QWidget::focusInEvent(event);
}

void TimelineView::keyPressEvent(QKeyEvent* event) {
  const auto segments = layout_timeline(model_, plot_area());
  if (segments.empty()) {
    QWidget::keyPressEvent(event);
    return;
  }
  // The stages drawn in `rank`'s row, in stage order.
  auto stages_of = [&](int rank) {
    std::vector<int> out;
    for (const auto& s : segments)
      if (s.rank == rank) out.push_back(s.stage);
    std::sort(out.begin(), out.end());
    return out;
  };
  // The stage in `rank`'s row nearest to `stage`.
  auto nearest = [&](int rank, int stage) {
    const auto stages = stages_of(rank);
    int best = stages.empty() ? -1 : stages.front();
    for (int s : stages)
      if (std::abs(s - stage) < std::abs(best - stage)) best = s;
    return best;
  };
  int rank = current_rank_ < 0 ? segments.front().rank : current_rank_;
  int stage = current_stage_ < 0 ? segments.front().stage : current_stage_;
  const auto here = stages_of(rank);
  const auto at = std::find(here.begin(), here.end(), stage);
  const int i = at == here.end() ? 0 : static_cast<int>(at - here.begin());
  switch (event->key()) {
    case Qt::Key_Left:
      if (!here.empty()) stage = here[static_cast<std::size_t>(std::max(0, i - 1))];
      break;
    case Qt::Key_Right:
      if (!here.empty())
        stage = here[static_cast<std::size_t>(std::min<int>(static_cast<int>(here.size()) - 1, i + 1))];
      break;
    case Qt::Key_Home:
      if (!here.empty()) stage = here.front();
      break;
    case Qt::Key_End:
      if (!here.empty()) stage = here.back();
      break;
    case Qt::Key_Up:
    case Qt::Key_Down: {
      // The next rank in that direction that has a segment.
      const int step = event->key() == Qt::Key_Up ? -1 : 1;
      for (int r = rank + step; r >= 0 && r < model_.ranks(); r += step) {
        if (const int s = nearest(r, stage); s >= 0) {
          rank = r;
          stage = s;
          break;
        }
      }
      break;
    }
    case Qt::Key_Return:
    case Qt::Key_Enter:
    case Qt::Key_Space:
      set_current(rank, stage);
      emit segment_clicked(rank, stage);
      return;
    default:
      QWidget::keyPressEvent(event);
      return;
  }
  set_current(rank, stage);
}

void TimelineView::mousePressEvent(QMouseEvent* event) {
  for (const auto& s : layout_timeline(model_, plot_area())) {
    if (s.rect.adjusted(-2, 0, 2, 0).contains(event->position())) {
      set_current(s.rank, s.stage);
      emit segment_clicked(s.rank, s.stage);
      return;
    }
  }
}

}  // namespace ringmaster::ui

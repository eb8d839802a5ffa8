#include "timeline_view.h"

#include <QAccessible>
#include <QKeyEvent>
#include <QMouseEvent>
#include <QPainter>
#include <QScrollArea>
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
constexpr int kGroupedLabelWidth = 110;
constexpr int kLegendLine = 18;
constexpr int kMinNodeRow = 16;  // pixels: a node's name stays readable
}  // namespace

TimelineView::TimelineView(const TimelineModel& model, QWidget* parent) : QWidget(parent), model_(model) {
  setObjectName("timeline");
  setMinimumHeight(120);
  setFocusPolicy(Qt::StrongFocus);
  setAccessibleName("Rendezvous timeline");
  setAccessibleDescription(
      "Ranks (or nodes) by init stage. Arrows move between stages and rows; Enter shows the stage's detail "
      "and opens a node's ranks, Minus closes them.");
  connect(&model_, &QAbstractItemModel::dataChanged, this, [this] { update(); });
  connect(&model_, &QAbstractItemModel::modelReset, this, [this] {
    current_ = {};  // a new run
    current_stage_ = -1;
    expanded_.assign(static_cast<std::size_t>(model_.nodes()), false);
    fit_height();
    update();
  });
  expanded_.assign(static_cast<std::size_t>(model_.nodes()), false);
  fit_height();
}

int TimelineView::label_width() const {
  return grouped() ? kGroupedLabelWidth : kLabelWidth;
}

std::vector<TimelineView::LegendItem> TimelineView::legend() const {
  const QFontMetrics fm(font());
  QFont bold = font();
  bold.setBold(true);
  const QFontMetrics bold_fm(bold);
  std::vector<LegendItem> items;
  items.push_back({-1, QString("init %1 ms").arg(model_.span_ms(), 0, 'f', 1), {}});
  for (int s = 0; s < stage_names().size(); ++s)
    items.push_back({s, stage_names()[s], {}});
  const double left = 4, right = std::max(width() - 4, 200);
  double x = left, line = 0;
  for (auto& item : items) {
    const double w =
        item.stage < 0 ? bold_fm.horizontalAdvance(item.text) + 12 : 13 + fm.horizontalAdvance(item.text) + 10;
    if (x > left && x + w > right) {
      x = left;
      ++line;
    }
    item.rect = QRectF(x, line * kLegendLine, w, kLegendLine);
    x += w;
  }
  // From the bottom of the widget up.
  const double top = height() - (line + 1) * kLegendLine - 2;
  for (auto& item : items)
    item.rect.translate(0, top);
  return items;
}

int TimelineView::legend_height() const {
  const auto items = legend();
  return items.empty() ? 0 : static_cast<int>(height() - items.front().rect.top()) + 4;
}

QRectF TimelineView::plot_area() const {
  return QRectF(label_width(), 4, std::max(10, width() - label_width() - 8),
                std::max(10, height() - legend_height() - 8));
}

void TimelineView::resizeEvent(QResizeEvent* event) {
  fit_height();
  QWidget::resizeEvent(event);
}

std::vector<TimelineRow> TimelineView::rows() const {
  return timeline_rows(model_, expanded_);
}

std::vector<TimelineSegment> TimelineView::segments() const {
  return layout_timeline(model_, plot_area(), rows());
}

bool TimelineView::expanded(int node) const {
  return node >= 0 && node < static_cast<int>(expanded_.size()) && expanded_[static_cast<std::size_t>(node)];
}

void TimelineView::set_expanded(int node, bool open) {
  if (node < 0 || node >= static_cast<int>(expanded_.size()) || expanded(node) == open) return;
  expanded_[static_cast<std::size_t>(node)] = open;
  if (!open && current_.node == node && !current_.summary()) current_ = {node, -1};  // the cursor's rank row went
  fit_height();
  update();
}

void TimelineView::fit_height() {
  const int rows = grouped() ? static_cast<int>(this->rows().size()) : 0;
  const int wanted = std::max(120, rows * kMinNodeRow + legend_height() + 8);
  if (minimumHeight() != wanted) setMinimumHeight(wanted);
}

void TimelineView::paintEvent(QPaintEvent* event) {
  QPainter p(this);
  const QRect exposed = event->rect();
  p.fillRect(exposed, palette().base());
  const QRectF area = plot_area();
  const auto rows = this->rows();
  if (rows.empty()) {
    p.setPen(palette().text().color());
    p.drawText(rect(), Qt::AlignCenter, "No run yet: the init stages of every rank appear here.");
    return;
  }
  const double row_h = area.height() / static_cast<double>(rows.size());
  // Only the rows in view: 2,048 ranks' rows scroll.
  const int first = std::max(0, static_cast<int>((exposed.top() - area.top()) / row_h) - 1);
  const int last =
      std::min(static_cast<int>(rows.size()) - 1, static_cast<int>((exposed.bottom() - area.top()) / row_h) + 1);
  p.setPen(palette().text().color());
  for (int i = first; i <= last; ++i) {
    const TimelineRow& row = rows[static_cast<std::size_t>(i)];
    const QRectF band(0, area.top() + i * row_h, label_width() - 6, row_h);
    if (!grouped()) {
      p.drawText(band, Qt::AlignRight | Qt::AlignVCenter, QString("rank %1").arg(row.rank));
    } else if (row.summary()) {
      p.fillRect(QRectF(0, band.top(), width(), row_h), palette().alternateBase());
      p.drawText(band.adjusted(4, 0, 0, 0), Qt::AlignLeft | Qt::AlignVCenter | Qt::TextSingleLine,
                 QString(expanded(row.node) ? "\u25be " : "\u25b8 ") + model_.node_name(row.node));
    } else {
      p.drawText(band, Qt::AlignRight | Qt::AlignVCenter, QString("rank %1").arg(row.rank));
    }
  }
  const auto segments = layout_timeline(model_, area, rows);
  for (const auto& s : segments) {
    if (s.row < first || s.row > last) continue;
    p.fillRect(s.rect, s.failed ? QColor(0xe5, 0x39, 0x35) : s.live ? QColor(0xff, 0xb3, 0x00) : stage_color(s.stage));
    if (s.partial) p.fillRect(s.rect, QBrush(QColor(0, 0, 0, 90), Qt::BDiagPattern));  // not every rank yet
    if (s.failed) {
      p.setPen(Qt::white);
      p.drawText(s.rect, Qt::AlignCenter, stage_names()[s.stage] + " FAILED");
    } else if (s.live && s.rank >= 0) {
      // What the retrying connects meet, before any timeout.
      p.setPen(Qt::black);
      p.drawText(s.rect.adjusted(4, 0, -4, 0), Qt::AlignLeft | Qt::AlignVCenter | Qt::TextSingleLine,
                 p.fontMetrics().elidedText(model_.cell(s.rank, s.stage).live_text, Qt::ElideRight,
                                            static_cast<int>(s.rect.width()) - 8));
    }
  }
  // Legend, with the run's total first.
  p.setPen(palette().text().color());
  for (const auto& item : legend()) {
    QRectF text = item.rect;
    if (item.stage >= 0) {
      p.fillRect(QRectF(item.rect.left(), item.rect.top() + 4, 10, 10), stage_color(item.stage));
      text.setLeft(item.rect.left() + 13);
    }
    QFont f = p.font();
    f.setBold(item.stage < 0);
    p.setFont(f);
    p.drawText(text, Qt::AlignLeft | Qt::AlignVCenter | Qt::TextSingleLine, item.text);
  }
  QFont plain = p.font();
  plain.setBold(false);
  p.setFont(plain);
  // The keyboard cursor, when the view has the focus.
  if (hasFocus()) {
    for (const auto& s : segments) {
      if (s.node != current_.node || s.rank != current_.rank || s.stage != current_stage_) continue;
      p.setPen(QPen(palette().highlight().color(), 2, Qt::DashLine));
      p.setBrush(Qt::NoBrush);
      p.drawRect(s.rect.adjusted(-2, -1, 2, 1));
    }
  }
}

void TimelineView::set_current(const TimelineRow& row, int stage) {
  current_ = row;
  current_stage_ = stage;
  if (stage >= 0 && stage < stage_names().size()) {
    QString text;
    if (row.summary()) {
      const auto n = model_.node_cell(row.node, stage);
      text = QString("%1, %2: %3, %4 of %5 ranks, %6 ms%7")
                 .arg(model_.node_name(row.node), stage_names()[stage])
                 .arg(!n.seen  ? "not reached"
                      : n.live ? "retrying"
                      : n.ok   ? "ok"
                               : "FAILED")
                 .arg(n.reached)
                 .arg(n.ranks)
                 .arg(n.duration_ms, 0, 'f', 1)
                 .arg(expanded(row.node) ? ", open" : ", closed");
    } else if (row.rank < model_.ranks()) {
      const auto& c = model_.cell(row.rank, stage);
      text = QString("rank %1, %2: %3, %4 ms")
                 .arg(row.rank)
                 .arg(stage_names()[stage])
                 .arg(!c.seen  ? "not reached"
                      : c.live ? "retrying"
                      : c.ok   ? "ok"
                               : "FAILED")
                 .arg(c.duration_ms, 0, 'f', 1);
    }
    setAccessibleDescription(text);
    QAccessibleEvent changed(this, QAccessible::DescriptionChanged);
    QAccessible::updateAccessibility(&changed);
    // Into view, when a scroll area holds the timeline.
    for (const auto& s : segments()) {
      if (s.node != row.node || s.rank != row.rank || s.stage != stage) continue;
      if (auto* scroll = parentWidget() ? qobject_cast<QScrollArea*>(parentWidget()->parentWidget()) : nullptr)
        scroll->ensureVisible(static_cast<int>(s.rect.center().x()), static_cast<int>(s.rect.center().y()), 20,
                              static_cast<int>(s.rect.height()) + 8);
      break;
    }
  }
  update();
}

void TimelineView::focusInEvent(QFocusEvent* event) {
  // The first segment drawn, when the cursor is on none.
  if (current_stage_ < 0) {
    const auto segments = this->segments();
    if (!segments.empty()) set_current({segments.front().node, segments.front().rank}, segments.front().stage);
  }
  QWidget::focusInEvent(event);
}

void TimelineView::keyPressEvent(QKeyEvent* event) {
  const auto rows = this->rows();
  const auto segments = layout_timeline(model_, plot_area(), rows);
  if (segments.empty()) {
    QWidget::keyPressEvent(event);
    return;
  }
  // The stages drawn in row `i`, in stage order.
  auto stages_of = [&](int i) {
    std::vector<int> out;
    for (const auto& s : segments)
      if (s.row == i) out.push_back(s.stage);
    std::sort(out.begin(), out.end());
    return out;
  };
  // The stage in row `i` nearest to `stage`.
  auto nearest = [&](int i, int stage) {
    const auto stages = stages_of(i);
    int best = stages.empty() ? -1 : stages.front();
    for (int s : stages)
      if (std::abs(s - stage) < std::abs(best - stage)) best = s;
    return best;
  };
  const auto at_row = std::find(rows.begin(), rows.end(), current_);
  int row = at_row == rows.end() || current_stage_ < 0 ? segments.front().row : static_cast<int>(at_row - rows.begin());
  int stage = current_stage_ < 0 ? segments.front().stage : current_stage_;
  const auto here = stages_of(row);
  const auto at = std::find(here.begin(), here.end(), stage);
  const int i = at == here.end() ? 0 : static_cast<int>(at - here.begin());
  const TimelineRow current = rows[static_cast<std::size_t>(row)];
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
      // The next row in that direction that has a segment.
      const int step = event->key() == Qt::Key_Up ? -1 : 1;
      for (int r = row + step; r >= 0 && r < static_cast<int>(rows.size()); r += step) {
        if (const int s = nearest(r, stage); s >= 0) {
          row = r;
          stage = s;
          break;
        }
      }
      break;
    }
    case Qt::Key_Return:
    case Qt::Key_Enter:
    case Qt::Key_Space:
      set_current(current, stage);
      if (current.summary()) {
        set_expanded(current.node, !expanded(current.node));
        emit node_segment_clicked(current.node, stage);
      } else {
        emit segment_clicked(current.rank, stage);
      }
      return;
    case Qt::Key_Plus:
      if (current.summary()) set_expanded(current.node, true);
      return;
    case Qt::Key_Minus:
    case Qt::Key_Backspace:
      if (grouped()) {
        set_expanded(current.node, false);
        set_current({current.node, -1}, stage);
      }
      return;
    default:
      QWidget::keyPressEvent(event);
      return;
  }
  set_current(rows[static_cast<std::size_t>(row)], stage);
}

void TimelineView::mousePressEvent(QMouseEvent* event) {
  const auto rows = this->rows();
  const QRectF area = plot_area();
  // A node's name opens or closes it.
  if (grouped() && !rows.empty() && event->position().x() < area.left()) {
    const int i =
        static_cast<int>((event->position().y() - area.top()) / (area.height() / static_cast<double>(rows.size())));
    if (i >= 0 && i < static_cast<int>(rows.size()) && rows[static_cast<std::size_t>(i)].summary()) {
      const int node = rows[static_cast<std::size_t>(i)].node;
      set_expanded(node, !expanded(node));
    }
    return;
  }
  for (const auto& s : layout_timeline(model_, area, rows)) {
    if (s.rect.adjusted(-2, 0, 2, 0).contains(event->position())) {
      set_current({s.node, s.rank}, s.stage);
      if (s.rank < 0) {
        set_expanded(s.node, true);  // a node's stage: its ranks, and its summary
        emit node_segment_clicked(s.node, s.stage);
      } else {
        emit segment_clicked(s.rank, s.stage);
      }
      return;
    }
  }
}

}  // namespace ringmaster::ui

// timeline_model
#include "models/timeline_model.h"

#include <QBrush>
#include <QColor>
#include <algorithm>

namespace ringmaster::ui {

const QStringList& stage_names() {
  static const QStringList names = [] {
    QStringList out;
    for (int s = 0; s <= static_cast<int>(Stage::ready); ++s)
      out << QString::fromUtf8(name_of(static_cast<Stage>(s)).data());
    return out;
  }();
  return names;
}

int TimelineModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(cells_.size());
}
int TimelineModel::columnCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(stage_names().size());
}

QVariant TimelineModel::data(const QModelIndex& index, int role) const {
  if (!index.isValid() || index.row() >= rowCount() || index.column() >= columnCount()) return {};
  const Cell& c = cells_[static_cast<std::size_t>(index.row())][static_cast<std::size_t>(index.column())];
  switch (role) {
    case Qt::DisplayRole:
      if (!c.seen) return QString();
      if (c.live) return QString("retrying");
      return c.ok ? QString::number(c.duration_ms, 'f', 2) : QString("FAILED");
    case Qt::ToolTipRole:
      return c.live ? c.live_text : c.detail;
    case Qt::BackgroundRole:
      if (!c.seen) return {};
      if (c.live) return QBrush(QColor(0xff, 0xc1, 0x07));  // amber: not failed yet, not well either
      return QBrush(c.ok ? QColor(0xc8, 0xe6, 0xc9) : QColor(0xef, 0x9a, 0x9a));
    default:
      return {};
  }
}

QVariant TimelineModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (role != Qt::DisplayRole) return {};
  if (orientation == Qt::Horizontal) return section < stage_names().size() ? stage_names()[section] : QVariant();
  return QString("rank %1").arg(section);
}

void TimelineModel::reset(int world_size) {
  beginResetModel();
  cells_.assign(static_cast<std::size_t>(std::max(world_size, 0)),
                std::vector<Cell>(static_cast<std::size_t>(stage_names().size())));
  origin_us_ = 0;
  endResetModel();
}

const TimelineModel::Cell& TimelineModel::cell(int rank, int stage) const {
  return cells_.at(static_cast<std::size_t>(rank)).at(static_cast<std::size_t>(stage));
}

void TimelineModel::rebase() {
  for (auto& row : cells_) {
    for (auto& c : row) {
      if (c.seen) c.begin_ms = static_cast<double>(c.begin_us - origin_us_) / 1000.0;
    }
  }
}

void TimelineModel::add_stage(int rank, const agent::events::StageEnded& e) {
  const int stage = static_cast<int>(e.stage);
  if (rank < 0 || rank >= ranks() || stage >= columnCount()) return;
  Cell& c = cells_[static_cast<std::size_t>(rank)][static_cast<std::size_t>(stage)];
  c.live = false;  // the stage's final event (add_progress sets it again for its own)
  const long long begin = e.begin_us;
  const double duration = e.duration_ms;
  if (!c.seen) {
    c.seen = true;
    c.begin_us = begin;
    c.duration_ms = duration;
  } else {  // TRANSPORT_CONNECT comes once per connection: span them all
    const double end_ms = std::max(static_cast<double>(c.begin_us) / 1000.0 + c.duration_ms,
                                   static_cast<double>(begin) / 1000.0 + duration);
    c.begin_us = std::min(c.begin_us, begin);
    c.duration_ms = end_ms - static_cast<double>(c.begin_us) / 1000.0;
  }
  c.ok = c.ok && e.ok;
  const QString detail = QString::fromStdString(e.detail);
  if (!detail.isEmpty()) c.detail += (c.detail.isEmpty() ? "" : "\n") + detail;
  if (origin_us_ == 0 || begin < origin_us_) {
    origin_us_ = begin;
    rebase();
    emit dataChanged(index(0, 0), index(rowCount() - 1, columnCount() - 1));
  } else {
    c.begin_ms = static_cast<double>(c.begin_us - origin_us_) / 1000.0;
    emit dataChanged(index(rank, stage), index(rank, stage));
  }
}

// A stage still retrying: drawn from its begin to now, amber, with the
// live line as its detail until the stage's final event replaces it.
void TimelineModel::add_progress(int rank, const agent::events::StageProgress& e) {
  const int stage = static_cast<int>(e.stage);
  if (rank < 0 || rank >= ranks() || stage >= columnCount()) return;
  Cell& c = cells_[static_cast<std::size_t>(rank)][static_cast<std::size_t>(stage)];
  if (c.seen && !c.live) return;  // the final event came first
  agent::events::StageEnded so_far;
  so_far.stage = e.stage;
  so_far.begin_us = e.begin_us;
  so_far.duration_ms = e.elapsed_ms;
  add_stage(rank, so_far);
  c.live = true;
  c.live_text = QString::fromStdString(e.detail);
  emit dataChanged(index(rank, stage), index(rank, stage));
}

void TimelineModel::add_failure(int rank, const agent::events::StageFailed& f) {
  const int stage = static_cast<int>(f.stage);
  if (rank < 0 || rank >= ranks() || stage >= columnCount()) return;
  Cell& c = cells_[static_cast<std::size_t>(rank)][static_cast<std::size_t>(stage)];
  c.ok = false;
  if (!c.seen) {
    c.seen = true;
    c.begin_us = origin_us_;
  }
  QString text = "FAILED: " + QString::fromStdString(f.summary);
  if (!f.missing.empty()) {
    QStringList m;
    for (int r : f.missing)
      m << QString::number(r);
    text += QString("\n%1/%2 joined; missing ranks: %3").arg(f.joined).arg(f.world_size).arg(m.join(", "));
  }
  auto add_line = [&](const char* key, const std::string& value) {
    if (!value.empty()) text += QString("\n%1: %2").arg(key, QString::fromStdString(value));
  };
  add_line("local", f.local);
  add_line("remote", f.remote);
  add_line("errno", f.errno_text);
  if (!f.hint.empty()) text += "\nhint: " + QString::fromStdString(f.hint);
  c.detail += (c.detail.isEmpty() ? "" : "\n") + text;
  emit dataChanged(index(rank, stage), index(rank, stage));
}

double TimelineModel::span_ms() const {
  double end = 0;
  for (const auto& row : cells_) {
    for (const auto& c : row) {
      if (c.seen) end = std::max(end, c.begin_ms + c.duration_ms);
    }
  }
  return end;
}

std::vector<TimelineSegment> layout_timeline(const TimelineModel& model, const QRectF& area) {
  std::vector<TimelineSegment> out;
  const int ranks = model.ranks();
  if (ranks == 0 || area.width() <= 0 || area.height() <= 0) return out;
  const double span = std::max(model.span_ms(), 1e-3);
  const double row_h = area.height() / ranks;
  const double scale = area.width() / span;
  for (int r = 0; r < ranks; ++r) {
    for (int s = 0; s < stage_names().size(); ++s) {
      const auto& c = model.cell(r, s);
      if (!c.seen) continue;
      const double x = area.left() + c.begin_ms * scale;
      const double w = std::max(2.0, c.duration_ms * scale);  // a 10 us stage stays visible
      out.push_back(
          TimelineSegment{r, s,
                          QRectF(std::min(x, area.right() - 2.0), area.top() + r * row_h + 1,
                                 std::min(w, area.right() - std::min(x, area.right() - 2.0)), std::max(1.0, row_h - 2)),
                          !c.ok, c.live});
    }
  }
  return out;
}

}  // namespace ringmaster::ui

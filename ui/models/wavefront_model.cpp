#include "models/wavefront_model.h"

#include <QBrush>
#include <QColor>

#include <algorithm>

#include "models/text.h"

namespace ringmaster::ui {

int WavefrontModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() || !report_ ? 0 : static_cast<int>(report_->ranks.size());
}

int WavefrontModel::columnCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : columns_;
}

void WavefrontModel::clear() {
  beginResetModel();
  report_.reset();
  columns_ = 0;
  endResetModel();
}

void WavefrontModel::set(StallReport report) {
  beginResetModel();
  // Columns: every call any rank still holds, up to the stalled one and one
  // beyond it (a rank ahead shows there).
  std::uint64_t lo = report.seq, hi = report.seq;
  for (const auto& w : report.ranks) {
    for (const auto& c : w.calls) {
      lo = std::min(lo, c.seq);
      hi = std::max(hi, c.seq);
    }
  }
  constexpr std::uint64_t kMostColumns = 12;
  if (hi - lo + 1 > kMostColumns) lo = hi + 1 - kMostColumns;
  if (report.seq < lo) lo = report.seq;
  first_seq_ = lo;
  columns_ = static_cast<int>(std::min<std::uint64_t>(hi - lo + 1, kMostColumns));
  report_ = std::move(report);
  endResetModel();
}

int WavefrontModel::stalled_column() const {
  if (!report_ || report_->seq < first_seq_) return -1;
  const auto c = static_cast<int>(report_->seq - first_seq_);
  return c < columns_ ? c : -1;
}

QString WavefrontModel::summary() const {
  if (!report_) return {};
  return QString("%1 #%2 stalled %3 s (seen by rank %4): %5")
      .arg(qs(name_of(report_->collective)))
      .arg(report_->seq)
      .arg(report_->stalled_for.count() / 1000.0, 0, 'f', 1)
      .arg(report_->reporter)
      .arg(QString::fromStdString(report_->diagnosis));
}

WavefrontModel::Cell WavefrontModel::cell(int row, std::uint64_t seq, const CallRecord** record) const {
  const RankWavefront& w = report_->ranks[static_cast<std::size_t>(row)];
  *record = nullptr;
  if (!w.answered) return Cell::unknown;
  for (const auto& c : w.calls) {
    if (c.seq != seq) continue;
    *record = &c;
    if (c.waits_on >= 0) return Cell::waiting;
    switch (c.state) {
      case CallState::queued:
        return Cell::queued;
      case CallState::running:
        return Cell::running;
      case CallState::done:
        return Cell::done;
      case CallState::failed:
        return Cell::failed;
    }
  }
  // Beyond the last call it made: not called; before its oldest kept one:
  // not known (it answered with its last few).
  return static_cast<std::int64_t>(seq) > w.last_called ? Cell::not_called : Cell::unknown;
}

QVariant WavefrontModel::data(const QModelIndex& index, int role) const {
  if (!report_ || !index.isValid() || index.row() >= rowCount() || index.column() >= columns_) return {};
  const std::uint64_t seq = first_seq_ + static_cast<std::uint64_t>(index.column());
  const CallRecord* c = nullptr;
  const Cell what = cell(index.row(), seq, &c);
  const bool answered = report_->ranks[static_cast<std::size_t>(index.row())].answered;
  if (role == Qt::DisplayRole) {
    switch (what) {
      case Cell::unknown:
        return answered ? QString() : QString("?");
      case Cell::done:
        return QString("done");
      case Cell::queued:
        return QString("queued");
      case Cell::running:
        return QString("running");
      case Cell::failed:
        return QString("failed");
      case Cell::not_called:
        return seq == report_->seq ? QString("not called") : QString();
      case Cell::waiting:
        return QString("%1 rank %2, step %3")
            .arg(c->waits_to_send ? "sends to" : "waits on")
            .arg(c->waits_on)
            .arg(c->step);
    }
  }
  if (role == Qt::BackgroundRole) {
    switch (what) {
      case Cell::unknown:
        return answered ? QVariant() : QBrush(QColor(0xd0, 0xd0, 0xd0));
      case Cell::done:
        return QBrush(QColor(0xd8, 0xf0, 0xd8));
      case Cell::queued:
      case Cell::running:
      case Cell::waiting:
        return QBrush(QColor(0xff, 0xd8, 0x80));  // amber: in the call, not moving
      case Cell::failed:
        return QBrush(QColor(0xf4, 0xa0, 0xa0));
      case Cell::not_called:
        return seq == report_->seq ? QBrush(QColor(0xf4, 0xa0, 0xa0)) : QVariant();
    }
  }
  if (role == Qt::ToolTipRole && c != nullptr) {
    return QString("%1 #%2, %3 bytes, %4/%5 on %6 channel(s): %7, submitted %8 ms before the report, ran %9 ms")
        .arg(qs(name_of(c->collective)))
        .arg(c->seq)
        .arg(static_cast<qulonglong>(c->bytes))
        .arg(qs(name_of(c->algorithm)))
        .arg(qs(name_of(c->protocol)))
        .arg(c->channels)
        .arg(qs(name_of(c->state)))
        .arg(c->age.count() / 1000)
        .arg(c->duration.count() / 1000);
  }
  return {};
}

QVariant WavefrontModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (role != Qt::DisplayRole || !report_) return {};
  if (orientation == Qt::Horizontal) {
    if (section < 0 || section >= columns_) return {};
    return QString("#%1").arg(first_seq_ + static_cast<std::uint64_t>(section));
  }
  if (section < 0 || section >= rowCount()) return {};
  const RankWavefront& w = report_->ranks[static_cast<std::size_t>(section)];
  return w.answered ? QString("rank %1").arg(w.rank) : QString("rank %1 (no answer)").arg(w.rank);
}

}  // namespace ringmaster::ui

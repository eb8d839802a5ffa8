// tuner_model
#include "models/tuner_model.h"

#include <QColor>
#include <QFont>

#include "models/text.h"

namespace ringmaster::ui {

int TunerModel::rowCount(const QModelIndex& parent) const {
  if (parent.isValid() || selected_ < 0) return 0;
  return static_cast<int>(tables_[static_cast<std::size_t>(selected_)].candidates.size());
}
int TunerModel::columnCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : 7;
}

int TunerModel::chosen_row() const {
  return selected_ < 0 ? -1 : tables_[static_cast<std::size_t>(selected_)].chosen;
}

QVariant TunerModel::data(const QModelIndex& index, int role) const {
  if (!index.isValid() || index.row() >= rowCount() || index.column() >= 7) return {};
  const Table& t = tables_[static_cast<std::size_t>(selected_)];
  const auto& c = t.candidates[static_cast<std::size_t>(index.row())];
  const bool chosen = index.row() == t.chosen;
  const bool excluded = !c.excluded.empty();
  const QString why = QString::fromStdString(c.excluded);
  if (role == Qt::FontRole && chosen) {
    QFont f;
    f.setBold(true);
    return f;
  }
  if (role == Qt::BackgroundRole && chosen) return QColor(255, 214, 102);
  if (role == Qt::ForegroundRole && chosen) return QColor(Qt::black);
  if (role == Qt::ForegroundRole && excluded) return QColor(Qt::gray);
  if (role == Qt::ToolTipRole && excluded) return why;
  if (role != Qt::DisplayRole) return {};
  switch (index.column()) {
    case 0:
      return QString(chosen ? "\u25B6 " : "") + QString::fromStdString(c.algorithm);
    case 1:
      return QString::fromStdString(c.protocol);
    case 2:
      return c.channels;
    case 3:
      return excluded ? QString() : QString::number(c.predicted_us, 'f', 1);
    case 4:
      return chosen && t.measured_us >= 0 ? QString::number(t.measured_us, 'f', 1) : QString();
    case 5:
      return excluded || !chosen || t.measured_us <= 0 ? QString()
                                                       : QString::number(c.predicted_us / t.measured_us, 'f', 2);
    case 6:
      return excluded ? "excluded: " + why : (chosen ? QString("chosen") : QString());
    default:
      return {};
  }
}

QVariant TunerModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || role != Qt::DisplayRole) return {};
  static const char* names[] = {"Algorithm",     "Protocol",           "Channels", "Predicted (us)",
                                "Measured (us)", "Predicted/measured", "Note"};
  return section >= 0 && section < 7 ? QString(names[section]) : QVariant();
}

void TunerModel::clear() {
  beginResetModel();
  tables_.clear();
  selected_ = -1;
  endResetModel();
  emit tables_changed();
}

void TunerModel::add_table(const agent::events::TunerTable& e) {
  Table t;
  t.collective = e.collective;
  t.bytes = e.bytes;
  t.candidates = e.candidates;
  t.chosen = e.chosen;
  for (auto& existing : tables_) {
    if (existing.collective == t.collective && existing.bytes == t.bytes) {
      t.measured_us = existing.measured_us;
      t.measured_from_result = existing.measured_from_result;
      beginResetModel();
      existing = std::move(t);
      endResetModel();
      return;
    }
  }
  if (tables_.size() >= kTables) return;  // sizes past the first kTables: not listed
  tables_.push_back(std::move(t));
  select(static_cast<int>(tables_.size()) - 1);
  emit tables_changed();
}

void TunerModel::add_measurement(const agent::events::Result& r) {
  measured(r.collective, r.bytes, r.out_of_place.time_us, true);
}

void TunerModel::add_measurement(const agent::events::Decision& d) {
  measured(d.collective, d.bytes, d.time_us, false);
}

void TunerModel::measured(const std::string& collective, std::uint64_t bytes, double us, bool from_result) {
  for (std::size_t i = 0; i < tables_.size(); ++i) {
    Table& t = tables_[i];
    if (t.collective != collective || t.bytes != bytes) continue;
    if (t.measured_from_result && !from_result) return;
    t.measured_us = us;
    t.measured_from_result = from_result;
    if (static_cast<int>(i) == selected_ && t.chosen >= 0) {
      emit dataChanged(index(t.chosen, 4), index(t.chosen, 5));
    }
    return;
  }
}

QStringList TunerModel::tables() const {
  QStringList out;
  for (const auto& t : tables_)
    out << QString::fromStdString(t.collective) + " " + human_size(t.bytes);
  return out;
}

void TunerModel::select(int table) {
  if (table < -1 || table >= static_cast<int>(tables_.size()) || table == selected_) return;
  beginResetModel();
  selected_ = table;
  endResetModel();
}

}  // namespace ringmaster::ui

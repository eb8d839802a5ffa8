// decisions_model
#include "models/decisions_model.h"

#include "models/text.h"

namespace ringmaster::ui {

int DecisionsModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(rows_.size());
}
int DecisionsModel::columnCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : 7;
}

QVariant DecisionsModel::data(const QModelIndex& index, int role) const {
  if (!index.isValid() || index.row() >= rowCount() || index.column() >= 7) return {};
  const Row& row = rows_[static_cast<std::size_t>(index.row())];
  const agent::events::Decision& d = row.decision;
  if (role == Qt::ToolTipRole) {
    if (index.column() == 5)
      return row.warm_us < 0 ? QString("No Results row for this size yet")
                             : QString("Results' time for %1 at this size: the median of its timed calls")
                                   .arg(QString::fromStdString(d.collective));
    if (index.column() == 6)
      return QString("The first call at this size, connections included (reported %1 time%2)")
          .arg(row.reported)
          .arg(row.reported == 1 ? "" : "s");
    return {};
  }
  if (role == Qt::TextAlignmentRole && index.column() >= 4) return int(Qt::AlignRight | Qt::AlignVCenter);
  if (role != Qt::DisplayRole) return {};
  switch (index.column()) {
    case 0:
      return QString::fromStdString(d.collective);
    case 1:
      return size_text(d.bytes);
    case 2:
      return QString::fromStdString(d.algorithm);
    case 3:
      return QString::fromStdString(d.protocol);
    case 4:
      return d.nchannels;
    case 5:
      return row.warm_us < 0 ? QString("—") : QString::number(row.warm_us, 'f', 2);
    case 6:
      return QString::number(d.time_us, 'f', 1);
    default:
      return {};
  }
}

QVariant DecisionsModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || role != Qt::DisplayRole) return {};
  static const char* names[] = {"Collective", "Bytes",         "Algorithm",      "Protocol",
                                "Channels",   "Measured (us)", "First call (us)"};
  return section >= 0 && section < 7 ? QString(names[section]) : QVariant();
}

void DecisionsModel::clear() {
  beginResetModel();
  rows_.clear();
  row_of_.clear();
  early_.clear();
  left_out_ = 0;
  endResetModel();
}

void DecisionsModel::add(const agent::events::Decision& decision) {
  const std::pair key{decision.collective, decision.bytes};
  if (const auto it = row_of_.find(key); it != row_of_.end()) {
    Row& row = rows_[static_cast<std::size_t>(it->second)];
    row.decision = decision;
    ++row.reported;
    emit dataChanged(index(it->second, 0), index(it->second, 6));
    return;
  }
  if (rowCount() >= kRows) {
    ++left_out_;
    return;
  }
  const int n = rowCount();
  beginInsertRows({}, n, n);
  Row row{decision, 1, -1};
  if (const auto e = early_.find(key); e != early_.end()) {
    row.warm_us = e->second;
    early_.erase(e);
  }
  rows_.push_back(std::move(row));
  row_of_.emplace(key, n);
  endInsertRows();
}

void DecisionsModel::measured(const std::string& collective, std::uint64_t bytes, double time_us) {
  const std::pair key{collective, bytes};
  const auto it = row_of_.find(key);
  if (it == row_of_.end()) {
    if (early_.size() < static_cast<std::size_t>(kRows)) early_[key] = time_us;
    return;
  }
  rows_[static_cast<std::size_t>(it->second)].warm_us = time_us;
  emit dataChanged(index(it->second, 5), index(it->second, 5));
}

}  // namespace ringmaster::ui

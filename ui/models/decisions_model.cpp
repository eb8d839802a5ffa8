// decisions_model
#include "models/decisions_model.h"

#include "models/text.h"

namespace ringmaster::ui {

int DecisionsModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(rows_.size());
}
int DecisionsModel::columnCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : 6;
}

QVariant DecisionsModel::data(const QModelIndex& index, int role) const {
  if (!index.isValid() || index.row() >= rowCount() || index.column() >= 6 || role != Qt::DisplayRole) return {};
  const agent::events::Decision& d = rows_[static_cast<std::size_t>(index.row())];
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
      return QString::number(d.time_us, 'f', 1);
    default:
      return {};
  }
}

QVariant DecisionsModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || role != Qt::DisplayRole) return {};
  static const char* names[] = {"Collective", "Bytes", "Algorithm", "Protocol", "Channels", "Measured (us)"};
  return section >= 0 && section < 6 ? QString(names[section]) : QVariant();
}

void DecisionsModel::clear() {
  beginResetModel();
  rows_.clear();
  endResetModel();
}

void DecisionsModel::add(const agent::events::Decision& decision) {
  const int n = rowCount();
  beginInsertRows({}, n, n);
  rows_.push_back(decision);
  endInsertRows();
}

}  // namespace ringmaster::ui

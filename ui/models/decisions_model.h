// The engine's decisions.
#pragma once

#include <QAbstractTableModel>
#include <vector>

#include "ringmaster/agent/events.h"

namespace ringmaster::ui {

// The engine's choice per collective and size (protocol, channels), with
// the measured time of that first call.
class DecisionsModel : public QAbstractTableModel {
  Q_OBJECT
 public:
  using QAbstractTableModel::QAbstractTableModel;
  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role) const override;

  void clear();
  void add(const agent::events::Decision& decision);

 private:
  std::vector<agent::events::Decision> rows_;
};

}  // namespace ringmaster::ui

// nccl-tests rows.
#pragma once

#include <QAbstractTableModel>
#include <string>
#include <utility>
#include <vector>

#include "ringmaster/agent/events.h"

namespace ringmaster::ui {

// nccl-tests rows of rank 0.
class ResultsModel : public QAbstractTableModel {
  Q_OBJECT
 public:
  using QAbstractTableModel::QAbstractTableModel;
  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role) const override;

  void clear();
  void add(const agent::events::Result& result);
  const agent::events::Result& row(int r) const { return rows_.at(static_cast<std::size_t>(r)); }
  double average_busbw() const;
  // The table as shown (header line, then a line per row), and the rows
  // as the ranks sent them (a JSON array).
  QString to_csv() const;
  std::string to_json() const;
  // (bytes, busbw) of every row, out of place or in place, for plotting.
  std::vector<std::pair<double, double>> busbw_points(bool in_place) const;

 private:
  std::vector<agent::events::Result> rows_;
};

}  // namespace ringmaster::ui

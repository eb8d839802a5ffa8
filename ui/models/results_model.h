// nccl-tests rows.
#pragma once

#include <deque>

#include <QAbstractTableModel>
#include <string>
#include <utility>
#include <vector>

#include "ringmaster/agent/events.h"

namespace ringmaster::ui {

// nccl-tests rows of rank 0: at most the latest kRows of them (a sweep
// repeated for hours does not grow the console; the oldest tenth goes
// when they are reached), with the average over all.
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
  double average_busbw() const { return busbw_n_ ? busbw_sum_ / static_cast<double>(busbw_n_) : 0; }
  static constexpr int kRows = 20'000;
  double best_busbw() const { return best_busbw_; }  // over all rows, out of place
  long long rows_seen() const { return seen_; }      // all the rows, those left out too
  // The table as shown (header line, then a line per row), and the rows
  // as the ranks sent them (a JSON array).
  QString to_csv() const;
  std::string to_json() const;
  // (bytes, busbw) of every row, out of place or in place, for plotting.
  std::vector<std::pair<double, double>> busbw_points(bool in_place) const;

 private:
  std::deque<agent::events::Result> rows_;
  double busbw_sum_ = 0, best_busbw_ = 0;
  long long busbw_n_ = 0, seen_ = 0;
};

}  // namespace ringmaster::ui

// The engine's decisions.
#pragma once

#include <map>
#include <string>
#include <utility>

#include <QAbstractTableModel>
#include <vector>

#include "ringmaster/agent/events.h"

namespace ringmaster::ui {

// The engine's choice per collective and size (algorithm, protocol,
// channels): one row each, however often it is reported, with the time
// Results measured for that size (the median of its timed calls, warm)
// beside the time of the first call, which paid for connecting.
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
  // Results' time for a collective and size (its row's out-of-place time).
  void measured(const std::string& collective, std::uint64_t bytes, double time_us);
  // At most this many rows (sizes); later sizes are counted, not shown.
  static constexpr int kRows = 4'096;
  int left_out() const { return left_out_; }

 private:
  struct Row {
    agent::events::Decision decision;
    int reported = 0;     // how often the engine reported it
    double warm_us = -1;  // Results' time; -1: none yet
  };
  std::vector<Row> rows_;
  std::map<std::pair<std::string, std::uint64_t>, int> row_of_;
  // Results' times of sizes not decided yet (the row comes later).
  std::map<std::pair<std::string, std::uint64_t>, double> early_;
  int left_out_ = 0;
};

}  // namespace ringmaster::ui

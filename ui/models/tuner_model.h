// The tuner's tables.
#pragma once

#include <QAbstractTableModel>
#include <QStringList>
#include <cstdint>
#include <string>
#include <vector>

#include "ringmaster/agent/events.h"

namespace ringmaster::ui {

// The tuner's tables ("tuner" events of rank 0): one per collective and
// size, the candidates with their predicted time, the chosen one marked
// (bold, highlighted) with the time measured for it beside (the result
// row's out-of-place time, else the first call's). Shows one table at a
// time: select(i) picks which of tables().
class TunerModel : public QAbstractTableModel {
  Q_OBJECT
 public:
  using QAbstractTableModel::QAbstractTableModel;
  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role) const override;

  void clear();
  void add_table(const agent::events::TunerTable& table);
  static constexpr std::size_t kTables = 4'096;
  // The measured time of that size: a result row's out-of-place time, or
  // the first call's until a row comes.
  void add_measurement(const agent::events::Result& result);
  void add_measurement(const agent::events::Decision& decision);
  // "all_reduce 8 B", one per table, in arrival order.
  QStringList tables() const;
  void select(int table);
  int selected() const { return selected_; }
  // The chosen candidate's row in the selected table; -1 when none.
  int chosen_row() const;

 signals:
  void tables_changed();

 private:
  struct Table {
    std::string collective;
    std::uint64_t bytes = 0;
    std::vector<agent::events::TunerTable::Candidate> candidates;
    int chosen = -1;
    double measured_us = -1;
    bool measured_from_result = false;
  };
  void measured(const std::string& collective, std::uint64_t bytes, double us, bool from_result);
  std::vector<Table> tables_;
  int selected_ = -1;
};

}  // namespace ringmaster::ui

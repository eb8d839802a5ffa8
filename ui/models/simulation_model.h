// A simulated cluster beside the measured run, for the Tuner tab.
#pragma once

#include <QAbstractTableModel>
#include <QString>
#include <cstdint>
#include <string>
#include <vector>

#include "results_model.h"

namespace ringmaster::ui {

// What `ringmaster-cli simulate` predicts for `nodes` instances of a
// profile (docs/tuner.md), at each size the run measured (rank 0's rows;
// 8 B to 1 GiB by 4 before any), beside the busbw measured: the columns
// are size, measured busbw, simulated time and busbw, the simulated
// busbw over the measured one, and the simulated pick.
class SimulationModel : public QAbstractTableModel {
  Q_OBJECT
 public:
  using QAbstractTableModel::QAbstractTableModel;
  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role) const override;

  // The profiles' names, as `simulate --list` gives them.
  static QStringList instances();
  // Simulates `nodes` instances of `instance` for the sizes, collective
  // and type of `measured`; false, with why, for an unknown instance or
  // collective, or nodes out of range.
  bool simulate(const QString& instance, int nodes, const ResultsModel& measured, QString* error = nullptr);
  // "2 x p5.48xlarge (16 ranks, 32 EFA x 100 Gbit/s each): all_reduce float"; empty before any.
  const QString& title() const { return title_; }
  bool active() const { return !title_.isEmpty(); }
  void clear();

 private:
  struct Row {
    std::uint64_t bytes = 0;
    double measured_busbw = -1;  // -1: not measured
    double time_us = 0, busbw = 0;
    QString pick;
  };
  std::vector<Row> rows_;
  QString title_;
};

}  // namespace ringmaster::ui

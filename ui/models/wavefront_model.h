// The hang wavefront of a run's latest stall report: one row per rank, one
// column per collective (by sequence number) around the stalled one, each
// cell what that rank did with that call: done, running, waiting on a peer
// at a step, failed, or not called; a rank that did not answer is a grey
// row. The console's Wavefront tab.
#pragma once

#include <QAbstractTableModel>
#include <QString>

#include <cstdint>
#include <optional>

#include "ringmaster/agent/events.h"

namespace ringmaster::ui {

class WavefrontModel : public QAbstractTableModel {
  Q_OBJECT
 public:
  using QAbstractTableModel::QAbstractTableModel;
  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role) const override;

  void clear();
  void set(StallReport report);
  const std::optional<StallReport>& report() const { return report_; }
  // "all_reduce #1234 stalled 10.2 s (seen by rank 3): <diagnosis>"; empty
  // before a stall.
  QString summary() const;
  // The column of the stalled call (-1: none).
  int stalled_column() const;

 private:
  // What rank `row` did with call `seq`.
  enum class Cell { unknown, done, running, waiting, failed, not_called, queued };
  Cell cell(int row, std::uint64_t seq, const CallRecord** record) const;

  std::optional<StallReport> report_;
  std::uint64_t first_seq_ = 0;  // the first column's call
  int columns_ = 0;
};

}  // namespace ringmaster::ui

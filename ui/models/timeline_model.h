// The rendezvous timeline: ranks x init stages.
#pragma once

#include <QAbstractTableModel>
#include <QRectF>
#include <QString>
#include <QStringList>
#include <vector>

#include "ringmaster/agent/events.h"

namespace ringmaster::ui {

// The init stages in order, as the engine names them (its Stage enum,
// RESOLVE_MASTER to READY).
const QStringList& stage_names();

// Rendezvous timeline: ranks x stages, each cell a stage's span.
class TimelineModel : public QAbstractTableModel {
  Q_OBJECT
 public:
  struct Cell {
    bool seen = false;
    bool ok = true;
    double begin_ms = 0;  // since the earliest begin of the run
    double duration_ms = 0;
    long long begin_us = 0;
    QString detail;  // every event's detail, then the failure's summary and hint
    // Still running and retrying (stage_progress): the latest live line,
    // until the stage's final event.
    bool live = false;
    QString live_text;
  };
  using QAbstractTableModel::QAbstractTableModel;

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role) const override;

  void reset(int world_size);
  void add_stage(int rank, const agent::events::StageEnded& event);
  void add_failure(int rank, const agent::events::StageFailed& failure);
  void add_progress(int rank, const agent::events::StageProgress& progress);
  const Cell& cell(int rank, int stage) const;
  int ranks() const { return static_cast<int>(cells_.size()); }
  double span_ms() const;  // from the earliest begin to the latest end

 private:
  void rebase();
  std::vector<std::vector<Cell>> cells_;
  long long origin_us_ = 0;
};

// Where each segment of the timeline goes in a rectangle: plain geometry,
// computed apart from painting so tests can check it.
struct TimelineSegment {
  int rank = 0;
  int stage = 0;
  QRectF rect;
  bool failed = false;
  bool live = false;  // still retrying
};
std::vector<TimelineSegment> layout_timeline(const TimelineModel& model, const QRectF& area);

}  // namespace ringmaster::ui

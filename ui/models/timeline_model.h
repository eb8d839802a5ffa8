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
    // The events' details (the first kDetailLines, then how many more),
    // then the failure's summary and hint.
    QString detail;
    int detail_lines = 0;
    // Still running and retrying (stage_progress): the latest live line,
    // until the stage's final event.
    bool live = false;
    QString live_text;
  };
  using QAbstractTableModel::QAbstractTableModel;
  static constexpr int kDetailLines = 16;

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role) const override;

  // A new run of `world_size` ranks; `placement` gives each rank's node
  // (the agent it runs on, -1 for none) for the grouped view. Without it,
  // ranks are grouped in blocks of kBlockRanks.
  void reset(int world_size, std::vector<int> placement = {});
  void add_stage(int rank, const agent::events::StageEnded& event);
  void add_failure(int rank, const agent::events::StageFailed& failure);
  void add_progress(int rank, const agent::events::StageProgress& progress);
  const Cell& cell(int rank, int stage) const;
  int ranks() const { return static_cast<int>(cells_.size()); }
  double span_ms() const;  // from the earliest begin to the latest end

  // The ranks by node, in the order of the nodes' first ranks: a node is
  // an agent of the run (or a block of kBlockRanks ranks when the run did
  // not say where its ranks are; or the ranks placed nowhere).
  static constexpr int kBlockRanks = 8;
  int nodes() const { return static_cast<int>(groups_.size()); }
  int node_of(int rank) const;
  const std::vector<int>& ranks_of(int node) const;
  QString node_name(int node) const;  // "agent 3", "ranks 8-15", "not placed"
  // Names the agents ("agent 3 (10.0.0.4:7070)") where the run knows
  // their addresses, indexed as in the placement.
  void set_agent_addresses(std::vector<QString> addresses);
  QString node_title(int node) const;
  // A stage over a node's ranks: from the first begin to the last end;
  // failed when any rank failed it, live when any still retries; how many
  // of its ranks reached it, and which one ended last.
  struct NodeCell {
    bool seen = false;
    bool ok = true;
    bool live = false;
    double begin_ms = 0;
    double duration_ms = 0;
    int reached = 0;
    int ranks = 0;
    int last_rank = -1;    // the rank that ended the stage last
    int failed_rank = -1;  // the first rank (lowest) that failed it
  };
  NodeCell node_cell(int node, int stage) const;
  // The node's stage in words, for the detail pane: its span, how many
  // ranks reached it, the slowest, and which failed or still retry.
  QString node_summary(int node, int stage) const;

 private:
  void rebase();
  std::vector<std::vector<Cell>> cells_;
  long long origin_us_ = 0;
  struct Group {
    int agent = -1;  // -1: a block of ranks, or the ranks placed nowhere
    bool placed = true;
    std::vector<int> ranks;
  };
  std::vector<Group> groups_;
  std::vector<int> group_of_;  // per rank
  std::vector<QString> agent_addresses_;
};

// The timeline's rows: a rank each when the run has at most kFlatRanks
// ranks; otherwise one per node, each summarising its ranks, followed by
// the rows of its ranks when it is expanded (drilled into).
struct TimelineRow {
  int node = -1;
  int rank = -1;  // -1: the node's summary row
  bool summary() const { return rank < 0; }
  bool operator==(const TimelineRow&) const = default;
};
constexpr int kFlatRanks = 32;
std::vector<TimelineRow> timeline_rows(const TimelineModel& model, const std::vector<bool>& expanded = {});

// Where each segment of the timeline goes in a rectangle: plain geometry,
// computed apart from painting so tests can check it.
struct TimelineSegment {
  int rank = 0;  // -1 on a node's summary row
  int stage = 0;
  QRectF rect;
  bool failed = false;
  bool live = false;  // still retrying
  int node = -1;
  int row = 0;
  bool partial = false;  // a summary row's stage that some of the node's ranks have not reached
};
std::vector<TimelineSegment> layout_timeline(const TimelineModel& model, const QRectF& area,
                                             const std::vector<TimelineRow>& rows);
// With the rows timeline_rows() gives when no node is expanded.
std::vector<TimelineSegment> layout_timeline(const TimelineModel& model, const QRectF& area);

}  // namespace ringmaster::ui

// A job the console did not launch, watched through the agents of its
// nodes (the agents' `watch`, docs/watch.md): one row a process with
// where its rendezvous stands, and the notes the watchers add (the hang
// wavefront from the Flight Recorders, each rank's NCCL log, the agents'
// answers). Marked as watched everywhere it is shown: the console never
// kills or signals such a job.
#pragma once

#include <QAbstractTableModel>
#include <QString>
#include <QStringList>
#include <map>
#include <utility>
#include <vector>

#include "ringmaster/agent/events.h"
#include "timeline_model.h"

namespace ringmaster::ui {

class JobWatchModel : public QAbstractTableModel {
  Q_OBJECT
 public:
  enum Column { kAgent, kRank, kPid, kStage, kOutcome, kDetail, kColumns };
  using QAbstractTableModel::QAbstractTableModel;

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

  // The watched ranks' rendezvous as it went, a row a rank of the job, as
  // the Stages tab draws a launched run's: each stage from when a rank was
  // first seen in it, the current one live with what its sockets say.
  TimelineModel timeline;

  // A new watch: nothing seen yet.
  void start(const QString& watch_id);
  const QString& watch_id() const { return watch_id_; }
  // One event of the watch from `agent` (job_rank, job_wavefront,
  // job_nccl, and the watcher's end).
  void apply(const QString& agent, const agent::events::Event& event);
  // A line of its own in the notes (an agent's answer to the watch).
  void note(const QString& line);

  // The process of a row, as the watcher last read it.
  const agent::events::JobRank& rank_at(int row) const { return rows_.at(static_cast<std::size_t>(row)).second; }
  // What the watch says besides the rows, as it stands now: each agent's
  // answer, the hang wavefront each agent's watcher reads now, each rank's
  // last NCCL log line, each agent's last RAS reading, and the watchers
  // that ended.
  const QStringList& notes() const { return notes_; }
  // Agents whose watcher has ended.
  int watchers_ended() const { return ended_; }

 signals:
  void notes_changed();

 private:
  QString watch_id_;
  std::vector<std::pair<QString, agent::events::JobRank>> rows_;  // (agent, process), in arrival order
  void compose();                                                 // notes_ from the parts below, then notes_changed
  void to_timeline(const agent::events::JobRank& e);

  struct Since {
    Stage stage = Stage::store_connect;
    long long since_us = 0;
    std::string detail;
  };
  std::map<int, Since> stage_of_;  // by the job's rank: its stage and when it was first seen there

  QStringList answers_;                                    // "agent: watching ..." or why not
  std::map<QString, std::vector<std::string>> wavefront_;  // agent -> its watcher's wavefront now
  std::map<std::pair<QString, int>, QString> nccl_;        // (agent, pid) -> its last NCCL line
  std::map<QString, QString> ras_;                         // agent -> its last RAS reading
  QStringList ends_;                                       // "agent: the watcher ended"
  QStringList notes_;
  int ended_ = 0;
};

}  // namespace ringmaster::ui

// Every finished run kept in the history database (history/
// history_database.h: an SQLite file, or a team's PostgreSQL server): what
// was asked, how it ended, and every message its ranks sent, so a past run reopens into the same
// panels (timeline, results, tuner, rings) and two runs compare size by
// size. Console runs and scenario runs alike. The model lists runs, newest
// first.
#pragma once

#include <QAbstractTableModel>
#include <QString>
#include <cstdint>
#include <vector>

#include "history/history_database.h"

namespace ringmaster::ui {

class RunState;

class RunHistory : public QAbstractTableModel {
  Q_OBJECT
 public:
  explicit RunHistory(QObject* parent = nullptr);
  ~RunHistory() override;

  // Opens (creating the tables when needed) an SQLite file or a
  // postgresql:// URL (HistoryDatabase::open); the default is
  // history.sqlite in the application's data directory.
  bool open(const QString& where, QString* error = nullptr);
  bool is_open() const { return db_.is_open(); }
  // Where it is kept, a URL's password elided.
  const QString& path() const { return db_.where(); }
  // The database itself, where certifications are kept beside the runs.
  HistoryDatabase& database() { return db_; }

  // Keeps a finished run: `kind` ("run", "scenario"), `what` (the spec or
  // the scenario and its verdict).
  bool save(const RunState& run, const QString& kind, const QString& what, QString* error = nullptr);
  // Replays a kept run into `into`; the number of messages, -1 when there
  // is no such run.
  int load(const QString& run_id, RunState& into) const;

  QString run_id_at(int row) const;

  // Rank 0's out-of-place busbw per size of two runs, sizes of either.
  struct Comparison {
    std::uint64_t bytes = 0;
    double busbw_a = -1;  // -1: that run has no such size
    double busbw_b = -1;
  };
  std::vector<Comparison> compare(const QString& run_a, const QString& run_b) const;

  enum Column {
    started_column,
    run_column,
    kind_column,
    what_column,
    ranks_column,
    result_column,
    rows_column,
    busbw_column,
    column_count
  };
  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role) const override;

  void reload();

 private:
  struct Row {
    QString run_id, kind, what, problems;
    qint64 started_ms = 0;
    int world_size = 0;
    bool ok = false;
    int rows = 0;
    double busbw = 0;
  };
  HistoryDatabase db_;
  std::vector<Row> rows_;
};

}  // namespace ringmaster::ui

// Models of the console, without widgets: what the agents said, shaped for
// views. Every model is fed by RunState::apply() on the GUI thread, from
// live agent messages or from a recorded stream, with the same result.
#pragma once

#include <QAbstractTableModel>
#include <QPointF>
#include <QRectF>
#include <QString>
#include <QStringList>
#include <deque>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <vector>

namespace ringmaster::ui {

// One message from one agent, as it crosses from the agent's I/O thread to
// the GUI thread (a queued signal argument: cheap to copy, immutable).
struct AgentMessage {
  QString agent;  // host:port
  std::shared_ptr<const nlohmann::json> body;
};

// The init stages in order, as the engine names them.
const QStringList& stage_names();

// Agents: address, state, host, version, topology, round trip, faults.
class AgentsModel : public QAbstractTableModel {
  Q_OBJECT
 public:
  enum Column {
    address_column,
    origin_column,  // the name the agent was found through, if any (beside the address it gave)
    state_column,
    host_column,
    version_column,
    topology_column,
    rtt_column,
    faults_column,
    column_count
  };
  using QAbstractTableModel::QAbstractTableModel;

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role) const override;

  void add(const QString& address, const QString& origin = {});
  void set_state(const QString& address, const QString& state);
  void set_inventory(const QString& address, const nlohmann::json& inventory);
  void set_rtt(const QString& address, double ms);
  int row_of(const QString& address) const;
  QString address(int row) const;
  const nlohmann::json& inventory(int row) const;

 private:
  struct Row {
    QString address, state, host, version, topology;
    double rtt_ms = -1;
    int faults = 0;
    nlohmann::json inventory;
    QString origin;
  };
  std::vector<Row> rows_;
};

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
  void add_stage(int rank, const nlohmann::json& event);
  void add_failure(int rank, const nlohmann::json& failure);
  void add_progress(int rank, const nlohmann::json& progress);
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
  void add(const nlohmann::json& result);
  const nlohmann::json& row(int r) const { return rows_.at(static_cast<std::size_t>(r)); }
  double average_busbw() const;
  // The table as shown (header line, then a line per row), and the rows
  // as the ranks sent them (a JSON array).
  QString to_csv() const;
  std::string to_json() const;
  // (bytes, busbw) of every row, out of place or in place, for plotting.
  std::vector<std::pair<double, double>> busbw_points(bool in_place) const;

 private:
  std::vector<nlohmann::json> rows_;
};

// The engine's choice per collective and size (protocol, channels), with
// the measured time of that first call.
class DecisionsModel : public QAbstractTableModel {
  Q_OBJECT
 public:
  using QAbstractTableModel::QAbstractTableModel;
  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role) const override;

  void clear();
  void add(const nlohmann::json& decision);

 private:
  std::vector<nlohmann::json> rows_;
};

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
  void add_table(const nlohmann::json& tuner_event);
  // A "result" or "decision" event: the measured time of that size.
  void add_measurement(const nlohmann::json& event);
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
    nlohmann::json candidates;
    int chosen = -1;
    double measured_us = -1;
    bool measured_from_result = false;
  };
  std::vector<Table> tables_;
  int selected_ = -1;
};

// Per-channel bandwidth from the ranks' cumulative counters: a rolling
// window of points per (rank, channel), and their sum per rank.
class BandwidthSeries {
 public:
  explicit BandwidthSeries(double window_s = 60) : window_s_(window_s) {}
  void clear();
  // A `sample` event of `rank`: cumulative bytes per channel at t_us.
  void add_sample(int rank, const nlohmann::json& sample);
  // Points (seconds since the run's first sample, GB/s), at most
  // `max_points` of them (min and max of each bucket kept).
  QList<QPointF> points(int rank, int channel, int max_points) const;
  QList<QPointF> total(int rank, int max_points) const;
  // What `rank` received from each peer (all channels), from the sample's
  // "peers" counters.
  QList<QPointF> peer_points(int rank, int peer, int max_points) const;
  std::vector<int> peers(int rank) const;
  int ranks() const;
  int channels(int rank) const;
  std::size_t points_received(int rank, int channel) const;
  double latest_s() const { return latest_s_; }
  double window_s() const { return window_s_; }

 private:
  struct Track {
    long long last_us = -1;
    std::uint64_t last_bytes = 0;
    std::size_t received = 0;
    std::deque<QPointF> points;
  };
  void push(Track& t, double x, double y);
  double window_s_;
  long long origin_us_ = -1;
  double latest_s_ = 0;
  std::map<std::pair<int, int>, Track> tracks_;       // (rank, channel)
  std::map<int, Track> totals_;                       // rank
  std::map<std::pair<int, int>, Track> peer_tracks_;  // (rank, peer it received from)
};

}  // namespace ringmaster::ui

Q_DECLARE_METATYPE(ringmaster::ui::AgentMessage)

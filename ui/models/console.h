// The console without its window: agent connections (each client on its
// own Asio thread, messages delivered to the GUI thread as queued value
// signals guarded by QPointer), local agents, runs, recording and replay.
#pragma once

#include <QFile>
#include <QObject>
#include <QPointer>
#include <QProcess>
#include <QTemporaryDir>
#include <QTimer>
#include <atomic>
#include <deque>
#include <map>
#include <memory>
#include <thread>
#include <vector>

#include "history.h"
#include "preflight_model.h"
#include "ringmaster/agent/preflight.h"
#include "run_models.h"
#include "wavefront_model.h"

namespace ringmaster::agent {
class AgentClient;
}

namespace ringmaster::ui {

struct RunSpec {
  QString collective = "all_reduce";
  QString min_bytes = "8";
  QString max_bytes = "64M";
  double step_factor = 2;
  int iters = 20;
  int warmup = 5;
  QString dtype = "float";
  QString op = "sum";
  QString algo;      // empty: the tuner picks
  QString proto;     // empty: the tuner picks
  int channels = 0;  // 0: the tuner picks
  int ranks_per_agent = 2;
  int world_size = 0;          // 0: agents x ranks_per_agent
  double store_timeout_s = 0;  // 0: the ranks' default
  double coll_timeout_s = 0;
};

// Events of one run, routed into the models.
class RunState : public QObject {
  Q_OBJECT
 public:
  explicit RunState(QObject* parent = nullptr) : QObject(parent) {}

  TimelineModel timeline;
  ResultsModel results;
  DecisionsModel decisions;
  TunerModel tuner;
  BandwidthSeries bandwidth;
  WavefrontModel wavefront;  // the latest stall report

  // `placement`: the agent (index) of every rank, for drawing rings over
  // the nodes.
  void begin(const QString& run_id, int world_size, int agents, std::vector<int> placement = {});
  // Takes the message if it is an event of this run.
  void apply(const AgentMessage& message);
  const QString& run_id() const { return run_id_; }
  int world_size() const { return world_size_; }
  bool running() const { return !run_id_.isEmpty() && agents_done_ < agents_; }
  bool ok() const { return ok_; }
  // "rank 1 was killed by SIGKILL", errors and failures, in arrival order.
  const QStringList& problems() const { return problems_; }
  // Links far slower than the run's others, named once every agent is
  // done ("rank 1 -> rank 2 at 5.1 MB/s, ..."); the run may still be ok.
  const QStringList& slow_links() const { return slow_links_; }
  std::size_t samples() const { return samples_; }
  // Each channel's ring as rank 0 reported it.
  const std::vector<std::vector<int>>& rings() const { return rings_; }
  // The all_reduce double binary trees: per tree, each rank's parent (-1 at the root).
  const std::vector<std::vector<int>>& trees() const { return trees_; }
  // What carries the connection `from` opened to `to` on a ring channel
  // ("SHM", "OFI", "SOCKET"; empty until that rank reported its connections).
  QString transport(int from, int to) const;
  const std::vector<int>& placement() const { return placement_; }
  int agents() const { return agents_; }
  // When begin() was called (ms since the epoch), and the run's messages
  // since (what the history keeps): every message but the samples, in
  // arrival order, then the samples of the bandwidth chart's window (and
  // a second before it), in arrival order. Older samples are dropped as
  // they leave the window: kept whole, 16 ranks of 32 channels took 1.8 GB
  // after ten minutes of streaming.
  qint64 started_ms() const { return started_ms_; }
  void set_started_ms(qint64 ms) { started_ms_ = ms; }
  std::vector<AgentMessage> messages() const;

 signals:
  void started(QString run_id);
  void finished(bool ok);
  void rings_changed();
  void stalled();

 private:
  QString run_id_;
  int world_size_ = 0;
  int agents_ = 0;
  int agents_done_ = 0;
  bool ok_ = true;
  QStringList problems_;
  QStringList slow_links_;
  std::vector<AgentMessage> messages_;  // all but samples
  std::deque<AgentMessage> recent_samples_;
  qint64 started_ms_ = 0;
  std::vector<std::pair<int, nlohmann::json>> links_;
  std::size_t samples_ = 0;
  std::vector<std::vector<int>> rings_;
  std::vector<std::vector<int>> trees_;
  std::map<std::pair<int, int>, QString> transports_;  // (from, to) -> transport
  std::vector<int> placement_;
};

// How the console reaches an agent: the token and, when the agent serves
// TLS, the CA that signed the agent's certificate and, for an agent started
// with --tls-client-ca, the console's own certificate and key (PEM files;
// empty: none).
struct AgentAccess {
  QString token;
  bool tls = false;
  QString tls_ca, tls_cert, tls_key;
  // The name the address came from when it resolved to several (a headless
  // Service): shown as the agent's origin, and what TLS verifies.
  QString name;
};

class Console : public QObject {
  Q_OBJECT
 public:
  explicit Console(QObject* parent = nullptr);
  ~Console() override;

  AgentsModel agents;
  RunState run;
  // Every run started here is kept when it finishes (and scenario runs,
  // by whoever replays them: keep_run).
  RunHistory history;
  bool keep_run(const QString& kind, const QString& what, QString* error = nullptr);

  // Starts n ringmaster-agents on loopback (free ports) and connects to
  // them; they stop with the console. They share a token made for them in
  // a private temporary directory, which also holds their state. Returns
  // false, with the reason in `error`, when one does not start.
  bool start_local_agents(int n, const QString& agent_path, QString* error = nullptr);
  void connect_agent(const QString& host, quint16 port, const QString& token = {});
  void connect_agent(const QString& host, quint16 port, const AgentAccess& access);
  void disconnect_agent(const QString& address);
  int connected_count() const;
  // Sends each connected agent its share; the first hosts the store.
  // Returns the run id; launch problems come as run_launch_failed.
  QString start_run(const RunSpec& spec);
  void cancel_run();
  // The latest preflight over the connected agents (docs/bringup.md).
  PreflightModel preflight;
  // Starts one over the connected agents, in connection order, on a
  // thread of its own; `preflight` holds the report when preflight_finished
  // comes. False, with why, when fewer than two agents are connected or
  // one is under way.
  bool start_preflight(const agent::PreflightOptions& options, QString* error = nullptr);
  bool preflight_running() const { return preflight_running_; }
  // Every message from now on, one JSON line each, for replay().
  bool record_to(const QString& path);
  // Feeds a recording into `into` as the live messages were.
  static int replay(const QString& path, RunState& into);

 signals:
  void agent_connected(QString address);
  void agent_lost(QString address, QString why);
  void run_launch_failed(QString why);
  void message_received(ringmaster::ui::AgentMessage message);
  void preflight_finished();
  void preflight_failed(QString why);

 private:
  struct Link {
    QString host;
    quint16 port = 0;
    std::shared_ptr<agent::AgentClient> client;
  };
  void on_message(const AgentMessage& m);
  void record(const nlohmann::json& line);
  void poll_agents();

  std::map<QString, Link> links_;
  std::vector<QString> order_;  // connection order: the first agent hosts rank 0
  QList<QProcess*> local_;
  std::unique_ptr<QTemporaryDir> local_dir_;  // the local agents' token and state
  QString local_token_;
  QTimer poll_;
  std::unique_ptr<QFile> recording_;
  QString pending_what_;  // the run started here that is not kept yet
  std::thread preflight_thread_;
  std::atomic<bool> preflight_running_{false};
};

}  // namespace ringmaster::ui

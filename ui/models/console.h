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
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "agents_model.h"
#include "certify_model.h"
#include "history.h"
#include "job_watch_model.h"
#include "links_model.h"
#include "nic_rates_model.h"
#include "preflight_model.h"
#include "ringmaster/agent/certify.h"
#include "ringmaster/agent/client.h"
#include "ringmaster/agent/linkcheck.h"
#include "ringmaster/agent/preflight.h"
#include "ringmaster/agent/requests.h"
#include "run_state.h"
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
  // "ringmaster"; "nccl": the same sweep through NCCL on each agent's GPUs
  // (ringmaster-nccl-perf; fp32 sums, so dtype and op are not sent);
  // "both": through Ringmaster, then through NCCL, the two runs compared
  // size by size (engines_compared). Both need float sums of a collective
  // NCCL's runner takes.
  QString engine = "ringmaster";
  // Launch although the node gate (node_gate.h) finds the agents' nodes
  // load different software or give their ranks different settings.
  bool allow_mixed_nodes = false;
};

// How the console reaches an agent: the token and, when the agent serves
// TLS, the CA that signed the agent's certificate and, for an agent started
// with --tls-client-ca, the console's own certificate and key (PEM files;
// empty: none).
struct AgentAccess {
  QString token;
  bool tls = false;
  QString tls_ca, tls_cert, tls_key;
  bool tls_insecure = false;  // TLS without a CA: any certificate taken (--tls-insecure)
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
  // With `topology_file`, each agent declares that node (and its ranks are
  // a node of their own): n such nodes rehearsed on this machine.
  bool start_local_agents(int n, const QString& agent_path, QString* error = nullptr,
                          const QString& topology_file = {});
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
  // The Links tab's heatmap: the latest link check, or the links of the
  // latest run that measured any (set when it finishes).
  LinksModel links;
  NicRatesModel nics;  // the rails of the connected agents' nodes
  // A link check over the connected agents (docs/bringup.md), in
  // connection order, on a thread of its own; `links` holds it when
  // linkcheck_finished comes. False, with why, when fewer than two agents
  // are connected or a check or preflight is under way.
  bool start_linkcheck(const agent::LinkcheckOptions& options, QString* error = nullptr);
  bool linkcheck_running() const { return linkcheck_running_; }
  // Certify (docs/certify.md) over the connected agents, in connection
  // order, on a thread of its own: `certify` shows each step as it begins
  // and ends, then holds the report (certify_finished). Its preflight and
  // link check also fill `preflight` and `links`, as those tabs show
  // them. False, with why, when fewer than two agents are connected or a
  // check is under way.
  CertifyModel certify;
  bool start_certify(agent::CertifyOptions options, QString* error = nullptr);
  bool certify_running() const { return certify_running_; }
  // A job the console did not launch, watched through every connected
  // agent (docs/watch.md): each agent with processes of the job starts a
  // watcher as the job's user; `watched` holds what they see. The console
  // never kills or signals a watched job. False, with why, when no agent is
  // connected or the request names no job; each agent's answer arrives in
  // watched's notes.
  JobWatchModel watched;
  bool start_watch(agent::WatchRequest request, QString* error = nullptr);
  // Ends the watch on every agent that took it.
  void stop_watch();
  // Every message from now on, one JSON line each, for replay().
  bool record_to(const QString& path);
  // What an agent's I/O thread does with each message it receives: records
  // it; applies it to the run's samples when it is a sample of the run
  // shown; queues anything else for the GUI thread, which takes all that
  // is queued in one go. Safe on any thread, and after the console is gone.
  using Arrival = std::function<void(AgentMessage)>;
  Arrival arrival();
  // Feeds a recording into `into` as the live messages were.
  static int replay(const QString& path, RunState& into);

 signals:
  void agent_connected(QString address);
  void agent_lost(QString address, QString why);
  void run_launch_failed(QString why);
  // A run with engine "both" ended: its Ringmaster run, then its NCCL run,
  // both kept in the history.
  void engines_compared(QString ringmaster_run, QString nccl_run);
  void preflight_finished();
  void preflight_failed(QString why);
  void linkcheck_finished();
  void linkcheck_failed(QString why);
  void certify_finished();
  void certify_failed(QString why);
  void certification_kept();
  // An agent's answer to a watch: it watches (`ok`, the processes and the
  // user in `text`) or why not.
  void watch_answered(QString agent, bool ok, QString text);

 private:
  struct Link {
    QString host;
    quint16 port = 0;
    std::shared_ptr<agent::AgentClient> client;
  };
  void on_message(const AgentMessage& m);
  void take_queued();  // on_message for each message arrival() queued
  void record(const nlohmann::json& line);
  void poll_agents();
  // The run's requests, one agent after another off the GUI thread: the
  // agent with rank 0 picks the store's port and the others need it.
  void send_run(std::vector<std::shared_ptr<agent::AgentClient>> clients, agent::RunRequest request, int per_agent);

  std::map<QString, Link> links_;
  std::vector<QString> order_;  // connection order: the first agent hosts rank 0
  QList<QProcess*> local_;
  std::unique_ptr<QTemporaryDir> local_dir_;  // the local agents' token and state
  QString local_token_;
  QTimer poll_;
  // Written by the agents' I/O threads and, for a run's beginning, here.
  class Recording;
  std::shared_ptr<Recording> recording_;
  // Messages for the GUI thread, in arrival order: one queued call takes
  // them all (a call each cost 2,048 ranks' stage events a tick 6 ms).
  struct Queue {
    std::mutex mutex;
    std::vector<AgentMessage> messages;
  };
  const std::shared_ptr<Queue> queue_ = std::make_shared<Queue>();
  QString pending_what_;  // the run started here that is not kept yet
  // Engine "both": the NCCL run to start when the Ringmaster run ends,
  // and, while the NCCL run goes, the Ringmaster run it follows.
  std::optional<RunSpec> then_nccl_;
  QString nccl_follows_;
  // The connected agents' clients and addresses, in connection order.
  std::vector<std::pair<std::shared_ptr<agent::AgentClient>, std::string>> connected_clients() const;
  std::thread preflight_thread_;
  std::atomic<bool> preflight_running_{false};
  // While a link check or a certification runs, the agents' events reach
  // its thread here.
  struct Inbox {
    std::mutex mutex;
    std::condition_variable ready;
    std::deque<nlohmann::json> messages;
  };
  std::shared_ptr<Inbox> checks_inbox_;
  // The next of the inbox's messages before a deadline, for a check's
  // thread; throws once `closing` is set.
  static agent::NextMessage next_from(const std::shared_ptr<Inbox>& inbox, const std::atomic<bool>& closing);
  std::thread linkcheck_thread_;
  std::atomic<bool> linkcheck_running_{false};
  void keep_certification(const agent::CertifyReport& report, const nlohmann::json& document, const QString& instance,
                          const QStringList& endpoints);
  std::thread certify_thread_;
  std::atomic<bool> certify_running_{false};
  std::atomic<bool> closing_{false};                           // the console is going: a certification stops
  std::vector<std::shared_ptr<agent::AgentClient>> watching_;  // the agents asked to watch
};

}  // namespace ringmaster::ui

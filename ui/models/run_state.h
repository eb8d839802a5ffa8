// The events of one run, routed into the models.
#pragma once

#include <QObject>
#include <QString>
#include <QStringList>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "agent_message.h"
#include "decisions_model.h"
#include "results_model.h"
#include "ringmaster/agent/events.h"
#include "run_log.h"
#include "run_samples.h"
#include "timeline_model.h"
#include "tuner_model.h"
#include "wavefront_model.h"

namespace ringmaster::ui {

// Events of one run, routed into the models.
class RunState : public QObject {
  Q_OBJECT
 public:
  explicit RunState(QObject* parent = nullptr) : QObject(parent) {}

  TimelineModel timeline;
  ResultsModel results;
  DecisionsModel decisions;
  TunerModel tuner;
  WavefrontModel wavefront;  // the latest stall report
  // The run's samples: the bandwidth series and those the history keeps.
  // The agents' I/O threads apply samples to it directly (Console).
  RunSamples& bandwidth() const { return *samples_; }
  std::shared_ptr<RunSamples> shared_samples() const { return samples_; }

  // `placement`: the agent (index) of every rank, for drawing rings over
  // the nodes.
  void begin(const QString& run_id, int world_size, int agents, std::vector<int> placement = {});
  // Takes the message if it is an event of this run. An event that does
  // not parse is named in problems() and changes nothing else.
  void apply(const AgentMessage& message);
  const QString& run_id() const { return run_id_; }
  int world_size() const { return world_size_; }
  bool running() const { return !run_id_.isEmpty() && agents_done_ < agents_; }
  bool ok() const { return ok_; }
  // "rank 1 was killed by SIGKILL", errors and failures, in arrival order:
  // the first kProblemsKept, then a line counting those left out.
  static constexpr int kProblemsKept = 200;
  const QStringList& problems() const { return problems_; }
  // The failure that explains the run: of the ranks' stage failures, one
  // at the earliest stage (the others usually follow from it), the first
  // to arrive there; with how many ranks failed in all. Empty when no
  // stage failed.
  struct Cause {
    int rank = -1;
    agent::events::StageFailed failure;
    int ranks_failed = 0;
  };
  const std::optional<Cause>& cause() const { return cause_; }
  // The cause in words, for the Live tab: stage, rank (and its agent),
  // addresses, what happened, the whole hint, and who else failed.
  QString cause_text() const;
  // Links far slower than the run's others, named once every agent is
  // done ("rank 1 -> rank 2 at 5.1 MB/s, ..."); the run may still be ok.
  const QStringList& slow_links() const { return slow_links_; }
  // Every rank's latest `links` event (receiving rank, event).
  const std::vector<std::pair<int, agent::events::Links>>& links() const { return links_; }
  std::size_t samples() const { return samples_->count(); }
  // Each channel's ring as rank 0 reported it.
  const std::vector<std::vector<int>>& rings() const { return rings_; }
  // The all_reduce double binary trees: per tree, each rank's parent (-1 at the root).
  const std::vector<std::vector<int>>& trees() const { return trees_; }
  // Where the engine placed the ranks (empty when it did not say): each
  // rank's GPU number on its node, and per channel, per ring position,
  // the NIC by which the ring enters or leaves the node there (its number,
  // -1 where it stays on the node, and its network device).
  const std::vector<int>& gpus() const { return gpus_; }
  struct RingNics {
    std::vector<int> nics;
    std::vector<QString> devices;
  };
  const std::vector<RingNics>& ring_nics() const { return ring_nics_; }
  // The run's agents (index as in placement()) by address, and the NICs
  // of each one's node (its network devices, from its topology) for the
  // rails view: a rail no channel uses shows idle.
  void set_agents(std::vector<QString> addresses, std::vector<std::vector<QString>> rails);
  const std::vector<QString>& agent_addresses() const { return agent_addresses_; }
  const std::vector<std::vector<QString>>& rails() const { return rails_; }
  // What carries the connection `from` opened to `to` on a ring channel
  // ("SHM", "OFI", "SOCKET"; empty until that rank reported its connections).
  QString transport(int from, int to) const;
  const std::vector<int>& placement() const { return placement_; }
  int agents() const { return agents_; }
  // When begin() was called (ms since the epoch), and the run's messages
  // since (what the history keeps): every message but the samples, in
  // arrival order, then the samples of the bandwidth chart's window (and
  // a second before it), in arrival order; the rest folded and bounded as
  // RunLog says. Older samples are dropped as
  // they leave the window: kept whole, 16 ranks of 32 channels took 1.8 GB
  // after ten minutes of streaming. The window's samples are kept as text,
  // and thinned per rank so that at most RunSamples::kKept stay: as parsed JSON, 2,048 ranks
  // sampling at 10 Hz held 4.4 GB.
  qint64 started_ms() const { return started_ms_; }
  void set_started_ms(qint64 ms) { started_ms_ = ms; }
  std::vector<AgentMessage> messages() const;
  const RunLog& log() const { return log_; }

 signals:
  void started(QString run_id);
  void finished(bool ok);
  void rings_changed();
  void stalled();
  // A stage failed; cause() may have changed.
  void stage_failed();

 private:
  // One per event type the models show but samples (RunSamples); the
  // others (done, output, rank_exit, unknown types) change nothing here.
  void route(int rank, const agent::events::StageEnded& e, const AgentMessage& m);
  void route(int rank, const agent::events::StageProgress& e, const AgentMessage& m);
  void route(int rank, const agent::events::StageFailed& e, const AgentMessage& m);
  void route(int rank, const agent::events::Result& e, const AgentMessage& m);
  void route(int rank, const agent::events::TunerTable& e, const AgentMessage& m);
  void route(int rank, const agent::events::Rings& e, const AgentMessage& m);
  void route(int rank, const agent::events::Trees& e, const AgentMessage& m);
  void route(int rank, const agent::events::Connections& e, const AgentMessage& m);
  void route(int rank, const agent::events::Decision& e, const AgentMessage& m);
  void route(int rank, const agent::events::CollectiveError& e, const AgentMessage& m);
  void route(int rank, const agent::events::RankFailed& e, const AgentMessage& m);
  void route(int rank, const agent::events::Stall& e, const AgentMessage& m);
  void route(int rank, const agent::events::Links& e, const AgentMessage& m);
  void route(int rank, const agent::events::RunDone& e, const AgentMessage& m);
  template <class Other>
  void route(int, const Other&, const AgentMessage&) {}

  QString run_id_;
  int world_size_ = 0;
  int agents_ = 0;
  int agents_done_ = 0;
  bool ok_ = true;
  QStringList problems_;
  QStringList slow_links_;
  std::string run_id_text_;  // run_id_, as events spell it
  void add_problem(const QString& line);
  std::optional<Cause> cause_;
  // Every rank's failure (one a rank), read together in cause_text().
  std::vector<agent::events::StageFailed> failures_;
  int problems_left_out_ = 0;
  RunLog log_;  // all but samples
  qint64 started_ms_ = 0;
  std::vector<std::pair<int, agent::events::Links>> links_;
  const std::shared_ptr<RunSamples> samples_ = std::make_shared<RunSamples>();
  std::vector<std::vector<int>> rings_;
  std::vector<std::vector<int>> trees_;
  std::vector<int> gpus_;
  std::vector<RingNics> ring_nics_;
  std::vector<QString> agent_addresses_;
  std::vector<std::vector<QString>> rails_;
  std::map<std::pair<int, int>, QString> transports_;  // (from, to) -> transport
  std::vector<int> placement_;
};

}  // namespace ringmaster::ui

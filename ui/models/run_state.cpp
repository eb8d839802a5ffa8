// RunState: a run's events into the models.
#include "models/run_state.h"

#include <QDateTime>
#include <algorithm>
#include <optional>
#include <variant>

#include "ringmaster/agent/telemetry.h"
#include "ringmaster/status.h"

namespace ringmaster::ui {

void RunState::begin(const QString& run_id, int world_size, int agents, std::vector<int> placement) {
  run_id_ = run_id;
  run_id_text_ = run_id.toStdString();
  placement_ = std::move(placement);
  rings_.clear();
  trees_.clear();
  gpus_.clear();
  ring_nics_.clear();
  agent_addresses_.clear();
  rails_.clear();
  transports_.clear();
  world_size_ = world_size;
  agents_ = agents;
  agents_done_ = 0;
  ok_ = true;
  problems_.clear();
  slow_links_.clear();
  links_.clear();
  log_.clear();
  problems_left_out_ = 0;
  cause_.reset();
  failures_.clear();
  samples_->begin(run_id_text_, world_size, placement_);
  started_ms_ = QDateTime::currentMSecsSinceEpoch();
  timeline.reset(world_size, placement_);
  results.clear();
  decisions.clear();
  tuner.clear();
  wavefront.clear();
  emit started(run_id);
}

std::vector<AgentMessage> RunState::messages() const {
  std::vector<AgentMessage> all = log_.messages();
  for (auto& s : samples_->kept())
    all.push_back(std::move(s));
  return all;
}

void RunState::apply(const AgentMessage& m) {
  if (!m.body && !m.event) return;
  std::optional<agent::events::EventMessage> parsed;
  const agent::events::EventMessage* message = m.event.get();
  try {
    if (!message && m.body) {
      parsed = agent::events::parse_event_message(*m.body, agent::events::Body::drop);
      if (parsed) message = &*parsed;
    }
  } catch (const Error& e) {
    // Another run's bad event is not this run's problem.
    const auto run = m.body->find("run_id");
    if (run != m.body->end() && run->is_string() && QString::fromStdString(run->get<std::string>()) == run_id_) {
      add_problem(QString("%1 sent an event the console cannot read: %2")
                      .arg(m.agent, QString::fromStdString(e.status().message())));
    }
    return;
  }
  if (!message || message->run_id != run_id_text_) return;
  // A sample the agent's I/O thread did not take (a replay, a test, one
  // read again here).
  if (samples_->take(m, *message)) return;
  const int rank = message->rank;
  log_.keep(m, *message);
  std::visit([&](const auto& e) { route(rank, e, m); }, message->event);
}

void RunState::route(int rank, const agent::events::StageEnded& e, const AgentMessage&) {
  timeline.add_stage(rank, e);
}

void RunState::route(int rank, const agent::events::StageProgress& e, const AgentMessage&) {
  timeline.add_progress(rank, e);
}

void RunState::route(int rank, const agent::events::StageFailed& e, const AgentMessage&) {
  timeline.add_failure(rank, e);
  const int failed = cause_ ? cause_->ranks_failed + 1 : 1;
  if (!cause_ || e.stage < cause_->failure.stage) cause_ = Cause{rank, e, 0};
  cause_->ranks_failed = failed;
  // One a rank: an agent that repeats itself cannot grow it past the world.
  if (failures_.size() < static_cast<std::size_t>(std::max(world_size_, 1))) failures_.push_back(e);
  add_problem(QString("rank %1 failed at %2: %3")
                  .arg(rank)
                  .arg(stage_names().value(static_cast<int>(e.stage)))
                  .arg(QString::fromStdString(e.summary)));
  ok_ = false;
  emit stage_failed();
}

QString RunState::cause_text() const {
  if (!cause_) return {};
  const auto& f = cause_->failure;
  const int rank = cause_->rank;
  QString where = QString("rank %1").arg(rank);
  const int agent =
      rank >= 0 && rank < static_cast<int>(placement_.size()) ? placement_[static_cast<std::size_t>(rank)] : -1;
  if (agent >= 0) {
    where += QString(" on agent %1").arg(agent);
    if (agent < static_cast<int>(agent_addresses_.size()))
      where += " (" + agent_addresses_[static_cast<std::size_t>(agent)] + ")";
  }
  QStringList lines;
  lines << QString("%1 FAILED on %2").arg(stage_names().value(static_cast<int>(f.stage)), where);
  lines << QString::fromStdString(f.summary);
  if (!f.local.empty() || !f.remote.empty()) {
    lines << QString("connecting %1 -> %2")
                 .arg(f.local.empty() ? QString("this rank") : QString::fromStdString(f.local),
                      f.remote.empty() ? QString("?") : QString::fromStdString(f.remote));
  }
  if (!f.errno_text.empty()) lines << "error: " + QString::fromStdString(f.errno_text);
  if (f.timeout_ms > 0) {
    lines << QString("waited %1 s of %2 s allowed")
                 .arg(f.elapsed_ms / 1000.0, 0, 'f', 1)
                 .arg(f.timeout_ms / 1000.0, 0, 'f', 1);
  }
  if (f.joined >= 0) {
    QStringList missing;
    for (int r : f.missing)
      missing << QString::number(r);
    lines << QString("%1 of %2 ranks joined%3")
                 .arg(f.joined)
                 .arg(f.world_size)
                 .arg(missing.isEmpty() ? QString() : "; missing: " + missing.join(", "));
  }
  if (!f.hint.empty())
    lines << ""
          << "Hint: " + QString::fromStdString(f.hint);
  for (const auto& t : agent::events::read_together(failures_))
    lines << ""
          << "Read together: " + QString::fromStdString(t);
  if (cause_->ranks_failed > 1) {
    lines << ""
          << QString("%1 ranks failed in all; this is the earliest stage any failed at (Stages tab: every rank)")
                 .arg(cause_->ranks_failed);
  }
  return lines.join("\n");
}

void RunState::set_agents(std::vector<QString> addresses, std::vector<std::vector<QString>> rails) {
  timeline.set_agent_addresses(addresses);
  agent_addresses_ = std::move(addresses);
  rails_ = std::move(rails);
}

void RunState::route(int rank, const agent::events::Result& e, const AgentMessage&) {
  if (rank != 0) return;
  results.add(e);
  decisions.measured(e.collective, e.bytes, e.out_of_place.time_us);
  tuner.add_measurement(e);
}

void RunState::route(int rank, const agent::events::TunerTable& e, const AgentMessage&) {
  if (rank == 0) tuner.add_table(e);
}

void RunState::route(int, const agent::events::Rings& e, const AgentMessage&) {
  rings_.clear();
  ring_nics_.clear();
  for (const auto& r : e.rings) {
    rings_.push_back(r.ranks);
    RingNics n{r.nics, {}};
    for (const auto& d : r.devices)
      n.devices.push_back(QString::fromStdString(d));
    ring_nics_.push_back(std::move(n));
  }
  gpus_ = e.gpus;
  emit rings_changed();
}

void RunState::route(int, const agent::events::Trees& e, const AgentMessage&) {
  trees_.clear();
  for (const auto& t : e.trees)
    trees_.push_back(t.parents);
  emit rings_changed();
}

void RunState::route(int rank, const agent::events::Connections& e, const AgentMessage&) {
  for (const auto& c : e.connections) {
    if (c.outgoing && c.channel >= 0) transports_[{rank, c.peer}] = QString::fromStdString(c.transport);
  }
  emit rings_changed();
}

void RunState::route(int rank, const agent::events::Decision& e, const AgentMessage&) {
  if (rank != 0) return;
  decisions.add(e);
  tuner.add_measurement(e);
}

void RunState::route(int rank, const agent::events::CollectiveError& e, const AgentMessage&) {
  add_problem(QString("rank %1: %2").arg(rank).arg(QString::fromStdString(e.message)));
  ok_ = false;
}

void RunState::route(int, const agent::events::RankFailed& e, const AgentMessage&) {
  add_problem(e.summary.empty() ? QString("a rank failed") : QString::fromStdString(e.summary));
  ok_ = false;
}

void RunState::route(int, const agent::events::Stall& e, const AgentMessage&) {
  wavefront.set(e.report);
  add_problem("Stall: " + wavefront.summary());
  emit stalled();
}

void RunState::route(int rank, const agent::events::Links& e, const AgentMessage&) {
  // A rank's counters are cumulative: its latest event says all.
  for (auto& [r, links] : links_) {
    if (r == rank) {
      links = e;
      return;
    }
  }
  links_.emplace_back(rank, e);
}

void RunState::add_problem(const QString& line) {
  if (problems_.size() < kProblemsKept) {
    problems_ << line;
    return;
  }
  ++problems_left_out_;
  const QString more = QString("... and %1 more (the first %2 are above)").arg(problems_left_out_).arg(kProblemsKept);
  if (problems_.size() == kProblemsKept) {
    problems_ << more;
  } else {
    problems_.last() = more;
  }
}

void RunState::route(int, const agent::events::RunDone& e, const AgentMessage&) {
  ok_ = ok_ && e.ok;
  if (++agents_done_ == agents_) {
    for (const auto& l : agent::find_slow_links(links_))
      slow_links_ << QString::fromStdString(l.describe());
    emit finished(ok_);
  }
}

QString RunState::transport(int from, int to) const {
  const auto it = transports_.find({from, to});
  return it == transports_.end() ? QString() : it->second;
}

}  // namespace ringmaster::ui

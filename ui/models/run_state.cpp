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
  messages_.clear();
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
  std::vector<AgentMessage> all = messages_;
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
      problems_ << QString("%1 sent an event the console cannot read: %2")
                       .arg(m.agent, QString::fromStdString(e.status().message()));
    }
    return;
  }
  if (!message || message->run_id != run_id_text_) return;
  // A sample the agent's I/O thread did not take (a replay, a test, one
  // read again here).
  if (samples_->take(m, *message)) return;
  const int rank = message->rank;
  messages_.push_back(m);
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
  problems_ << QString("rank %1 failed at %2: %3")
                   .arg(rank)
                   .arg(stage_names().value(static_cast<int>(e.stage)))
                   .arg(QString::fromStdString(e.summary));
  ok_ = false;
}

void RunState::set_agents(std::vector<QString> addresses, std::vector<std::vector<QString>> rails) {
  timeline.set_agent_addresses(addresses);
  agent_addresses_ = std::move(addresses);
  rails_ = std::move(rails);
}

void RunState::route(int rank, const agent::events::Result& e, const AgentMessage&) {
  if (rank != 0) return;
  results.add(e);
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
  problems_ << QString("rank %1: %2").arg(rank).arg(QString::fromStdString(e.message));
  ok_ = false;
}

void RunState::route(int, const agent::events::RankFailed& e, const AgentMessage&) {
  problems_ << (e.summary.empty() ? QString("a rank failed") : QString::fromStdString(e.summary));
  ok_ = false;
}

void RunState::route(int, const agent::events::Stall& e, const AgentMessage&) {
  wavefront.set(e.report);
  problems_ << "Stall: " + wavefront.summary();
  emit stalled();
}

void RunState::route(int rank, const agent::events::Links& e, const AgentMessage&) {
  links_.emplace_back(rank, e);
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

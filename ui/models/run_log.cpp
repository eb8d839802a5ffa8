// RunLog: a run's messages, folded and bounded.
#include "models/run_log.h"

#include <variant>

namespace ringmaster::ui {

namespace events = agent::events;

void RunLog::clear() {
  next_ = 0;
  entries_.clear();
  progress_.clear();
  decisions_.clear();
  stages_.clear();
  results_.clear();
  others_.clear();
  folded_ = dropped_ = 0;
}

std::uint64_t RunLog::add(const AgentMessage& m) {
  const std::uint64_t seq = next_++;
  entries_[seq] = Entry{m.agent, m.text ? m.text : std::make_shared<const std::string>(m.json().dump())};
  return seq;
}

// The entry at `seq` replaced by `m`, which takes its place at the end.
void RunLog::replace(std::uint64_t& seq, const AgentMessage& m) {
  entries_.erase(seq);
  seq = add(m);
  ++folded_;
}

void RunLog::keep(const AgentMessage& m, const events::EventMessage& e) {
  const int rank = e.rank;
  if (const auto* p = std::get_if<events::StageProgress>(&e.event)) {
    const auto [it, fresh] = progress_.try_emplace({rank, static_cast<int>(p->stage)});
    if (fresh) {
      it->second = add(m);
    } else {
      replace(it->second, m);
    }
  } else if (const auto* d = std::get_if<events::Decision>(&e.event)) {
    const auto [it, fresh] = decisions_.try_emplace({rank, d->collective, d->bytes});
    if (fresh) {
      it->second = add(m);
    } else {
      replace(it->second, m);
    }
  } else if (const auto* s = std::get_if<events::StageEnded>(&e.event)) {
    Stages& kept = stages_[{rank, static_cast<int>(s->stage)}];
    const long long end_us = s->begin_us + static_cast<long long>(s->duration_ms * 1000.0);
    if (kept.count < kStagesKept) {
      add(m);
    } else if (kept.count == kStagesKept) {
      kept.last = add(m);
      kept.last_end_us = end_us;
    } else if (end_us > kept.last_end_us) {
      replace(kept.last, m);
      kept.last_end_us = end_us;
    } else {
      ++dropped_;
    }
    ++kept.count;
  } else if (std::holds_alternative<events::Result>(e.event)) {
    results_.push_back(add(m));
    if (results_.size() > kResultsKept) {
      entries_.erase(results_.front());
      results_.pop_front();
      ++dropped_;
    }
  } else {
    auto it = others_.find(events::type_of(e.event));
    if (it == others_.end()) it = others_.emplace(std::string(events::type_of(e.event)), 0).first;
    if (it->second++ < kOthersKept) {
      add(m);
    } else {
      ++dropped_;
    }
  }
}

std::vector<AgentMessage> RunLog::messages() const {
  std::vector<AgentMessage> out;
  out.reserve(entries_.size());
  for (const auto& [seq, entry] : entries_) {
    auto body = nlohmann::json::parse(*entry.text, nullptr, false);
    if (!body.is_discarded())
      out.push_back({entry.agent, std::make_shared<const nlohmann::json>(std::move(body)), nullptr, nullptr});
  }
  return out;
}

}  // namespace ringmaster::ui

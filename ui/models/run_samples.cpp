// RunSamples: a run's samples, from the agents' I/O threads to the chart.
#include "models/run_samples.h"

#include <algorithm>
#include <variant>

namespace ringmaster::ui {

void RunSamples::begin(std::string run_id, int world_size, std::vector<int> placement) {
  std::lock_guard lock(mutex_);
  run_id_ = std::move(run_id);
  world_size_ = world_size;
  placement_ = std::move(placement);
  series_.clear();
  kept_.clear();
  kept_us_.assign(static_cast<std::size_t>(std::max(world_size, 0)), -1);
  count_ = 0;
}

bool RunSamples::take(const AgentMessage& m, const agent::events::EventMessage& event) {
  const auto* sample = std::get_if<agent::events::Sample>(&event.event);
  if (!sample) return false;
  // The text is made before the lock is taken.
  std::shared_ptr<const std::string> text = m.text;
  if (!text && m.body) text = std::make_shared<const std::string>(m.body->dump());
  const int rank = event.rank;
  std::lock_guard lock(mutex_);
  if (event.run_id != run_id_ || run_id_.empty()) return false;
  const int node =
      rank >= 0 && rank < static_cast<int>(placement_.size()) ? placement_[static_cast<std::size_t>(rank)] : -1;
  series_.add_sample(rank, *sample, node);
  count_.fetch_add(1, std::memory_order_relaxed);
  // The chart's window and a second more: the first point inside the
  // window needs the sample before it for its rate. Each rank's kept
  // samples are spaced so that the window holds at most kKept.
  const double window_us = (series_.window_s() + 1) * 1e6;
  const auto spacing_us = static_cast<long long>(window_us * std::max(world_size_, 1) / kKept);
  if (text && rank >= 0 && rank < static_cast<int>(kept_us_.size())) {
    long long& last = kept_us_[static_cast<std::size_t>(rank)];
    if (last < 0 || sample->t_us - last >= spacing_us) {
      last = sample->t_us;
      kept_.push_back({sample->t_us, m.agent, std::move(text)});
    }
  }
  const long long cutoff = sample->t_us - static_cast<long long>(window_us);
  while (!kept_.empty() && kept_.front().t_us < cutoff)
    kept_.pop_front();
  return true;
}

void RunSamples::add(int rank, const agent::events::Sample& sample, int node) {
  std::lock_guard lock(mutex_);
  series_.add_sample(rank, sample, node);
  count_.fetch_add(1, std::memory_order_relaxed);
}

std::vector<AgentMessage> RunSamples::kept() const {
  std::vector<Kept> copy;
  {
    std::lock_guard lock(mutex_);
    copy.assign(kept_.begin(), kept_.end());
  }
  std::vector<AgentMessage> out;
  out.reserve(copy.size());
  for (auto& k : copy) {
    auto body = nlohmann::json::parse(*k.text, nullptr, false);
    if (!body.is_discarded())
      out.push_back({std::move(k.agent), std::make_shared<const nlohmann::json>(std::move(body)), nullptr, nullptr});
  }
  return out;
}

}  // namespace ringmaster::ui

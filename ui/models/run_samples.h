// A run's samples, applied on whichever thread received them.
#pragma once

#include <QString>
#include <atomic>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "agent_message.h"
#include "bandwidth_series.h"
#include "ringmaster/agent/events.h"

namespace ringmaster::ui {

// The `sample` events of the run being shown: its bandwidth series and
// the samples its history keeps. An agent's I/O thread applies the
// samples it receives here, under a lock, and the GUI thread reads the
// series to draw: 2,048 ranks' samples at 10 Hz took the GUI thread more
// time to apply and free than it spent drawing.
class RunSamples {
 public:
  explicit RunSamples(double window_s = 60) : series_(window_s) {}

  // The series, locked while the reading lives: hold one for a whole
  // redraw, and not across anything that waits.
  class Reading {
   public:
    const BandwidthSeries* operator->() const { return series_; }
    const BandwidthSeries& operator*() const { return *series_; }

   private:
    friend class RunSamples;
    Reading(std::mutex& mutex, const BandwidthSeries& series) : lock_(mutex), series_(&series) {}
    std::unique_lock<std::mutex> lock_;
    const BandwidthSeries* series_;
  };
  Reading read() const { return Reading(mutex_, series_); }

  // A new run: what came before is dropped. `placement` gives each rank's
  // node (agent index), for the per-NIC series.
  void begin(std::string run_id, int world_size, std::vector<int> placement);
  // Takes `m` if its event (`event`: m.event, or the same read again) is a
  // sample of this run: applied to the series, and its text kept for the
  // history. False, and nothing changed, for any other message. Any thread.
  bool take(const AgentMessage& m, const agent::events::EventMessage& event);
  bool take(const AgentMessage& m) { return m.event && take(m, *m.event); }
  // A sample applied to the series alone, as if `rank` on `node` sent it.
  void add(int rank, const agent::events::Sample& sample, int node);

  std::size_t count() const { return count_.load(std::memory_order_relaxed); }
  double window_s() const { return series_.window_s(); }
  // The samples kept for the history: those of the series' window and a
  // second before it, thinned per rank to at most kKept (their counters
  // are cumulative, so a chart rebuilt from every other sample shows the
  // same rates averaged over twice the time), in arrival order.
  static constexpr std::size_t kKept = 120'000;
  std::vector<AgentMessage> kept() const;

 private:
  mutable std::mutex mutex_;
  BandwidthSeries series_;
  std::string run_id_;
  int world_size_ = 0;
  std::vector<int> placement_;
  struct Kept {
    long long t_us = 0;
    QString agent;
    std::shared_ptr<const std::string> text;  // the message as it came, compact
  };
  std::deque<Kept> kept_;
  std::vector<long long> kept_us_;  // per rank: when its last kept sample was taken
  std::atomic<std::size_t> count_{0};
};

}  // namespace ringmaster::ui

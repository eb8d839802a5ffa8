// What the history keeps of a run's messages (all but its samples),
// bounded whatever the run sends.
#pragma once

#include <QString>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "agent_message.h"
#include "ringmaster/agent/events.h"

namespace ringmaster::ui {

// A run's messages but samples, as compact text, with what repeats folded
// so that a run of any length keeps a bounded amount:
// - a rank's progress lines of one stage (a retry a second for minutes):
//   the latest only, as the timeline shows it;
// - a rank's decisions for one collective and size: the latest only;
// - a rank's stage events of one stage (TRANSPORT_CONNECT comes once per
//   connection): the first kStagesKept, then the one that ends last;
// - result rows: the latest kResultsKept;
// - every other kind: the first kOthersKept of each, then dropped.
// What was folded or dropped is counted. Kept as parsed JSON, every event
// cost 2.4-3.2 KiB: a replay of 1 M lines took 2.4 GB.
class RunLog {
 public:
  static constexpr std::size_t kStagesKept = 8;
  static constexpr std::size_t kResultsKept = 20'000;
  static constexpr std::size_t kOthersKept = 20'000;

  void clear();
  // Keeps `m`, whose event is `e`.
  void keep(const AgentMessage& m, const agent::events::EventMessage& e);
  // In arrival order (a folded message at the place of its latest).
  std::vector<AgentMessage> messages() const;
  std::size_t size() const { return entries_.size(); }
  // Messages folded into a later one, and those not kept at all.
  std::size_t folded() const { return folded_; }
  std::size_t dropped() const { return dropped_; }

 private:
  struct Entry {
    QString agent;
    std::shared_ptr<const std::string> text;
  };
  std::uint64_t add(const AgentMessage& m);
  void replace(std::uint64_t& seq, const AgentMessage& m);

  std::uint64_t next_ = 0;
  std::map<std::uint64_t, Entry> entries_;                 // by arrival
  std::map<std::pair<int, int>, std::uint64_t> progress_;  // (rank, stage) -> its entry
  std::map<std::tuple<int, std::string, std::uint64_t>, std::uint64_t> decisions_;
  struct Stages {
    std::size_t count = 0;
    std::uint64_t last = 0;  // the entry past the first kStagesKept
    long long last_end_us = 0;
  };
  std::map<std::pair<int, int>, Stages> stages_;
  std::deque<std::uint64_t> results_;
  std::map<std::string, std::size_t, std::less<>> others_;  // per event type
  std::size_t folded_ = 0, dropped_ = 0;
};

}  // namespace ringmaster::ui

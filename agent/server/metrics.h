// Prometheus metrics of an agent (text exposition format 0.0.4), fed by
// the same events the agent relays to clients.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <tuple>

#include "ringmaster/agent/events.h"

namespace ringmaster::agent {

class Metrics {
 public:
  // An event as relayed.
  void observe(const events::EventMessage& m);
  std::string render(double uptime_s, std::uint64_t runs_started, std::uint64_t runs_failed) const;

 private:
  void remember_run(const std::string& run);

  struct Channel {
    std::uint64_t sent = 0, received = 0, busy_ns = 0;
  };
  struct Result {
    std::string collective;
    std::uint64_t bytes = 0;
    double busbw = 0;
  };
  std::map<std::string, std::uint64_t> stage_failures_;            // by stage
  std::map<std::tuple<std::string, int, int>, Channel> channels_;  // run, rank, channel
  std::map<std::pair<std::string, int>, Result> results_;          // run, rank
  struct Calls {
    std::uint64_t started = 0, ended = 0;
  };
  std::map<std::pair<std::string, int>, Calls> calls_;                      // run, rank
  std::map<std::string, std::uint64_t> stalls_;                             // by run
  std::map<std::pair<std::string, std::string>, std::uint64_t> rank_ends_;  // run, outcome
  std::deque<std::string> runs_;                                            // the runs kept, oldest first
  std::uint64_t series_dropped_ = 0;                                        // channel samples not kept
};

}  // namespace ringmaster::agent

// JSON for rank telemetry, both ways.
#include "ringmaster/agent/telemetry.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <optional>
#include <stdexcept>

namespace ringmaster::agent {

using nlohmann::json;

json to_json(const StageEvent& e) {
  if (e.in_progress) return events::to_json(events::stage_progress(e));
  return events::to_json(events::stage_ended(e));
}

json to_json(const StageFailure& f) {
  return events::to_json(events::stage_failed(f));
}

json to_json(const PerfSpec& spec, const PerfRow& row) {
  return events::to_json(events::result(spec, row));
}

json to_json(const CollectiveRecord& r) {
  return events::to_json(events::decision(r));
}

json to_json(const tune::Decision& d) {
  return events::to_json(events::tuner_table(d));
}

json links_json(const std::vector<PeerLinkCounters>& links, const std::vector<ConnectionInfo>& connections) {
  return events::to_json(events::links(links, connections));
}

json to_json(const StallReport& report) {
  return events::to_json(events::Stall{report});
}

json connections_json(const std::vector<ConnectionInfo>& connections) {
  return events::to_json(events::Connections{connections});
}

namespace {
std::string rate_text(double gbs) {
  return gbs >= 1 ? fmt::format("{:.2f} GB/s", gbs) : fmt::format("{:.1f} MB/s", gbs * 1e3);
}
}  // namespace

std::string SlowLink::describe() const {
  return fmt::format("rank {} -> rank {} at {}, 1/{:.0f} of the median {}link ({})", from, to, rate_text(gbs),
                     gbs > 0 ? median_gbs / gbs : 0.0, transport.empty() ? "" : transport + " ", rate_text(median_gbs));
}

std::vector<SlowLink> find_slow_links(const std::vector<std::pair<int, events::Links>>& links_events) {
  // Per transport: a socket link next to shared memory is not slow.
  // A link whose every large transfer was waiting for its reader set no
  // pace: it counts at the fastest measured rate of its transport (gbs 0
  // marks it here).
  std::map<std::string, std::vector<SlowLink>> by_transport;
  for (const auto& [rank, e] : links_events) {
    for (const auto& l : e.links) {
      const double gbs = l.gbs.value_or(0.0);
      if (gbs > 0) {
        by_transport[l.transport].push_back({l.from, rank, gbs, 0, l.transport});
      } else if (l.ahead > 0) {
        by_transport[l.transport].push_back({l.from, rank, 0, 0, l.transport});
      }
    }
  }
  std::vector<SlowLink> slow;
  for (const auto& [transport, all] : by_transport) {
    if (all.size() < 3) continue;
    double fastest = 0;
    for (const auto& l : all)
      fastest = std::max(fastest, l.gbs);
    if (fastest == 0) continue;
    std::vector<double> rates;
    for (const auto& l : all)
      rates.push_back(l.gbs > 0 ? l.gbs : fastest);
    std::sort(rates.begin(), rates.end());
    const double median = rates[rates.size() / 2];
    for (auto l : all) {
      if (l.gbs == 0 || l.gbs >= median / 5) continue;
      l.median_gbs = median;
      slow.push_back(l);
    }
  }
  std::sort(slow.begin(), slow.end(), [](const SlowLink& a, const SlowLink& b) { return a.gbs < b.gbs; });
  return slow;
}

}  // namespace ringmaster::agent

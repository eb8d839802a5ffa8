// JSON for rank telemetry, both ways.
#include "ringmaster/agent/telemetry.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
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
  if (lossy()) {
    return fmt::format(
        "rank {} -> rank {} resent {:.1f}% of its TCP segments ({} of {}), against {:.2f}% on the median link: "
        "packets are lost on the way (a bad cable, optic or switch port, or a policer){}",
        from, to, 100.0 * static_cast<double>(resent) / static_cast<double>(segments), resent, segments,
        100.0 * median_resent_share, gbs > 0 ? fmt::format("; it ran at {}", rate_text(gbs)) : std::string());
  }
  if (median_gbs <= 0) {
    return fmt::format("rank {} -> rank {} at {}, while every other {}link outran its reader", from, to, rate_text(gbs),
                       transport.empty() ? "" : transport + " ");
  }
  return fmt::format("rank {} -> rank {} at {}, 1/{:.0f} of the median {}link ({})", from, to, rate_text(gbs),
                     gbs > 0 ? median_gbs / gbs : 0.0, transport.empty() ? "" : transport + " ", rate_text(median_gbs));
}

namespace {

// Lossy links, from what each sender's TCP resent: flagged apart from the
// rates, as a link that loses packets may still keep a fair rate (TCP
// resends fast) or look no slower than the links its losses hold up.
void add_lossy_links(const std::vector<std::pair<int, events::Links>>& links_events, std::vector<SlowLink>& out) {
  struct Sent {
    int from, to;
    std::uint64_t segments, resent;
    double share() const { return static_cast<double>(resent) / static_cast<double>(segments); }
  };
  std::vector<Sent> sent;
  for (const auto& [rank, e] : links_events) {
    for (const auto& t : e.sent) {
      if (t.segments >= kLossyMinSegments) sent.push_back({rank, t.to, t.segments, t.resent});
    }
  }
  if (sent.size() < 3) return;
  std::vector<double> shares;
  for (const auto& t : sent)
    shares.push_back(t.share());
  std::sort(shares.begin(), shares.end());
  const double median = shares[shares.size() / 2];
  for (const auto& t : sent) {
    if (!lossy_share(t.share(), median)) continue;
    // The rate its receiver measured, when it did.
    SlowLink l{t.from, t.to, 0, 0, {}, t.segments, t.resent, median};
    for (const auto& [rank, e] : links_events) {
      for (const auto& in : e.links) {
        if (rank == t.to && in.from == t.from) {
          l.gbs = in.gbs.value_or(0);
          l.transport = in.transport;
        }
      }
    }
    const auto known =
        std::find_if(out.begin(), out.end(), [&](const SlowLink& s) { return s.from == l.from && s.to == l.to; });
    if (known != out.end()) {
      known->segments = l.segments;
      known->resent = l.resent;
      known->median_resent_share = median;
    } else {
      out.push_back(l);
    }
  }
}

}  // namespace

std::vector<SlowLink> find_slow_links(const std::vector<std::pair<int, events::Links>>& links_events) {
  // Per transport: a socket link next to shared memory is not slow. A
  // link whose every large transfer was waiting for its reader set no
  // pace: it was faster than whatever paced the run, and counts as
  // faster than any measured link (gbs 0 marks it here).
  struct Seen {
    SlowLink link;
    double paced_s = 0;  // time its measured transfers took
  };
  std::map<std::string, std::vector<Seen>> by_transport;
  for (const auto& [rank, e] : links_events) {
    for (const auto& l : e.links) {
      const double gbs = l.gbs.value_or(0.0);
      if (gbs > 0) {
        by_transport[l.transport].push_back(
            {{l.from, rank, gbs, 0, l.transport}, static_cast<double>(l.bytes) / (gbs * 1e9)});
      } else if (l.ahead > 0) {
        by_transport[l.transport].push_back({{l.from, rank, 0, 0, l.transport}, 0});
      }
    }
  }
  std::vector<SlowLink> slow;
  for (const auto& [transport, all] : by_transport) {
    if (all.size() < 3) continue;
    std::vector<double> rates;
    for (const auto& s : all)
      rates.push_back(s.link.gbs > 0 ? s.link.gbs : std::numeric_limits<double>::infinity());
    std::sort(rates.begin(), rates.end());
    if (rates.front() == std::numeric_limits<double>::infinity()) continue;  // nothing measured
    const double median = rates[rates.size() / 2];
    for (const auto& s : all) {
      // Slow: below a fifth of the median, for long enough to matter. A
      // transfer or two held up by the scheduler on a busy host is no
      // slow link (two ranks per agent on one 2-core host raised false
      // alarms); a link 5x slower keeps its pace for the whole run.
      if (s.link.gbs == 0 || s.link.gbs >= median / 5 || s.paced_s < kSlowLinkMinSeconds) continue;
      SlowLink l = s.link;
      // The median to name: the measured one, or, where most links
      // outran their readers, the fastest measured link but this one.
      l.median_gbs = median;
      if (median == std::numeric_limits<double>::infinity()) {
        l.median_gbs = 0;
        for (const auto& other : all)
          if (&other != &s) l.median_gbs = std::max(l.median_gbs, other.link.gbs);
        if (l.median_gbs > 0 && l.gbs >= l.median_gbs / 5) continue;
      }
      slow.push_back(l);
    }
  }
  add_lossy_links(links_events, slow);
  std::sort(slow.begin(), slow.end(), [](const SlowLink& a, const SlowLink& b) { return a.gbs < b.gbs; });
  return slow;
}

}  // namespace ringmaster::agent

// run_linkcheck: a two-rank sendrecv run per pair, the pairs of a round at
// once, the rounds one after the other; and the reading of what they
// measured.
#include "ringmaster/agent/linkcheck.h"
#include "ringmaster/agent/requests.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <type_traits>
#include <variant>

#include "ringmaster/agent/client.h"
#include "ringmaster/agent/events.h"
#include "ringmaster/agent/telemetry.h"
#include "ringmaster/status.h"

namespace ringmaster::agent {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t m = v.size() / 2;
  return v.size() % 2 == 1 ? v[m] : (v[m - 1] + v[m]) / 2;
}

std::string rate_text(double gbs) {
  return gbs >= 1 ? fmt::format("{:.2f} GB/s", gbs) : fmt::format("{:.1f} MB/s", gbs * 1000);
}

// A NIC's speed as its vendor says it: "100 Gb/s", "2.5 Gb/s", "100 Mb/s".
std::string speed_text(int mbps) {
  if (mbps < 1000) return fmt::format("{} Mb/s", mbps);
  return mbps % 1000 == 0 ? fmt::format("{} Gb/s", mbps / 1000) : fmt::format("{:.1f} Gb/s", mbps / 1000.0);
}

// One pair's run: rank 0 on `a`, rank 1 on `b`.
struct PairRun {
  int a = 0, b = 0;
  std::string run_id;
  int done = 0;  // run_done events seen (one per agent)
  std::string error;
  double best_algbw = 0;  // rank 0's best sendrecv row: the pair's end-to-end rate
  // Its ranks never met: the store could not be hosted or reached (a
  // port another run took in between, several agents sharing one host).
  // The link was not tried; the pair is run once more.
  bool store_failed = false;
};

// The ranks' environment for each pair: the user's, and no tuner
// calibration unless asked for: a pair's broadcast needs no tuner, and
// calibrating would time each link once more before the check does
// (minutes through a crawling link).
std::map<std::string, std::string> pair_env(std::map<std::string, std::string> env) {
  env.emplace("RINGMASTER_TUNE_CALIBRATE", "0");
  return env;
}

// The run of one pair: a broadcast from rank 0 (on `a`) to rank 1 (on
// `b`) at the check's size; the first rank's agent picks the store's port
// and the second is told it. A pair that does not start says why.
PairRun start_pair(const std::vector<PreflightAgent>& agents, const LinkcheckOptions& o, const std::string& tag, int a,
                   int b) {
  PairRun run{a, b, fmt::format("{}-{}-{}", tag, a, b), 0, {}};
  RunRequest request;
  request.run_id = run.run_id;
  request.world_size = 2;
  request.master_addr = agents[static_cast<std::size_t>(a)].address;
  request.env = pair_env(o.env);
  request.perf.collective = Collective::broadcast;
  request.perf.root = 0;
  request.perf.min_bytes = request.perf.max_bytes = parse_request_size(o.bytes);
  request.perf.iters = o.iters;
  request.perf.warmup = o.warmup;
  request.store_timeout_s = 10;
  request.bootstrap_timeout_s = 10;
  request.coll_timeout_s = 30;
  try {
    request.ranks = {0};
    const json reply = agents[static_cast<std::size_t>(a)].client->call(request.to_json());
    request.master_port = reply.at("master_port").get<int>();
    request.ranks = {1};
    agents[static_cast<std::size_t>(b)].client->call(request.to_json());
  } catch (const std::exception& e) {
    run.error = fmt::format("the run did not start: {}", e.what());
    run.done = 2;
  }
  return run;
}

// One round: every directed pair's run started at once, their events read
// until each ends (or o.per_pair passes), and what rank 1 measured; each
// link with whether its ranks never met (a pair to run once more).
std::vector<std::pair<LinkMeasure, bool>> measure_round(const std::vector<PreflightAgent>& agents,
                                                        const NextMessage& next, const LinkcheckOptions& o,
                                                        const std::string& tag,
                                                        const std::vector<std::pair<int, int>>& directed,
                                                        const std::function<double(int, int)>& nominal_gbs) {
  std::vector<std::pair<LinkMeasure, bool>> out;
  std::vector<PairRun> runs;
  for (const auto& [a, b] : directed)
    runs.push_back(start_pair(agents, o, tag, a, b));
  // The receiving rank's links event.
  std::map<std::pair<std::string, int>, events::Links> measured;
  const auto deadline = Clock::now() + o.per_pair;
  auto all_done = [&] { return std::all_of(runs.begin(), runs.end(), [](const PairRun& p) { return p.done >= 2; }); };
  while (!all_done()) {
    const auto m = next(deadline);
    if (!m) break;
    std::optional<events::EventMessage> message;
    try {
      message = events::parse_event_message(*m);
    } catch (const Error&) {
      continue;  // not this check's: a pair whose event is unreadable reports nothing measured
    }
    if (!message) continue;
    const auto it =
        std::find_if(runs.begin(), runs.end(), [&](const PairRun& p) { return p.run_id == message->run_id; });
    if (it == runs.end()) continue;
    const int rank = message->rank;
    std::visit(
        [&](const auto& e) {
          using E = std::decay_t<decltype(e)>;
          if constexpr (std::is_same_v<E, events::Links>) {
            measured[{message->run_id, rank}] = e;
          } else if constexpr (std::is_same_v<E, events::RunDone>) {
            ++it->done;
          } else if constexpr (std::is_same_v<E, events::Result>) {
            if (rank == 0) it->best_algbw = std::max(it->best_algbw, e.out_of_place.algbw);
          } else if constexpr (std::is_same_v<E, events::StageFailed>) {
            if (it->error.empty()) {
              it->error =
                  fmt::format("{} failed at {}: {}", rank == 0 ? "rank 0" : "rank 1", name_of(e.stage), e.summary);
              it->store_failed = e.stage == Stage::store_connect || e.stage == Stage::store_barrier;
            }
          } else if constexpr (std::is_same_v<E, events::CollectiveError>) {
            if (it->error.empty()) it->error = e.message;
          }
        },
        message->event);
  }
  for (auto& run : runs) {
    if (run.done < 2 && run.error.empty()) {
      run.error = fmt::format("no end within {} s", o.per_pair.count());
      for (const auto& p : {run.a, run.b}) {
        try {
          agents[static_cast<std::size_t>(p)].client->call({{"type", "cancel"}, {"run_id", run.run_id}});
        } catch (const std::exception&) {
        }
      }
    }
    // Rank 1, on b, measured what came from a.
    LinkMeasure l;
    l.from = run.a;
    l.to = run.b;
    l.nominal_gbs = nominal_gbs(run.a, run.b);
    const auto it = measured.find({run.run_id, 1});
    if (it != measured.end()) {
      for (const auto& x : it->second.links) {
        l.gbs = std::max(l.gbs, x.gbs.value_or(0.0));
        l.ahead = l.ahead || x.ahead > 0 || x.bytes > 0;
        if (!x.transport.empty()) l.transport = x.transport;
      }
    }
    l.ahead = l.ahead && l.gbs <= 0;
    // Rank 0, on a, counted what its TCP sent and resent toward b.
    if (const auto sender = measured.find({run.run_id, 0}); sender != measured.end()) {
      for (const auto& t : sender->second.sent) {
        if (t.to != 1) continue;
        l.segments = t.segments;
        l.resent = t.resent;
      }
    }
    if (l.ahead) l.floor_gbs = run.best_algbw;
    if (l.gbs <= 0 && !l.ahead) l.error = run.error.empty() ? "nothing measured" : run.error;
    out.emplace_back(std::move(l), run.store_failed && l.gbs <= 0);
  }
  return out;
}

}  // namespace

std::vector<std::vector<std::pair<int, int>>> round_robin_pairs(int n) {
  std::vector<std::vector<std::pair<int, int>>> rounds;
  if (n < 2) return rounds;
  const int m = n % 2 == 0 ? n : n + 1;  // with a stand-in node that sits out
  std::vector<int> at(static_cast<std::size_t>(m));
  for (int i = 0; i < m; ++i)
    at[static_cast<std::size_t>(i)] = i;
  for (int r = 0; r < m - 1; ++r) {
    std::vector<std::pair<int, int>> round;
    for (int k = 0; k < m / 2; ++k) {
      const int x = at[static_cast<std::size_t>(k)], y = at[static_cast<std::size_t>(m - 1 - k)];
      if (x < n && y < n) round.emplace_back(std::min(x, y), std::max(x, y));
    }
    rounds.push_back(std::move(round));
    // The circle method: the first stays, the others turn by one.
    std::rotate(at.begin() + 1, at.end() - 1, at.end());
  }
  return rounds;
}

const LinkMeasure* LinkcheckReport::link(int from, int to) const {
  for (const auto& l : links) {
    if (l.from == from && l.to == to) return &l;
  }
  return nullptr;
}

LinkcheckReport run_linkcheck(const std::vector<PreflightAgent>& agents, const NextMessage& next,
                              const LinkcheckOptions& o) {
  const auto started = Clock::now();
  LinkcheckReport report;
  for (const auto& a : agents)
    report.nodes.push_back(a.address);
  // Which NIC holds each node's address, and its speed.
  for (const auto& a : agents) {
    NodeNic nic;
    try {
      const Inventory inventory = Inventory::parse(a.client->call({{"type", "inventory"}}));
      for (const auto& i : inventory.interfaces) {
        if (i.address != a.address) continue;
        nic.name = i.name;
        nic.speed_mbps = i.speed_mbps;
      }
    } catch (const std::exception&) {
      // Not known: the links are measured all the same.
    }
    report.nics.push_back(std::move(nic));
  }
  const auto nominal_gbs = [&](int a, int b) {
    const int slower = std::min(report.nics[static_cast<std::size_t>(a)].speed_mbps,
                                report.nics[static_cast<std::size_t>(b)].speed_mbps);
    return slower > 0 ? slower / 8000.0 : 0.0;
  };
  const auto rounds = round_robin_pairs(static_cast<int>(agents.size()));
  report.rounds = static_cast<int>(rounds.size());
  const std::string tag = fmt::format("linkcheck-{}-{}", ::getpid(), started.time_since_epoch().count() % 1000000);
  // Each round twice, one direction at a time: a broadcast from rank 0 on
  // `from` to rank 1 on `to` moves data one way only, so each link is
  // timed on its own (a sendrecv both ways at once would pace the fast
  // direction by the slow one).
  for (std::size_t r = 0; r < 2 * rounds.size(); ++r) {
    if (o.before_round) o.before_round(static_cast<int>(r));
    std::vector<std::pair<int, int>> directed;
    for (const auto& [x, y] : rounds[r / 2])
      directed.emplace_back(r % 2 == 0 ? x : y, r % 2 == 0 ? y : x);
    auto measures = measure_round(agents, next, o, tag, directed, nominal_gbs);
    // Pairs whose ranks never met are run once more, on their own.
    std::vector<std::pair<int, int>> again;
    for (const auto& [l, store_failed] : measures) {
      if (store_failed) again.emplace_back(l.from, l.to);
    }
    if (!again.empty()) {
      if (o.before_round) o.before_round(static_cast<int>(r));  // a scenario's faults, as for the round
      for (auto& [l, retried] : measure_round(agents, next, o, tag + "-again", again, nominal_gbs)) {
        for (auto& m : measures) {
          if (m.first.from == l.from && m.first.to == l.to) m.first = std::move(l);
        }
      }
    }
    for (auto& m : measures)
      report.links.push_back(std::move(m.first));
  }
  std::sort(report.links.begin(), report.links.end(),
            [](const LinkMeasure& x, const LinkMeasure& y) { return std::tie(x.from, x.to) < std::tie(y.from, y.to); });
  report.seconds = std::chrono::duration<double>(Clock::now() - started).count();
  return report;
}

std::string measured_well(const LinkcheckReport& r, int from, int to) {
  std::vector<double> rates;
  for (const auto& l : r.links) {
    if (l.gbs > 0) rates.push_back(l.gbs);
  }
  const LinkMeasure* l = r.link(from, to);
  if (rates.empty() || l == nullptr) return {};
  const double typical = median(rates);
  if (l->alone_ahead || l->alone_gbs >= typical / 5) {
    return l->alone_ahead ? "the link check measured it again alone: ahead of its reader"
                          : fmt::format("the link check measured it again alone at {:.2f} GB/s (median {:.2f} GB/s)",
                                        l->alone_gbs, typical);
  }
  if (l->gbs < typical / 5) return {};  // slow by the check's own rule
  return fmt::format("the link check measured it alone at {:.2f} GB/s (median {:.2f} GB/s)", l->gbs, typical);
}

std::vector<std::string> diagnose_links(const LinkcheckReport& r) {
  std::vector<std::string> out;
  for (auto& p : find_link_problems(r))
    out.push_back(std::move(p.text));
  return out;
}

namespace {

// Links whose sender resent at least kLossyResentShare of its segments
// and five times the median link's share; a node every link into which
// (most links into which) are lossy is named instead of its links.
void find_lossy_links(const LinkcheckReport& r, std::vector<LinkProblem>& out) {
  std::vector<const LinkMeasure*> counted;
  for (const auto& l : r.links) {
    if (l.segments >= kLossyMinSegments) counted.push_back(&l);
  }
  if (counted.size() < 3) return;
  std::vector<double> shares;
  for (const auto* l : counted)
    shares.push_back(static_cast<double>(l->resent) / static_cast<double>(l->segments));
  const double typical = median(shares);
  auto share = [](const LinkMeasure& l) { return static_cast<double>(l.resent) / static_cast<double>(l.segments); };
  auto lossy = [&](const LinkMeasure& l) { return l.segments >= kLossyMinSegments && lossy_share(share(l), typical); };
  const int n = static_cast<int>(r.nodes.size());
  std::set<int> lossy_nodes;
  for (int x = 0; x < n; ++x) {
    int into = 0, lossy_into = 0;
    double least = 1;
    for (const auto& l : r.links) {
      if (l.to != x || l.segments < kLossyMinSegments) continue;
      ++into;
      if (lossy(l)) ++lossy_into, least = std::min(least, share(l));
    }
    // Most of them: loss is random, and a link's few seconds can stay
    // under the share by chance.
    if (lossy_into < 2 || 2 * lossy_into <= into) continue;
    lossy_nodes.insert(x);
    out.push_back({LinkProblem::Kind::node_lossy,
                   fmt::format("{} of {} links into node {} ({}) lose packets: their senders resent at least {:.1f}% "
                               "of their TCP segments, against {:.2f}% on the median link: that node's NIC, cable or "
                               "optic, its switch port, or a policer on its side",
                               lossy_into, into, x, r.nodes[static_cast<std::size_t>(x)], 100 * least, 100 * typical),
                   x});
  }
  // One link alone is named only when its rate shows the loss too (under
  // half the median link's): a sender under a busy CPU resends segments
  // that were not lost (1.8% on a healthy veth link while eight namespaced
  // hosts shared two cores), and its link still runs at full speed, while
  // real loss of that share stalls TCP on its retransmission timer.
  std::vector<double> rates;
  for (const auto& l : r.links)
    if (l.gbs > 0) rates.push_back(l.gbs);
  const double typical_gbs = rates.empty() ? 0 : median(rates);
  for (const auto& l : r.links) {
    if (!lossy(l) || lossy_nodes.count(l.to) != 0) continue;
    if (!(l.gbs > 0 && l.gbs < typical_gbs / 2)) continue;
    out.push_back(
        {LinkProblem::Kind::link_lossy,
         fmt::format("the link node {} -> node {} ({} -> {}) loses packets: its sender resent {:.1f}% of "
                     "its TCP segments ({} of {}), against {:.2f}% on the median link",
                     l.from, l.to, r.nodes[static_cast<std::size_t>(l.from)], r.nodes[static_cast<std::size_t>(l.to)],
                     100 * share(l), l.resent, l.segments, 100 * typical),
         -1, l.from, l.to});
  }
}

}  // namespace

std::vector<LinkProblem> find_link_problems(const LinkcheckReport& r) {
  using Kind = LinkProblem::Kind;
  std::vector<LinkProblem> out;
  const int n = static_cast<int>(r.nodes.size());
  std::set<std::pair<int, int>> failed_pairs;
  for (const auto& l : r.links) {
    if (l.gbs > 0 || l.ahead) continue;
    const auto pair = std::make_pair(std::min(l.from, l.to), std::max(l.from, l.to));
    if (!failed_pairs.insert(pair).second) continue;
    out.push_back({Kind::not_measured,
                   fmt::format("node {} <-> node {} ({} <-> {}) was not measured: {}", pair.first, pair.second,
                               r.nodes[static_cast<std::size_t>(pair.first)],
                               r.nodes[static_cast<std::size_t>(pair.second)], l.error),
                   -1, pair.first, pair.second});
  }
  // The median of each transport's links; slow is under a fifth of it.
  std::map<std::string, std::vector<double>> by_transport;
  for (const auto& l : r.links) {
    if (l.gbs > 0) by_transport[l.transport].push_back(l.gbs);
  }
  std::map<std::string, double> medians;
  for (const auto& [t, v] : by_transport)
    medians[t] = v.size() >= 3 ? median(v) : 0;
  auto slow = [&](const LinkMeasure& l) {
    const double m = medians[l.transport];
    return l.gbs > 0 && m > 0 && l.gbs < m / 5;
  };
  std::set<std::pair<int, int>> told;
  // A node whose every link out (or in) is slow, while others are not.
  for (int x = 0; x < n; ++x) {
    for (const bool leaving : {true, false}) {
      int count = 0, slow_count = 0;
      double worst = 0, m = 0;
      std::string transport;
      for (const auto& l : r.links) {
        if ((leaving ? l.from : l.to) != x || l.gbs <= 0) continue;
        ++count;
        if (!slow(l)) continue;
        ++slow_count;
        worst = std::max(worst, l.gbs);
        m = medians[l.transport];
        transport = l.transport;
      }
      if (count < 2 || slow_count != count) continue;
      out.push_back({Kind::node_slow,
                     fmt::format("every link {} node {} ({}) is slow: at most {} against a median of {} ({}): "
                                 "that node's NIC, cable, link settings or a limit on its traffic",
                                 leaving ? "leaving" : "into", x, r.nodes[static_cast<std::size_t>(x)],
                                 rate_text(worst), rate_text(m), transport),
                     x});
      for (const auto& l : r.links) {
        if ((leaving ? l.from : l.to) == x) told.insert({l.from, l.to});
      }
    }
  }
  for (const auto& l : r.links) {
    if (!slow(l) || told.count({l.from, l.to}) != 0) continue;
    told.insert({l.from, l.to});
    out.push_back({Kind::link_slow,
                   fmt::format("the link node {} -> node {} ({} -> {}) is slow: {} against a median of {} ({})", l.from,
                               l.to, r.nodes[static_cast<std::size_t>(l.from)], r.nodes[static_cast<std::size_t>(l.to)],
                               rate_text(l.gbs), rate_text(medians[l.transport]), l.transport),
                   -1, l.from, l.to});
  }
  find_lossy_links(r, out);
  // A NIC slower than the others': negotiated down (a bad cable or port,
  // a switch port forced to a lower speed) or another model.
  int fastest_nic = 0;
  for (const auto& nic : r.nics)
    fastest_nic = std::max(fastest_nic, nic.speed_mbps);
  for (std::size_t x = 0; x < r.nics.size() && x < r.nodes.size(); ++x) {
    const NodeNic& nic = r.nics[x];
    if (nic.speed_mbps <= 0 || nic.speed_mbps >= fastest_nic) continue;
    out.push_back({Kind::nic_slow,
                   fmt::format("node {} ({}) reaches the others through {} at {}, where the fastest node's NIC runs "
                               "at {}: a link negotiated down (cable, port, switch setting) or another NIC",
                               x, r.nodes[x], nic.name, speed_text(nic.speed_mbps), speed_text(fastest_nic)),
                   static_cast<int>(x)});
  }
  // Against what the NICs can carry: far under it is slow even when every
  // link is (a median of slow links calls none of them slow). Far: one
  // TCP stream fills a fraction of a 400 Gb/s NIC, so only under a
  // hundredth of it is named here; the ratio is in the report.
  for (const auto& l : r.links) {
    if (l.gbs <= 0 || l.nominal_gbs <= 0 || l.gbs >= l.nominal_gbs / 100 || told.count({l.from, l.to}) != 0) continue;
    out.push_back(
        {Kind::under_nic,
         fmt::format("the link node {} -> node {} ({} -> {}) moved {}, under a hundredth of its NICs' {} "
                     "({})",
                     l.from, l.to, r.nodes[static_cast<std::size_t>(l.from)], r.nodes[static_cast<std::size_t>(l.to)],
                     rate_text(l.gbs), speed_text(static_cast<int>(l.nominal_gbs * 8000)), l.transport),
         -1, l.from, l.to});
  }
  return out;
}

std::string render_linkcheck(const LinkcheckReport& r, const std::vector<std::string>& findings) {
  const int n = static_cast<int>(r.nodes.size());
  std::string out =
      fmt::format("link check over {} node(s), {} round(s) of disjoint pairs, in {:.1f} s\n", n, r.rounds, r.seconds);
  for (int i = 0; i < n; ++i) {
    const auto u = static_cast<std::size_t>(i);
    const NodeNic* nic = u < r.nics.size() && !r.nics[u].name.empty() ? &r.nics[u] : nullptr;
    out += fmt::format("  node {:<3} {}{}\n", i, r.nodes[u],
                       !nic                  ? std::string()
                       : nic->speed_mbps > 0 ? fmt::format(" ({} at {})", nic->name, speed_text(nic->speed_mbps))
                                             : fmt::format(" ({}, speed not known)", nic->name));
  }
  std::set<std::string> transports;
  for (const auto& l : r.links) {
    if (!l.transport.empty()) transports.insert(l.transport);
  }
  out += fmt::format("\nMB/s measured at the receiver (rows send, columns receive){}\n",
                     transports.empty() ? "" : fmt::format("; over {}", fmt::join(transports, ", ")));
  out += fmt::format("{:>8}", "");
  for (int j = 0; j < n; ++j)
    out += fmt::format("{:>9}", "node " + std::to_string(j));
  out += "\n";
  for (int i = 0; i < n; ++i) {
    out += fmt::format("{:>8}", "node " + std::to_string(i));
    for (int j = 0; j < n; ++j) {
      const LinkMeasure* l = r.link(i, j);
      out += fmt::format("{:>9}", i == j                              ? std::string("-")
                                  : l && l->ahead && l->floor_gbs > 0 ? fmt::format(">={:.0f}", l->floor_gbs * 1000)
                                  : l && l->ahead                     ? std::string("ahead")
                                  : !l || l->gbs <= 0                 ? std::string("failed")
                                                                      : fmt::format("{:.0f}", l->gbs * 1000));
    }
    out += "\n";
  }
  out +=
      "(>=N, ahead: the data was always there before the receiver waited for it, too fast to time; N is the "
      "pair's end-to-end rate, which the link carried at least)\n\n";
  if (findings.empty()) out += "no slow or failed link\n";
  for (const auto& f : findings)
    out += "problem: " + f + "\n";
  return out;
}

json to_json(const LinkcheckReport& r, const std::vector<std::string>& findings) {
  json links = json::array();
  for (const auto& l : r.links) {
    json one = {{"from", l.from}, {"to", l.to}, {"gbs", l.gbs}, {"transport", l.transport}};
    if (l.nominal_gbs > 0) one["nominal_gbs"] = l.nominal_gbs;
    if (l.ahead) one["ahead"] = true;
    if (l.floor_gbs > 0) one["floor_gbs"] = l.floor_gbs;
    if (l.alone_gbs > 0) one["alone_gbs"] = l.alone_gbs;
    if (l.alone_ahead) one["alone_ahead"] = true;
    if (l.segments > 0) {
      one["segments"] = l.segments;
      one["resent"] = l.resent;
    }
    if (!l.error.empty()) one["error"] = l.error;
    links.push_back(std::move(one));
  }
  json nics = json::array();
  for (const auto& nic : r.nics)
    nics.push_back({{"name", nic.name}, {"speed_mbps", nic.speed_mbps}});
  return {{"nodes", r.nodes},     {"nics", nics},   {"rounds", r.rounds},
          {"seconds", r.seconds}, {"links", links}, {"findings", findings}};
}

}  // namespace ringmaster::agent

#include "ringmaster/tools/bisect.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>

#include "ringmaster/comm.h"
#include "ringmaster/status.h"
#include "ringmaster/store.h"
#include "ringmaster/tools/perf.h"

namespace ringmaster {

const char* name_of(BisectVerdict::Kind k) noexcept {
  switch (k) {
    case BisectVerdict::Kind::node:
      return "node";
    case BisectVerdict::Kind::link:
      return "link";
    case BisectVerdict::Kind::between:
      return "between";
    case BisectVerdict::Kind::none:
      return "none";
  }
  return "none";
}

namespace {

// The bisection's state after the rounds so far: the nodes still
// suspected, those cleared (in a group that was not slow), and whether
// the three suspects left are to be measured pair by pair.
struct Suspects {
  std::vector<int> suspects, cleared;
  bool triangle = false;
};

enum class RoundKind { halves, with_cleared, triangle, done };

struct Plan {
  RoundKind kind = RoundKind::done;
  std::vector<std::vector<int>> groups;
};

std::string nodes_text(const std::vector<int>& nodes) {
  return fmt::format("node{} {}", nodes.size() == 1 ? "" : "s", fmt::join(nodes, ", "));
}

std::vector<int> pair(int a, int b) {
  return {std::min(a, b), std::max(a, b)};
}

// The groups a round measures over `s`; kind done (and `verdict` set)
// when nothing is left to split. Halves, and the pairs of suspects with
// cleared nodes, are disjoint: they run side by side.
Plan plan(const Suspects& s, BisectVerdict& verdict) {
  const auto& n = s.suspects;
  const auto& c = s.cleared;
  if (n.size() >= 4) {
    const auto half = n.begin() + static_cast<std::ptrdiff_t>(n.size() / 2);
    return {RoundKind::halves, {std::vector<int>(n.begin(), half), std::vector<int>(half, n.end())}};
  }
  if (n.size() == 3 && (s.triangle || c.size() < 3))
    return {RoundKind::triangle, {pair(n[0], n[1]), pair(n[1], n[2]), pair(n[0], n[2])}};
  if (n.size() >= 2 && !c.empty()) {
    Plan p{RoundKind::with_cleared, {}};
    // Each suspect with a cleared node of its own where there are enough.
    for (std::size_t i = 0; i < n.size(); ++i)
      p.groups.push_back(pair(n[i], c[c.size() >= n.size() ? i : 0]));
    // A pair of cleared nodes as the round's yardstick, where one is left.
    if (c.size() >= n.size() + 2) p.groups.push_back(pair(c[n.size()], c[n.size() + 1]));
    return p;
  }
  verdict.kind = BisectVerdict::Kind::none;
  verdict.text = n.size() == 2 ? fmt::format(
                                     "two nodes ({}, {}) and none cleared: bisection cannot tell a node from "
                                     "their link (the link check can)",
                                     n[0], n[1])
                               : "fewer than two nodes: nothing to bisect";
  return {};
}

double best_of(const BisectRound& r) {
  double best = 0;
  for (const auto& g : r.groups)
    best = std::max(best, g.busbw);
  return best;
}

// Slow: under the ratio of the round's best, or not run at all.
void mark_slow(BisectRound& r, double ratio) {
  const double best = best_of(r);
  for (auto& g : r.groups)
    g.slow = g.busbw <= 0 || g.busbw < ratio * best;
}

bool has(const std::vector<int>& v, int x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

void clear(Suspects& s, const std::vector<int>& nodes) {
  for (int x : nodes)
    if (!has(s.cleared, x) && !has(s.suspects, x)) s.cleared.push_back(x);
  std::sort(s.cleared.begin(), s.cleared.end());
}

// Halves: the slow one is searched next; neither slow ends it.
bool after_halves(Suspects& s, const BisectRound& r, const BisectSpec& spec, BisectVerdict& v) {
  const auto& a = r.groups[0];
  const auto& b = r.groups[1];
  if (a.slow != b.slow) {
    const auto& slow = a.slow ? a : b;
    const auto& fast = a.slow ? b : a;
    s.suspects = slow.nodes;
    clear(s, fast.nodes);
    return false;
  }
  const double lower = std::min(a.busbw, b.busbw);
  if (lower > 0 && spec.whole_busbw > 0 && spec.whole_busbw < spec.between_ratio * lower) {
    v.kind = BisectVerdict::Kind::between;
    v.side_a = a.nodes;
    v.side_b = b.nodes;
    v.text = fmt::format(
        "{} reach {:.2f} GB/s and {} {:.2f} GB/s alone, the whole job {:.2f}: a link between the two halves holds it "
        "back",
        nodes_text(a.nodes), a.busbw, nodes_text(b.nodes), b.busbw, spec.whole_busbw);
  } else {
    v.kind = BisectVerdict::Kind::none;
    v.text = lower > 0 ? fmt::format(
                             "no half stands out ({} {:.2f} GB/s, {} {:.2f} GB/s): the cluster as a whole, not "
                             "one node",
                             nodes_text(a.nodes), a.busbw, nodes_text(b.nodes), b.busbw)
                       : fmt::format("neither half could run ({}; {})", a.error, b.error);
  }
  return true;
}

// Three suspects, every pair: the node in both slow pairs, or the link of
// the one slow pair.
bool after_triangle(const BisectRound& r, BisectVerdict& v) {
  std::vector<const BisectGroup*> slow;
  for (const auto& g : r.groups)
    if (g.slow) slow.push_back(&g);
  const double best = best_of(r);
  if (slow.size() == 2) {
    for (int x : slow[0]->nodes) {
      if (!has(slow[1]->nodes, x)) continue;
      v.kind = BisectVerdict::Kind::node;
      v.node = x;
      v.text = fmt::format("node {}: both pairs with it reach {:.2f} and {:.2f} GB/s, the pair without it {:.2f}", x,
                           slow[0]->busbw, slow[1]->busbw, best);
      return true;
    }
  }
  if (slow.size() == 1) {
    v.kind = BisectVerdict::Kind::link;
    v.from = slow[0]->nodes[0];
    v.to = slow[0]->nodes[1];
    v.text = fmt::format("the link between nodes {} and {}: their pair reaches {:.2f} GB/s, the other pairs {:.2f}",
                         v.from, v.to, slow[0]->busbw, best);
    return true;
  }
  v.kind = BisectVerdict::Kind::none;
  v.text = "no node or link of the three stands out";
  return true;
}

// The suspects, each with a cleared node: the one slow with it; when none
// is, the link between two suspects, or for three the pairs among them
// next.
bool after_with_cleared(Suspects& s, const std::vector<BisectRound>& done, const BisectRound& r, double ratio,
                        BisectVerdict& v) {
  const auto& n = s.suspects;
  // The suspects' pairs against each other (the cleared pair is only a
  // yardstick to read): on a machine whose ranks share cores, a pair may
  // run well under the cleared one without any fault.
  double best = 0;
  for (std::size_t i = 0; i < n.size(); ++i)
    best = std::max(best, r.groups[i].busbw);
  std::vector<std::size_t> slow;
  for (std::size_t i = 0; i < n.size(); ++i)
    if (r.groups[i].busbw <= 0 || r.groups[i].busbw < ratio * best) slow.push_back(i);
  auto partner = [&](std::size_t i) {
    return r.groups[i].nodes[0] == n[i] ? r.groups[i].nodes[1] : r.groups[i].nodes[0];
  };
  if (slow.size() == 1) {
    const std::size_t i = slow.front(), other = i == 0 ? 1 : 0;
    v.kind = BisectVerdict::Kind::node;
    v.node = n[i];
    v.text = fmt::format("node {}: with node {} it reaches {:.2f} GB/s, node {} with node {} {:.2f}", n[i], partner(i),
                         r.groups[i].busbw, n[other], partner(other), r.groups[other].busbw);
    return true;
  }
  if (slow.empty() && n.size() == 3) {
    s.triangle = true;  // each is fine with a cleared node: a link among them
    return false;
  }
  if (slow.empty()) {
    double together = 0;  // the pair's own measure, from the round that kept it
    for (const auto& round : done)
      for (const auto& group : round.groups)
        if (group.nodes == pair(n[0], n[1])) together = group.busbw;
    v.kind = BisectVerdict::Kind::link;
    v.from = n[0];
    v.to = n[1];
    v.text = fmt::format(
        "the link between nodes {} and {}: each reaches {:.2f} and {:.2f} GB/s with a cleared node ({}, {}), the two "
        "together {:.2f}",
        n[0], n[1], r.groups[0].busbw, r.groups[1].busbw, partner(0), partner(1), together);
    return true;
  }
  v.kind = BisectVerdict::Kind::none;
  v.text = fmt::format("{} of the {} suspects are slow with a cleared node ({}): no single one holds the rest back",
                       slow.size(), n.size(), nodes_text(n));
  return true;
}

}  // namespace

std::vector<std::vector<int>> next_bisect_groups(const std::vector<int>& nodes, const std::vector<BisectRound>& rounds,
                                                 const BisectSpec& spec, BisectVerdict& verdict) {
  Suspects s{nodes, {}};
  std::sort(s.suspects.begin(), s.suspects.end());
  verdict = {};
  for (std::size_t i = 0; i < rounds.size(); ++i) {
    BisectRound r = rounds[i];
    mark_slow(r, spec.slow_ratio);
    const Plan due = plan(s, verdict);
    bool follows = due.groups.size() == r.groups.size();
    for (std::size_t g = 0; follows && g < r.groups.size(); ++g)
      follows = due.groups[g] == r.groups[g].nodes;
    if (!follows) {
      verdict.kind = BisectVerdict::Kind::none;
      verdict.text = fmt::format("round {} does not follow from the rounds before it", r.round);
      return {};
    }
    const std::vector<BisectRound> before(rounds.begin(), rounds.begin() + static_cast<std::ptrdiff_t>(i));
    bool ended = false;
    switch (due.kind) {
      case RoundKind::halves:
        ended = after_halves(s, r, spec, verdict);
        break;
      case RoundKind::triangle:
        ended = after_triangle(r, verdict);
        break;
      case RoundKind::with_cleared:
        ended = after_with_cleared(s, before, r, spec.slow_ratio, verdict);
        break;
      case RoundKind::done:
        ended = true;
        break;
    }
    if (ended) return {};
  }
  return plan(s, verdict).groups;
}

namespace {

// This rank's busbw in `group` (a communicator of its own over those
// nodes' ranks, through the job's store), or 0 when it is not in it.
double measure_group(const Config& config, const std::vector<std::int32_t>& node_of, int me,
                     const std::vector<int>& group, const std::string& run_id, const BisectSpec& spec) {
  Config sub = config;
  sub.world_size = 0;
  sub.rank = -1;
  sub.local_rank = 0;
  sub.local_world_size = 0;
  for (int r = 0; r < static_cast<int>(node_of.size()); ++r) {
    if (!has(group, node_of[static_cast<std::size_t>(r)])) continue;
    if (r == me) sub.rank = sub.world_size;
    ++sub.world_size;
    if (node_of[static_cast<std::size_t>(r)] == node_of[static_cast<std::size_t>(me)]) {
      if (r < me) ++sub.local_rank;
      ++sub.local_world_size;
    }
  }
  if (sub.rank < 0) return 0;
  sub.group_rank =
      static_cast<int>(std::find(group.begin(), group.end(), node_of[static_cast<std::size_t>(me)]) - group.begin());
  sub.store_hosting = StoreHosting::connect;  // the job's store, where it already is
  sub.run_id = run_id;
  sub.bootstrap_timeout = spec.bootstrap_timeout;
  auto comm = Communicator::create(sub);
  PerfSpec perf;
  perf.collective = Collective::all_reduce;
  perf.min_bytes = perf.max_bytes = spec.bytes;
  perf.iters = spec.iters;
  perf.warmup = spec.warmup;
  // A new communicator's first calls run slower (connections warming,
  // pages first touched): without this the first group of a round would
  // look slow beside the others.
  perf.warmup_ms = spec.warmup_ms;
  perf.check = false;
  const auto rows = run_perf(*comm, perf);
  return rows.empty() ? 0 : rows.front().out_of_place.busbw;
}

}  // namespace

namespace {

// Disjoint groups run side by side; groups sharing a node one after
// another.
bool disjoint(const std::vector<std::vector<int>>& groups) {
  std::vector<int> seen;
  for (const auto& g : groups)
    for (int x : g) {
      if (has(seen, x)) return false;
      seen.push_back(x);
    }
  return true;
}

// The ranks meet between measurements through the job's store, not in a
// collective of the whole job: a rank whose group is slow (or that sits a
// round out) waits as long as the slowest group takes, which a
// collective's progress timeout would call a hang.
class Meeting {
 public:
  Meeting(const Config& config, int rank, int world, std::chrono::milliseconds timeout)
      : store_(config.master_addr, config.master_port, timeout),
        prefix_(config.run_id + "/bisect/"),
        rank_(rank),
        world_(world),
        timeout_(timeout) {}

  // This rank's word for step `step`; every rank's, once all have given it.
  std::vector<std::string> exchange(const std::string& step, const std::string& word) {
    std::vector<std::string> keys;
    for (int r = 0; r < world_; ++r)
      keys.push_back(fmt::format("{}{}/{}", prefix_, step, r));
    store_.set(keys[static_cast<std::size_t>(rank_)], word);
    store_.wait(keys, timeout_);
    return store_.multi_get(keys);
  }

 private:
  TcpStoreClient store_;
  std::string prefix_;
  int rank_, world_;
  std::chrono::milliseconds timeout_;
};

// "busbw" or "!error" for this rank's group, "" when in none.
std::string measured_word(const Config& config, const std::vector<std::int32_t>& node_of, int me,
                          const std::vector<int>& group, const std::string& run_id, const BisectSpec& spec) {
  if (!has(group, node_of[static_cast<std::size_t>(me)])) return "";
  try {
    return fmt::format("{}", measure_group(config, node_of, me, group, run_id, spec));
  } catch (const std::exception& e) {
    return std::string("!") + e.what();
  }
}

// A group's result from every rank's word: its busbw, or why not.
void read_words(const std::vector<std::string>& words, const std::vector<std::int32_t>& node_of, BisectGroup& g) {
  for (std::size_t r = 0; r < words.size(); ++r) {
    if (!has(g.nodes, node_of[r])) continue;
    const std::string& w = words[r];
    if (w.empty()) continue;
    if (w[0] == '!') {
      if (g.error.empty()) g.error = fmt::format("rank {}: {}", r, w.substr(1));
      continue;
    }
    g.busbw = std::max(g.busbw, std::strtod(w.c_str(), nullptr));
  }
  if (!g.error.empty()) g.busbw = 0;
}

}  // namespace

BisectReport bisect_nodes(Communicator& comm, const Config& config, int node, const BisectSpec& spec,
                          const std::function<void(const BisectRound&)>& on_round) {
  if (!config.etcd_host.empty())
    throw Error(ErrorCategory::config, "bisection meets through the job's TCP store; this job's store is etcd");
  const int world = comm.size(), me = comm.rank();
  std::vector<std::int32_t> node_of(static_cast<std::size_t>(world));
  const std::int32_t mine = node;
  comm.all_gather(&mine, node_of.data(), 1, DataType::int32).wait();
  std::vector<int> nodes(node_of.begin(), node_of.end());
  std::sort(nodes.begin(), nodes.end());
  nodes.erase(std::unique(nodes.begin(), nodes.end()), nodes.end());

  Meeting meeting(config, me, world, spec.round_timeout);
  BisectReport report;
  for (int round = 1;; ++round) {
    const auto groups = next_bisect_groups(nodes, report.rounds, spec, report.verdict);
    if (groups.empty()) break;
    BisectRound r;
    r.round = round;
    for (const auto& g : groups)
      r.groups.push_back({g, 0, false, {}});
    const auto run_id = [&](std::size_t i) { return fmt::format("{}/bisect-{}-{}", config.run_id, round, i); };
    if (disjoint(groups)) {
      std::string word;
      for (std::size_t i = 0; i < groups.size(); ++i)
        if (has(groups[i], node)) word = measured_word(config, node_of, me, groups[i], run_id(i), spec);
      const auto words = meeting.exchange(fmt::format("{}", round), word);
      for (auto& g : r.groups)
        read_words(words, node_of, g);
    } else {
      for (std::size_t i = 0; i < groups.size(); ++i) {
        const auto words = meeting.exchange(fmt::format("{}.{}", round, i),
                                            measured_word(config, node_of, me, groups[i], run_id(i), spec));
        read_words(words, node_of, r.groups[i]);
      }
    }
    mark_slow(r, spec.slow_ratio);
    if (on_round) on_round(r);
    report.rounds.push_back(std::move(r));
  }
  return report;
}

}  // namespace ringmaster

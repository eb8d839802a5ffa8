// certify(): the bring-up steps in order over the agents, each a reader of
// a check that exists on its own (node gate, preflight, link check, perf
// runs), turned into verdicts on nodes and links.
#include "ringmaster/agent/certify.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <numeric>
#include <optional>
#include <type_traits>
#include <variant>

#include "ringmaster/agent/client.h"
#include "ringmaster/agent/events.h"
#include "ringmaster/agent/node_gate.h"
#include "ringmaster/agent/requests.h"
#include "ringmaster/agent/telemetry.h"
#include "ringmaster/status.h"
#include "ringmaster/tools/envelope.h"

namespace ringmaster::agent {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;
using State = CertifyStep::State;

Verdict worse(Verdict a, Verdict b) {
  return static_cast<int>(a) > static_cast<int>(b) ? a : b;
}

struct StepName {
  const char* name;
  const char* title;
};
constexpr StepName kSteps[] = {{"nodes", "Nodes alike"},
                               {"preflight", "Reachability and node facts"},
                               {"linkcheck", "Every link, both directions"},
                               {"sweeps", "Collective sweeps"},
                               {"envelope", "Against the expected envelope"}};

// The envelope of the cluster the options declare, by instance type or
// by a node's topology file; none when neither is declared.
std::optional<tune::Envelope> declared_envelope(const CertifyOptions& o, const topo::Topology* node, int nodes,
                                                Collective c, std::size_t bytes) {
  if (node != nullptr) return tune::expected_envelope(*node, o.instance, nodes, c, bytes, o.tolerance);
  if (o.instance.empty()) return std::nullopt;
  return tune::expected_envelope(o.instance, nodes, c, bytes, o.tolerance);
}

class Certifier {
 public:
  Certifier(const std::vector<PreflightAgent>& agents, const NextMessage& next, const CertifyOptions& o)
      : agents_(agents), next_(next), o_(o) {
    if (!o.topology_file.empty()) node_ = topo::Topology::load_file(o.topology_file);
    for (std::size_t i = 0; i < agents.size(); ++i) {
      report_.nodes.push_back({agents[i].address, {}, Verdict::pass, {}});
      in_.push_back(static_cast<int>(i));
    }
    if (o.resume) resume_from(*o.resume);
  }

  CertifyReport run() {
    const auto started =
        Clock::now() - std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(resumed_seconds_));
    bool go_on = step(0, [this](CertifyStep& s) { return nodes_alike(s); });
    go_on = go_on && step(1, [this](CertifyStep& s) { return preflight(s); });
    go_on = go_on && step(2, [this](CertifyStep& s) { return linkcheck(s); });
    go_on = go_on && step(3, [this](CertifyStep& s) { return sweeps(s); });
    go_on = go_on && step(4, [this](CertifyStep& s) { return envelope(s); });
    for (std::size_t i = report_.steps.size(); i < std::size(kSteps); ++i) {
      CertifyStep skipped;
      skipped.name = kSteps[i].name;
      skipped.title = kSteps[i].title;
      skipped.summary = "not run: " + stopped_because_;
      report_.steps.push_back(std::move(skipped));
    }
    report_.seconds = std::chrono::duration<double>(Clock::now() - started).count();
    return std::move(report_);
  }

 private:
  // Runs one step over the nodes still in; false when the checks stop
  // here (stopped_because_ says why).
  template <typename Body>
  bool step(std::size_t index, Body body) {
    const char* name = kSteps[index].name;
    if (index < report_.steps.size()) return true;  // finished before the certification was resumed
    CertifyStep s;
    s.name = name;
    s.title = kSteps[index].title;
    s.nodes = in_;
    if (in_.size() < 2) {
      stopped_because_ = fmt::format("{} node(s) left in, a step needs two", in_.size());
      return false;
    }
    if (o_.stop != nullptr && o_.stop->load()) {
      stopped_because_ = "interrupted";
      return false;
    }
    if (o_.on_step) o_.on_step(s, false);
    const auto started = Clock::now();
    bool go_on = true;
    try {
      go_on = body(s);
    } catch (const std::exception& e) {
      s.state = State::failed;
      s.summary = std::string("could not run: ") + e.what();
      stopped_because_ = fmt::format("the {} step could not run", name);
      go_on = false;
    }
    s.seconds = std::chrono::duration<double>(Clock::now() - started).count();
    report_.steps.push_back(std::move(s));
    drop_isolated();
    // Kept (--state) before it is said to have ended: a step shown as
    // ended is one a stopped certification resumes after.
    if (o_.on_progress) o_.on_progress(report_);
    if (o_.on_step) o_.on_step(report_.steps.back(), true);
    return go_on;
  }

  // Keeps what a stopped certification finished: its leading passed or
  // found steps, the verdicts they gave, their sweeps; the nodes they
  // isolated stay out.
  void resume_from(const CertifyReport& done) {
    if (done.nodes.size() != report_.nodes.size()) {
      throw Error(ErrorCategory::config, fmt::format("cannot resume: the certification was of {} node(s), not {}",
                                                     done.nodes.size(), report_.nodes.size()));
    }
    for (std::size_t i = 0; i < done.nodes.size(); ++i) {
      if (done.nodes[i].address != report_.nodes[i].address) {
        throw Error(ErrorCategory::config, fmt::format("cannot resume: node {} was {}, now {}", i,
                                                       done.nodes[i].address, report_.nodes[i].address));
      }
    }
    std::size_t kept = 0;
    while (kept < done.steps.size() && kept < std::size(kSteps) && done.steps[kept].name == kSteps[kept].name &&
           (done.steps[kept].state == State::passed || done.steps[kept].state == State::found))
      ++kept;
    const auto finished = [&](const std::string& step) {
      for (std::size_t i = 0; i < kept; ++i)
        if (done.steps[i].name == step) return true;
      return false;
    };
    report_.steps.assign(done.steps.begin(), done.steps.begin() + static_cast<std::ptrdiff_t>(kept));
    for (std::size_t i = 0; i < done.nodes.size(); ++i) {
      report_.nodes[i].hostname = done.nodes[i].hostname;
      for (const auto& r : done.nodes[i].reasons)
        if (finished(r.step)) judge_node(static_cast<int>(i), r.verdict, step_name(r.step), r.text);
    }
    for (const auto& l : done.links)
      for (const auto& r : l.reasons)
        if (finished(r.step)) judge_link(l.from, l.to, r.verdict, step_name(r.step), r.text);
    if (finished("sweeps")) report_.sweeps = done.sweeps;
    if (finished("envelope")) report_.short_of_envelope = done.short_of_envelope;
    resumed_seconds_ = 0;
    for (const auto& st : report_.steps)
      resumed_seconds_ += st.seconds;
    drop_isolated();
  }

  // The step's name as the verdicts hold it (a constant of kSteps).
  static const char* step_name(const std::string& name) {
    for (const auto& k : kSteps)
      if (name == k.name) return k.name;
    return "resumed";
  }

  void judge_node(int node, Verdict v, const char* step, std::string text) {
    NodeVerdict& n = report_.nodes[static_cast<std::size_t>(node)];
    n.verdict = worse(n.verdict, v);
    n.reasons.push_back({v, step, std::move(text)});
  }

  void judge_link(int from, int to, Verdict v, const char* step, std::string text) {
    auto it = std::find_if(report_.links.begin(), report_.links.end(),
                           [&](const LinkVerdict& l) { return l.from == from && l.to == to; });
    if (it == report_.links.end()) {
      report_.links.push_back({from, to, v, {}});
      it = report_.links.end() - 1;
    }
    it->verdict = worse(it->verdict, v);
    it->reasons.push_back({v, step, std::move(text)});
  }

  void drop_isolated() {
    std::erase_if(in_, [&](int n) { return report_.nodes[static_cast<std::size_t>(n)].verdict == Verdict::isolate; });
  }

  std::vector<PreflightAgent> agents_in() const {
    std::vector<PreflightAgent> out;
    for (const int n : in_)
      out.push_back(agents_[static_cast<std::size_t>(n)]);
    return out;
  }

  // 1. What every node's ranks load and inherit, through the launchers'
  // node gate: the odd nodes out of what breaks a run are isolated, of
  // what does not, watched. No majority to tell the odd ones by: a job
  // over these nodes means nothing, so the checks stop.
  bool nodes_alike(CertifyStep& s) {
    std::vector<Inventory> inventories;
    for (const int n : in_) {
      inventories.push_back(
          Inventory::parse(agents_[static_cast<std::size_t>(n)].client->call({{"type", "inventory"}})));
      report_.nodes[static_cast<std::size_t>(n)].hostname = inventories.back().hostname;
    }
    const NodeGate gate = check_nodes_alike(inventories, PerfRequest::Engine::ringmaster);
    bool majority = true;
    for (const auto& d : gate.differences) {
      s.findings.push_back(d.sentence);
      if (d.breaks_a_run && d.outliers.empty()) majority = false;
      for (const int position : d.outliers)
        judge_node(in_[static_cast<std::size_t>(position)], d.breaks_a_run ? Verdict::isolate : Verdict::monitor,
                   "nodes", d.sentence);
    }
    s.state = gate.differences.empty() ? State::passed : majority ? State::found : State::failed;
    s.summary = gate.differences.empty()
                    ? fmt::format("{} nodes load the same software and give their ranks the same settings", in_.size())
                    : fmt::format("{} difference(s) across {} nodes", gate.differences.size(), in_.size());
    s.detail = {{"refusals", gate.refusals}, {"notes", gate.notes}};
    if (!majority) stopped_because_ = "the nodes differ in what a run loads with no majority to isolate the odd ones";
    return majority;
  }

  // 2. The preflight matrix and facts: a problem on one node's own side
  // isolates it, a warning there is watched. Pairs still unable to
  // connect on the ports a job's connections take stop the checks: a
  // link check or a sweep over them could only fail.
  bool preflight(CertifyStep& s) {
    const std::vector<int> nodes = in_;
    PreflightOptions p = o_.preflight;
    if (p.master_addr.empty()) p.master_addr = agents_[static_cast<std::size_t>(nodes[0])].address;
    const PreflightReport& r = report_.preflight.emplace(run_preflight(agents_in(), p));
    const auto findings = diagnose_preflight(r);
    s.detail = to_json(r, findings);
    int problems = 0;
    for (const auto& f : findings) {
      if (f.severity == PreflightFinding::Severity::info) continue;
      const bool problem = f.severity == PreflightFinding::Severity::problem;
      problems += problem ? 1 : 0;
      s.findings.push_back(fmt::format("{}: {}", name_of(f.severity), f.text));
      for (const int position : f.nodes)
        judge_node(nodes[static_cast<std::size_t>(position)], problem ? Verdict::isolate : Verdict::monitor,
                   "preflight", f.text);
    }
    // Between the nodes still in: the ephemeral ports (a job's bootstrap
    // and data connections) both ways, and MASTER_PORT toward the first.
    std::vector<std::pair<int, int>> cut;
    for (std::size_t i = 0; i < nodes.size(); ++i) {
      for (std::size_t j = 0; j < nodes.size(); ++j) {
        if (i == j || isolated(nodes[i]) || isolated(nodes[j])) continue;
        const int a = static_cast<int>(i), b = static_cast<int>(j);
        const Reach e = r.cell(a, b, "ephemeral");
        const Reach m = j == 0 ? r.cell(a, b, "master") : Reach::ok;
        if ((e != Reach::ok && e != Reach::untested) || (m != Reach::ok && m != Reach::untested)) {
          cut.emplace_back(nodes[i], nodes[j]);
          judge_link(nodes[i], nodes[j], Verdict::isolate, "preflight",
                     fmt::format("node {} cannot connect to node {}: ephemeral ports {}{}", nodes[i], nodes[j],
                                 r.cell_text(a, b, "ephemeral"),
                                 j == 0 ? fmt::format(", MASTER_PORT {}", r.cell_text(a, b, "master")) : ""));
        }
      }
    }
    s.state = problems == 0 && cut.empty() ? State::passed : cut.empty() ? State::found : State::failed;
    s.summary = fmt::format("{} nodes, {} problem(s), {} pair(s) that cannot connect, in {:.1f} s", nodes.size(),
                            problems, cut.size(), r.seconds);
    if (!cut.empty()) stopped_because_ = "some pairs of nodes cannot connect on the ports a job uses";
    return cut.empty();
  }

  bool isolated(int node) const { return report_.nodes[static_cast<std::size_t>(node)].verdict == Verdict::isolate; }

  // 3. Every link both ways: a node whose every link out or in is slow is
  // isolated, a slow or unmeasured link is; a NIC negotiated down or a
  // link far under its NICs is watched.
  bool linkcheck(CertifyStep& s) {
    const std::vector<int> nodes = in_;
    LinkcheckOptions l = o_.linkcheck;
    for (const auto& [k, v] : o_.env)
      l.env.emplace(k, v);
    if (o_.before_run) {
      l.before_round = [this, user = l.before_round](int round) {
        o_.before_run();
        if (user) user(round);
      };
    }
    LinkcheckReport& r = report_.linkcheck.emplace(run_linkcheck(agents_in(), next_, l));
    const auto problems = find_link_problems(r);
    std::vector<std::string> texts;
    for (const auto& p : problems)
      texts.push_back(p.text);
    s.detail = to_json(r, texts);
    s.findings = texts;
    using Kind = LinkProblem::Kind;
    for (const auto& p : problems) {
      Verdict v = p.kind == Kind::nic_slow || p.kind == Kind::under_nic ? Verdict::monitor : Verdict::isolate;
      if (p.kind == Kind::link_slow) {
        const std::string alone = confirm_slow_link(r, p, nodes, l);
        if (!alone.empty()) {
          v = Verdict::monitor;
          s.findings.push_back(alone);
          judge_link(nodes[static_cast<std::size_t>(p.from)], nodes[static_cast<std::size_t>(p.to)], v, "linkcheck",
                     p.text + "; " + alone);
          continue;
        }
      }
      if (p.node >= 0) {
        judge_node(nodes[static_cast<std::size_t>(p.node)], v, "linkcheck", p.text);
      } else {
        judge_link(nodes[static_cast<std::size_t>(p.from)], nodes[static_cast<std::size_t>(p.to)], v, "linkcheck",
                   p.text);
        if (p.kind == Kind::not_measured)
          judge_link(nodes[static_cast<std::size_t>(p.to)], nodes[static_cast<std::size_t>(p.from)], v, "linkcheck",
                     p.text);
      }
    }
    s.state = problems.empty() ? State::passed : State::found;
    s.summary = fmt::format("{} links over {} rounds of disjoint pairs, {} problem(s), in {:.1f} s", r.links.size(),
                            r.rounds, problems.size(), r.seconds);
    return true;
  }

  // A link found slow in its round is measured again on its own, its pair
  // the only one running: a round's pairs share the nodes' CPUs and
  // switches, and a link that was only crowded is not isolated. Empty
  // when it is slow alone too; else what it moved alone.
  // What it moved alone is kept in the round's measure of it (the sweeps
  // read it: agent::measured_well).
  std::string confirm_slow_link(LinkcheckReport& round, const LinkProblem& p, const std::vector<int>& nodes,
                                const LinkcheckOptions& options) {
    const auto found = std::find_if(round.links.begin(), round.links.end(),
                                    [&](const LinkMeasure& l) { return l.from == p.from && l.to == p.to; });
    if (found == round.links.end()) return {};
    LinkMeasure* in_round = &*found;
    std::vector<double> same;
    for (const auto& l : round.links) {
      if (l.gbs > 0 && l.transport == in_round->transport) same.push_back(l.gbs);
    }
    if (same.empty()) return {};
    std::nth_element(same.begin(), same.begin() + static_cast<std::ptrdiff_t>(same.size() / 2), same.end());
    const double median = same[same.size() / 2];
    const LinkcheckReport alone =
        run_linkcheck({agents_[static_cast<std::size_t>(nodes[static_cast<std::size_t>(p.from)])],
                       agents_[static_cast<std::size_t>(nodes[static_cast<std::size_t>(p.to)])]},
                      next_, options);
    const LinkMeasure* again = alone.link(0, 1);
    if (again == nullptr) return {};
    in_round->alone_gbs = again->gbs;
    in_round->alone_ahead = again->ahead && again->gbs <= 0;
    if ((again->gbs <= 0 && !again->ahead) || (again->gbs > 0 && again->gbs < median / 5)) return {};
    return fmt::format(
        "node {} -> node {} measured again alone: {}, against the round's median of {:.0f} MB/s: it "
        "was crowded in its round, not slow",
        nodes[static_cast<std::size_t>(p.from)], nodes[static_cast<std::size_t>(p.to)],
        again->ahead ? std::string("ahead of its reader") : fmt::format("{:.0f} MB/s", again->gbs * 1000),
        median * 1000);
  }

  // 4. Each collective over the nodes still in.
  bool sweeps(CertifyStep& s) {
    json detail = json::array();
    int failed = 0, slow = 0;
    for (const Collective c : o_.collectives) {
      CertifySweep sweep = run_sweep(c, slow);
      json rows = json::array();
      for (const auto& row : sweep.rows)
        rows.push_back({{"bytes", row.bytes}, {"time_us", row.time_us}, {"algbw", row.algbw}, {"busbw", row.busbw}});
      const double peak = std::accumulate(sweep.rows.begin(), sweep.rows.end(), 0.0,
                                          [](double m, const CertifySweep::Row& r) { return std::max(m, r.busbw); });
      const long long wrong = std::accumulate(sweep.rows.begin(), sweep.rows.end(), 0LL,
                                              [](long long w, const CertifySweep::Row& r) { return w + r.wrong; });
      if (sweep.error.empty() && wrong > 0) sweep.error = fmt::format("{} wrong value(s) in its results", wrong);
      if (!sweep.error.empty()) {
        ++failed;
        s.findings.push_back(fmt::format("{} failed: {}", sweep.collective, sweep.error));
      }
      detail.push_back(
          {{"collective", sweep.collective}, {"rows", rows}, {"peak_busbw", peak}, {"error", sweep.error}});
      if (!sweep.bisect.empty()) {
        detail.back()["bisect"] = sweep.bisect;
        const json& end = sweep.bisect.back();
        s.findings.push_back(fmt::format("{} fell under its envelope and was bisected inside its job: {}",
                                         sweep.collective, end.value("text", std::string("no verdict"))));
      }
      report_.sweeps.push_back(std::move(sweep));
    }
    s.detail = std::move(detail);
    s.state = failed > 0 ? State::failed : slow > 0 ? State::found : State::passed;
    s.summary = fmt::format("{} collective(s) over {} nodes x {} rank(s): {} failed, {} slow or lossy link(s)",
                            o_.collectives.size(), in_.size(), o_.np_per_agent, failed, slow);
    return true;
  }

  // 5. Each sweep's largest size against the envelope of the declared
  // instance type; under it (or under the user's gate) the cluster falls
  // short as a whole.
  bool envelope(CertifyStep& s) {
    if (o_.instance.empty() && !node_) {
      s.state = State::skipped;
      s.summary = "no instance type declared (--instance or --topology): nothing to compare the sweeps with";
      return true;
    }
    json detail = json::array();
    int compared = 0, short_of = 0;
    std::string declared = o_.instance;
    for (const auto& sweep : report_.sweeps) {
      if (sweep.rows.empty() || !sweep.error.empty()) continue;
      const auto& row = sweep.rows.back();
      const auto c = perf_collective_named(sweep.collective);
      const auto e =
          declared_envelope(o_, node_ ? &*node_ : nullptr, static_cast<int>(sweep.nodes.size()), *c, row.bytes);
      if (!e) {
        s.findings.push_back(fmt::format("{}: no envelope (the model does not cover it)", sweep.collective));
        continue;
      }
      ++compared;
      declared = e->declared_by.empty() ? e->instance : e->instance + " (declared by " + e->declared_by + ")";
      json published = json::array();
      for (const auto& r : e->published)
        published.push_back({{"nodes", r.nodes},
                             {"bytes", r.bytes},
                             {"busbw", r.busbw_gbs},
                             {"time_us", r.time_us},
                             {"source", r.source}});
      const bool under = row.busbw < e->least_busbw_gbs();
      const bool under_gate = o_.gate_gbs > 0 && *c == Collective::all_reduce && row.busbw < o_.gate_gbs;
      detail.push_back({{"collective", sweep.collective},
                        {"bytes", row.bytes},
                        {"busbw", row.busbw},
                        {"predicted_busbw", e->predicted_busbw_gbs},
                        {"least_busbw", e->least_busbw_gbs()},
                        {"within", !under && !under_gate},
                        {"published", published}});
      if (under) {
        s.findings.push_back(
            fmt::format("{} measured {:.3g} GB/s, under the envelope: {}", sweep.collective, row.busbw, e->describe()));
      }
      if (under_gate) {
        s.findings.push_back(
            fmt::format("all_reduce measured {:.3g} GB/s, under the gate of {:.1f} GB/s", row.busbw, o_.gate_gbs));
      }
      short_of += under || under_gate ? 1 : 0;
    }
    report_.short_of_envelope = short_of > 0;
    s.detail = std::move(detail);
    s.state = short_of > 0 ? State::found : State::passed;
    s.summary = fmt::format("{} sweep(s) compared with {} x {}: {} short (tolerance {:.0f}%)", compared,
                            report_.sweeps.empty() ? 0 : report_.sweeps.front().nodes.size(), declared, short_of,
                            o_.tolerance * 100);
    return true;
  }

  CertifySweep run_sweep(Collective c, int& slow_links);

  // agent::measured_well for the link from node `from` to node `to`, when
  // the link check ran over both.
  std::string measured_well_in_link_check(int from, int to) const {
    if (!report_.linkcheck || report_.steps.size() < 3) return {};
    const auto& nodes = report_.steps[2].nodes;  // the link check's node i is nodes[i]
    const auto a = std::find(nodes.begin(), nodes.end(), from), b = std::find(nodes.begin(), nodes.end(), to);
    if (a == nodes.end() || b == nodes.end()) return {};
    return measured_well(*report_.linkcheck, static_cast<int>(a - nodes.begin()), static_cast<int>(b - nodes.begin()));
  }

  // The busbw under which an all_reduce sweep is bisected inside its job:
  // the envelope's least (or the gate, when higher); 0 for none.
  double bisect_below(Collective c) const {
    if (!o_.bisect || c != Collective::all_reduce || in_.size() < 3) return 0;
    const auto e = declared_envelope(o_, node_ ? &*node_ : nullptr, static_cast<int>(in_.size()), c,
                                     parse_request_size(o_.max_bytes));
    return e ? std::max(e->least_busbw_gbs(), o_.gate_gbs) : 0;
  }

  // A bisection's event: kept with the sweep; its verdict isolates the
  // node or link it names when the last round's slow group ran under a
  // third of its best (a wide margin, which noise on a shared machine does
  // not make), else watches it.
  void read_bisect(const events::Bisect& e, CertifySweep& sweep) {
    double slowest = 0, best = 0;
    if (!e.verdict.empty() && !sweep.bisect.empty()) {
      slowest = -1;
      for (const auto& g : sweep.bisect.back().value("groups", json::array())) {
        const double busbw = g.value("busbw", 0.0);
        best = std::max(best, busbw);
        if (g.value("slow", false)) slowest = slowest < 0 ? busbw : std::min(slowest, busbw);
      }
    }
    sweep.bisect.push_back(events::to_json(e));
    if (e.verdict != "node" && e.verdict != "link") return;
    const Verdict v = best > 0 && slowest >= 0 && slowest < best / 3 ? Verdict::isolate : Verdict::monitor;
    const std::string why = fmt::format("{} fell short; its bisection inside the job ({} rounds) named {}",
                                        sweep.collective, e.round, e.text);
    if (e.verdict == "node" && e.node >= 0) judge_node(e.node, v, "sweeps", why);
    if (e.verdict == "link" && e.from >= 0 && e.to >= 0) judge_link(e.from, e.to, v, "sweeps", why);
  }

  void read_sweep_event(const events::EventMessage& m, CertifySweep& sweep,
                        std::vector<std::pair<int, events::Links>>& links, std::size_t& done);

  const std::vector<PreflightAgent>& agents_;
  const NextMessage& next_;
  const CertifyOptions& o_;
  std::optional<topo::Topology> node_;  // the declared node's topology file, when given
  CertifyReport report_;
  std::vector<int> in_;  // the nodes not isolated yet
  std::string stopped_because_;
  double resumed_seconds_ = 0;  // what the resumed certification's steps took
};

// One collective's sweep: a run over every node still in (agent i holds
// ranks i*np..), rank 0's rows, the run's links read for slow and lossy
// ones, and a rank whose process died isolating its node.
CertifySweep Certifier::run_sweep(Collective c, int& slow_links) {
  CertifySweep sweep;
  sweep.collective = perf_collective_name(c);
  sweep.nodes = in_;
  const int np = o_.np_per_agent;
  RunRequest run;
  run.run_id =
      fmt::format("certify-{}-{}-{}", ::getpid(), sweep.collective, Clock::now().time_since_epoch().count() % 1000000);
  run.world_size = static_cast<int>(in_.size()) * np;
  run.master_addr = agents_[static_cast<std::size_t>(in_[0])].address;
  run.perf.collective = c;
  run.perf.min_bytes = parse_request_size(o_.min_bytes);
  run.perf.max_bytes = parse_request_size(o_.max_bytes);
  run.perf.step_factor = 2;
  run.perf.iters = o_.iters;
  run.perf.warmup = o_.warmup;
  run.env = o_.env;
  run.coll_timeout_s = o_.coll_timeout_s;
  run.perf.bisect_below = bisect_below(c);
  run.perf.bisect = run.perf.bisect_below > 0;
  if (o_.before_run) o_.before_run();
  std::size_t started = 0;
  try {
    for (std::size_t i = 0; i < in_.size(); ++i) {
      run.ranks.clear();
      for (int l = 0; l < np; ++l)
        run.ranks.push_back(static_cast<int>(i) * np + l);
      run.env["GROUP_RANK"] = std::to_string(in_[i]);  // a bisection names nodes as the certification does
      const json reply = agents_[static_cast<std::size_t>(in_[i])].client->call(run.to_json());
      if (i == 0) run.master_port = reply.at("master_port").get<int>();
      ++started;
    }
  } catch (const std::exception& e) {
    sweep.error = fmt::format("node {} did not start its ranks: {}", in_[started], e.what());
  }
  std::vector<std::pair<int, events::Links>> links;
  std::size_t done = 0;
  const auto deadline = Clock::now() + std::chrono::milliseconds(static_cast<long long>(o_.sweep_timeout_s * 1000));
  while (sweep.error.empty() && done < started) {
    const auto m = next_(deadline);
    if (!m) {
      sweep.error = fmt::format("no end within {:.0f} s", o_.sweep_timeout_s);
      break;
    }
    if (m->value("type", "") != "event" || m->value("run_id", "") != run.run_id) continue;
    std::optional<events::EventMessage> message;
    try {
      message = events::parse_event_message(*m);
    } catch (const Error&) {
      continue;  // unreadable: the sweep's rows and end come in others
    }
    if (message) read_sweep_event(*message, sweep, links, done);
  }
  if (done < started) {
    for (std::size_t i = 0; i < started; ++i) {
      try {
        agents_[static_cast<std::size_t>(in_[i])].client->call({{"type", "cancel"}, {"run_id", run.run_id}});
      } catch (const std::exception&) {
      }
    }
  }
  for (const auto& l : find_slow_links(links)) {
    const int from = in_[static_cast<std::size_t>(l.from / np)], to = in_[static_cast<std::size_t>(l.to / np)];
    if (from == to) continue;
    ++slow_links;
    const std::string text = fmt::format("{}: node {} -> node {} {}: {}", sweep.collective, from, to,
                                         l.lossy() ? "lossy" : "slow", l.describe());
    // Slow only under the collective's load, not slow when the link check
    // measured it: watched, not isolated. Ranks that
    // crowd shared CPUs (64 agents on one host) slow one link of many in
    // one run and another in the next.
    const std::string alone = l.lossy() ? std::string() : measured_well_in_link_check(from, to);
    judge_link(from, to, alone.empty() ? Verdict::isolate : Verdict::monitor, "sweeps",
               alone.empty() ? text : text + "; " + alone);
  }
  return sweep;
}

void Certifier::read_sweep_event(const events::EventMessage& m, CertifySweep& sweep,
                                 std::vector<std::pair<int, events::Links>>& links, std::size_t& done) {
  std::visit(
      [&](const auto& e) {
        using E = std::decay_t<decltype(e)>;
        if constexpr (std::is_same_v<E, events::Result>) {
          if (m.rank == 0 && e.candidate.empty()) {
            sweep.rows.push_back(
                {e.bytes, e.out_of_place.time_us, e.out_of_place.algbw, e.out_of_place.busbw, e.out_of_place.wrong});
          }
        } else if constexpr (std::is_same_v<E, events::Bisect>) {
          if (m.rank == 0) read_bisect(e, sweep);
        } else if constexpr (std::is_same_v<E, events::Links>) {
          links.emplace_back(m.rank, e);
        } else if constexpr (std::is_same_v<E, events::StageFailed>) {
          if (sweep.error.empty()) sweep.error = fmt::format("rank {} at {}: {}", m.rank, name_of(e.stage), e.summary);
        } else if constexpr (std::is_same_v<E, events::CollectiveError>) {
          if (sweep.error.empty()) sweep.error = fmt::format("rank {}: {}", m.rank, e.message);
        } else if constexpr (std::is_same_v<E, events::RankFailed>) {
          const int node = in_[static_cast<std::size_t>(std::max(0, m.rank) / o_.np_per_agent)];
          const std::string what = e.summary.empty() ? fmt::format("rank {} failed", m.rank) : e.summary;
          judge_node(node, Verdict::isolate, "sweeps", fmt::format("{}: {}", sweep.collective, what));
          if (sweep.error.empty()) sweep.error = what;
        } else if constexpr (std::is_same_v<E, events::RunDone>) {
          ++done;
        }
      },
      m.event);
}

}  // namespace

std::span<const CertifyStepName> certify_steps() {
  static constexpr CertifyStepName kNames[] = {{kSteps[0].name, kSteps[0].title},
                                               {kSteps[1].name, kSteps[1].title},
                                               {kSteps[2].name, kSteps[2].title},
                                               {kSteps[3].name, kSteps[3].title},
                                               {kSteps[4].name, kSteps[4].title}};
  return kNames;
}

const char* name_of(Verdict v) noexcept {
  switch (v) {
    case Verdict::pass:
      return "PASS";
    case Verdict::monitor:
      return "MONITOR";
    case Verdict::isolate:
      break;
  }
  return "ISOLATE";
}

const char* name_of(CertifyStep::State s) noexcept {
  switch (s) {
    case State::passed:
      return "passed";
    case State::found:
      return "found";
    case State::failed:
      return "failed";
    case State::skipped:
      break;
  }
  return "skipped";
}

Verdict CertifyReport::overall() const {
  Verdict v = short_of_envelope ? Verdict::monitor : Verdict::pass;
  for (const auto& n : nodes)
    v = worse(v, n.verdict);
  for (const auto& l : links)
    v = worse(v, l.verdict);
  return v;
}

std::string certify_gate_refusal(const CertifyOptions& options, int nodes) {
  if (options.gate_gbs <= 0) return {};
  std::optional<topo::Topology> node;
  if (!options.topology_file.empty()) node = topo::Topology::load_file(options.topology_file);
  const auto e = declared_envelope(options, node ? &*node : nullptr, nodes, Collective::all_reduce,
                                   parse_request_size(options.max_bytes));
  return e ? tune::gate_refusal(*e, options.gate_gbs) : std::string();
}

DeclaredCluster certify_declared_cluster(const CertifyOptions& options, int nodes) {
  std::optional<topo::Topology> node;
  if (!options.topology_file.empty()) node = topo::Topology::load_file(options.topology_file);
  const auto e =
      declared_envelope(options, node ? &*node : nullptr, nodes, Collective::all_reduce, std::size_t{1} << 20);
  return e ? DeclaredCluster{e->instance, e->declared_by} : DeclaredCluster{};
}

CertifyReport certify(const std::vector<PreflightAgent>& agents, const NextMessage& next,
                      const CertifyOptions& options) {
  if (agents.size() < 2) throw Error(ErrorCategory::config, "certify needs at least two agents");
  if (options.np_per_agent < 1) throw Error(ErrorCategory::config, "certify: ranks per agent must be at least 1");
  return Certifier(agents, next, options).run();
}

namespace {

json reasons_json(const std::vector<VerdictReason>& reasons) {
  json out = json::array();
  for (const auto& r : reasons)
    out.push_back({{"verdict", name_of(r.verdict)}, {"step", r.step}, {"text", r.text}});
  return out;
}

}  // namespace

json to_json(const CertifyReport& r) {
  json nodes = json::array();
  for (std::size_t i = 0; i < r.nodes.size(); ++i) {
    const auto& n = r.nodes[i];
    nodes.push_back({{"node", i},
                     {"address", n.address},
                     {"hostname", n.hostname},
                     {"verdict", name_of(n.verdict)},
                     {"reasons", reasons_json(n.reasons)}});
  }
  json links = json::array();
  for (const auto& l : r.links)
    links.push_back(
        {{"from", l.from}, {"to", l.to}, {"verdict", name_of(l.verdict)}, {"reasons", reasons_json(l.reasons)}});
  json steps = json::array();
  for (const auto& s : r.steps) {
    steps.push_back({{"name", s.name},
                     {"title", s.title},
                     {"state", name_of(s.state)},
                     {"summary", s.summary},
                     {"findings", s.findings},
                     {"seconds", s.seconds},
                     {"nodes", s.nodes},
                     {"detail", s.detail}});
  }
  return {{"schema", kCertifySchema},
          {"verdict", name_of(r.overall())},
          {"short_of_envelope", r.short_of_envelope},
          {"seconds", r.seconds},
          {"nodes", nodes},
          {"links", links},
          {"steps", steps}};
}

namespace {

Verdict verdict_named(const std::string& name) {
  if (name == "PASS") return Verdict::pass;
  if (name == "MONITOR") return Verdict::monitor;
  if (name == "ISOLATE") return Verdict::isolate;
  throw Error(ErrorCategory::config, fmt::format("a verdict of '{}', not PASS, MONITOR or ISOLATE", name));
}

State state_named(const std::string& name) {
  for (const State s : {State::passed, State::found, State::failed, State::skipped})
    if (name == name_of(s)) return s;
  throw Error(ErrorCategory::config, fmt::format("a step state of '{}'", name));
}

std::vector<VerdictReason> reasons_from(const json& reasons) {
  std::vector<VerdictReason> out;
  for (const auto& r : reasons)
    out.push_back({verdict_named(r.at("verdict").get<std::string>()), r.at("step").get<std::string>(),
                   r.at("text").get<std::string>()});
  return out;
}

CertifySweep sweep_from(const json& d, const std::vector<int>& nodes) {
  CertifySweep sweep;
  sweep.collective = d.at("collective").get<std::string>();
  sweep.nodes = nodes;
  sweep.error = d.value("error", "");
  for (const auto& row : d.at("rows"))
    sweep.rows.push_back({row.at("bytes").get<std::uint64_t>(), row.at("time_us").get<double>(),
                          row.at("algbw").get<double>(), row.at("busbw").get<double>(), 0});
  return sweep;
}

}  // namespace

CertifyReport parse_certify_report(const json& j) {
  try {
    if (j.value("schema", "") != kCertifySchema)
      throw Error(ErrorCategory::config, fmt::format("not a {} report", kCertifySchema));
    CertifyReport r;
    r.seconds = j.at("seconds").get<double>();
    r.short_of_envelope = j.value("short_of_envelope", false);
    for (const auto& n : j.at("nodes"))
      r.nodes.push_back({n.at("address").get<std::string>(), n.at("hostname").get<std::string>(),
                         verdict_named(n.at("verdict").get<std::string>()), reasons_from(n.at("reasons"))});
    for (const auto& l : j.at("links"))
      r.links.push_back({l.at("from").get<int>(), l.at("to").get<int>(),
                         verdict_named(l.at("verdict").get<std::string>()), reasons_from(l.at("reasons"))});
    for (const auto& s : j.at("steps")) {
      CertifyStep step;
      step.name = s.at("name").get<std::string>();
      step.title = s.at("title").get<std::string>();
      step.state = state_named(s.at("state").get<std::string>());
      step.summary = s.at("summary").get<std::string>();
      step.findings = s.at("findings").get<std::vector<std::string>>();
      step.seconds = s.at("seconds").get<double>();
      step.nodes = s.at("nodes").get<std::vector<int>>();
      step.detail = s.value("detail", json());
      if (step.name == "sweeps" && step.detail.is_array()) {
        for (const auto& d : step.detail)
          r.sweeps.push_back(sweep_from(d, step.nodes));
      }
      r.steps.push_back(std::move(step));
    }
    return r;
  } catch (const json::exception& e) {
    throw Error(ErrorCategory::config, std::string("a certification report: ") + e.what());
  }
}

bool certification_complete(const CertifyReport& report) {
  return report.steps.size() == std::size(kSteps) &&
         std::none_of(report.steps.begin(), report.steps.end(), [](const CertifyStep& s) {
           return s.state == State::failed || s.summary.starts_with("not run: ");
         });
}

void save_certification_state(const std::string& path, const std::vector<std::string>& agents,
                              const CertifyReport& report) {
  const std::string next = path + ".new";
  {
    std::ofstream out(next);
    out << json{{"agents", agents}, {"complete", certification_complete(report)}, {"report", to_json(report)}}.dump()
        << "\n";
    if (!out.flush()) throw Error(ErrorCategory::config, "cannot write the certification's state to " + next);
  }
  if (std::rename(next.c_str(), path.c_str()) != 0)
    throw Error(ErrorCategory::config, fmt::format("cannot write {}: {}", path, std::strerror(errno)));
}

std::optional<CertifyReport> load_unfinished_certification(const std::string& path,
                                                           const std::vector<std::string>& agents) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  const json saved = json::parse(in, nullptr, false);
  if (saved.is_discarded() || !saved.is_object() || !saved.contains("report"))
    throw Error(ErrorCategory::config, path + ": not a certification's state");
  if (saved.value("complete", false) || saved.value("agents", json()) != json(agents)) return std::nullopt;
  CertifyReport report = parse_certify_report(saved["report"]);
  // What it finished: its passed or found steps from the first on.
  std::size_t kept = 0;
  while (kept < report.steps.size() &&
         (report.steps[kept].state == State::passed || report.steps[kept].state == State::found))
    ++kept;
  report.steps.resize(kept);
  return report;
}

std::string render_certify(const CertifyReport& r) {
  std::string out =
      fmt::format("certification of {} node(s) in {:.1f} s: {}{}\n\n", r.nodes.size(), r.seconds, name_of(r.overall()),
                  r.short_of_envelope ? " (a sweep fell short of what these nodes should reach)" : "");
  for (std::size_t i = 0; i < r.steps.size(); ++i) {
    const auto& s = r.steps[i];
    out += fmt::format("{}. {:<10} {:<8} {}\n", i + 1, s.name, name_of(s.state), s.summary);
    for (const auto& f : s.findings)
      out += fmt::format("     - {}\n", f);
  }
  for (const auto& sweep : r.sweeps) {
    if (sweep.rows.empty()) continue;
    const auto& last = sweep.rows.back();
    out += fmt::format("   {:<15} {:>10} bytes: busbw {:.3f} GB/s{}\n", sweep.collective, last.bytes, last.busbw,
                       sweep.error.empty() ? "" : " (failed: " + sweep.error + ")");
  }
  out += "\nnodes:\n";
  for (std::size_t i = 0; i < r.nodes.size(); ++i) {
    const auto& n = r.nodes[i];
    out += fmt::format("  node {:<3} {:<16} {:<12} {}\n", i, n.address, n.hostname, name_of(n.verdict));
    for (const auto& reason : n.reasons)
      out += fmt::format("      {} ({}): {}\n", name_of(reason.verdict), reason.step, reason.text);
  }
  if (!r.links.empty()) out += "links:\n";
  for (const auto& l : r.links) {
    out += fmt::format("  node {} -> node {} ({} -> {}) {}\n", l.from, l.to,
                       r.nodes[static_cast<std::size_t>(l.from)].address,
                       r.nodes[static_cast<std::size_t>(l.to)].address, name_of(l.verdict));
    for (const auto& reason : l.reasons)
      out += fmt::format("      {} ({}): {}\n", name_of(reason.verdict), reason.step, reason.text);
  }
  if (r.links.empty()) out += "links: every link measured passed\n";
  return out;
}

}  // namespace ringmaster::agent

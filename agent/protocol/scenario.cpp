// The repro catalog, a run's events gathered, the expectations checked
// (ringmaster/agent/scenario.h).
#include "ringmaster/agent/scenario.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <arpa/inet.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <type_traits>
#include <variant>

#include "ringmaster/agent/telemetry.h"
#include "ringmaster/status.h"

namespace ringmaster::agent {

using nlohmann::json;
namespace fs = std::filesystem;

namespace {

constexpr int kMostHosts = 16;
constexpr int kMostRanksPerHost = 16;

const std::set<std::string> kExpectations = {
    "outcome",           "ranks",       "stage",     "keywords",  "error_keywords", "any_error_keywords",
    "every_rank_errors", "not_entered", "transport", "slow_link", "stall",          "preflight",
    "linkcheck",         "together",    "notes",     "exits",     "certify",        "bisect"};

[[noreturn]] void refuse(const std::string& file, const std::string& what) {
  throw Error(ErrorCategory::config, fmt::format("scenario {}: {}", file, what));
}

template <class T>
T field(const json& j, const std::string& file, const char* key, T fallback, bool required = false) {
  const auto it = j.find(key);
  if (it == j.end()) {
    if (required) refuse(file, fmt::format("'{}' is missing", key));
    return fallback;
  }
  try {
    return it->get<T>();
  } catch (const json::exception&) {
    refuse(file, fmt::format("'{}' is {}, of the wrong type", key, it->type_name()));
  }
}

json object_field(const json& j, const std::string& file, const char* key, json fallback) {
  const auto it = j.find(key);
  if (it == j.end()) return fallback;
  if (it->type() != fallback.type()) refuse(file, fmt::format("'{}' must be {}", key, fallback.type_name()));
  return *it;
}

}  // namespace

std::optional<std::vector<std::uint16_t>> parse_port_list(const std::string& text) {
  std::vector<std::uint16_t> ports;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t end = std::min(text.find(',', start), text.size());
    const std::string item = text.substr(start, end - start);
    const std::size_t dash = item.find('-');
    const auto number = [](const std::string& t) -> std::optional<int> {
      int v = 0;
      const auto [ptr, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
      if (ec != std::errc() || ptr != t.data() + t.size() || v < 1 || v > 65535) return std::nullopt;
      return v;
    };
    const auto low = number(item.substr(0, dash));
    const auto high = dash == std::string::npos ? low : number(item.substr(dash + 1));
    if (!low || !high || *high < *low || ports.size() + static_cast<std::size_t>(*high - *low + 1) > 1024)
      return std::nullopt;
    for (int p = *low; p <= *high; ++p)
      ports.push_back(static_cast<std::uint16_t>(p));
    start = end + 1;
  }
  return ports;
}

namespace {

// Each setup step: hosts of the scenario and exactly one of what it
// knows. A sysctl is one of a network namespace's own (net.ipv4.*,
// net.ipv6.*): the runner is root, and a step must not reach the machine.
void check_setup(const Scenario& s, const std::string& file) {
  for (std::size_t i = 0; i < s.setup.size(); ++i) {
    const json& step = s.setup[i];
    const std::string where = fmt::format("setup[{}]", i);
    if (!step.is_object()) refuse(file, where + " is not an object");
    int actions = 0;
    for (const auto& [key, value] : step.items()) {
      if (key == "hosts") {
        if (!value.is_array()) refuse(file, where + ".hosts is not a list of hosts");
        for (const auto& h : value) {
          if (!h.is_number_integer() || h.get<int>() < 0 || h.get<int>() >= s.hosts)
            refuse(file, fmt::format("{}.hosts holds {}, not a host of 0..{}", where, h.dump(), s.hosts - 1));
        }
      } else if (key == "mtu") {
        ++actions;
        if (!value.is_number_integer() || value.get<int>() < 1280 || value.get<int>() > 65535)
          refuse(file, where + ".mtu is not an MTU of 1280..65535");
      } else if (key == "sysctl") {
        ++actions;
        if (!value.is_object()) refuse(file, where + ".sysctl is not an object of key: value");
        for (const auto& [k, v] : value.items()) {
          if ((k.rfind("net.ipv4.", 0) != 0 && k.rfind("net.ipv6.", 0) != 0) || !v.is_string() ||
              k.find_first_of("/ =") != std::string::npos)
            refuse(file,
                   fmt::format("{}.sysctl: '{}' is not a net.ipv4.* or net.ipv6.* key with a string value", where, k));
        }
      } else if (key == "address") {
        ++actions;
        const std::string text = value.is_string() ? value.get<std::string>() : std::string();
        const std::size_t slash = text.find('/');
        unsigned char bytes[16];
        const std::string host = text.substr(0, slash);
        const int prefix = slash == std::string::npos ? -1 : std::atoi(text.c_str() + slash + 1);
        const bool v6 = ::inet_pton(AF_INET6, host.c_str(), bytes) == 1;
        if ((!v6 && ::inet_pton(AF_INET, host.c_str(), bytes) != 1) || prefix < 8 || prefix > (v6 ? 128 : 32) ||
            text.find_first_not_of("0123456789abcdefABCDEF:./") != std::string::npos)
          refuse(file, where + ".address is not an IPv4 or IPv6 address with its prefix length (fd77::2/64)");
      } else if (key == "stray_traffic") {
        ++actions;
        if (!value.is_object() || !value.contains("ports") || !value["ports"].is_string() || value.size() != 1 ||
            !parse_port_list(value["ports"].get<std::string>()))
          refuse(file, where + ".stray_traffic is not {\"ports\": \"P,LOW-HIGH,...\"} of at most 1024 ports");
      } else if (key == "agent_env") {
        ++actions;
        if (!value.is_object() || value.empty()) refuse(file, where + ".agent_env is not an object of NAME: value");
        for (const auto& [k, v] : value.items()) {
          if (k.empty() || k.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_") != std::string::npos ||
              !v.is_string())
            refuse(file,
                   fmt::format("{}.agent_env: '{}' is not an upper-case variable name with a string value", where, k));
        }
      } else if (key == "conntrack_full") {
        ++actions;
        if (value != true) refuse(file, where + ".conntrack_full is not true");
      } else if (key == "outbound_from_port") {
        ++actions;
        if (!value.is_number_integer() || value.get<int>() < 1 || value.get<int>() > 65535)
          refuse(file, where + ".outbound_from_port is not a port of 1..65535");
      } else {
        refuse(file, fmt::format("{}.{} is not a setup step this build knows", where, key));
      }
    }
    if (actions != 1)
      refuse(file, where +
                       " must hold exactly one of mtu, sysctl, outbound_from_port, stray_traffic, address, agent_env, "
                       "conntrack_full");
  }
}

Scenario read_scenario(const json& j, const std::string& file) {
  if (!j.is_object()) refuse(file, "not a JSON object");
  Scenario s;
  s.file = file;
  s.name = field<std::string>(j, file, "name", "", true);
  if (s.name.empty() || !std::all_of(s.name.begin(), s.name.end(), [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
      })) {
    refuse(file, fmt::format("name '{}' is not lowercase letters, digits and dashes", s.name));
  }
  s.title = field<std::string>(j, file, "title", "");
  s.story = field<std::string>(j, file, "story", "");
  s.hosts = field<int>(j, file, "hosts", 2);
  if (s.hosts < 1 || s.hosts > kMostHosts) refuse(file, fmt::format("hosts {} is not 1..{}", s.hosts, kMostHosts));
  s.ranks_per_host = field<int>(j, file, "ranks_per_host", 1);
  if (s.ranks_per_host < 1 || s.ranks_per_host > kMostRanksPerHost) {
    refuse(file, fmt::format("ranks_per_host {} is not 1..{}", s.ranks_per_host, kMostRanksPerHost));
  }
  s.timeout_s = field<int>(j, file, "timeout_s", 90);
  if (s.timeout_s < 1) refuse(file, fmt::format("timeout_s {} is not positive", s.timeout_s));
  const json faults = object_field(j, file, "faults", json::array());
  for (std::size_t i = 0; i < faults.size(); ++i) {
    const json& f = faults[i];
    const std::string where = fmt::format("faults[{}]", i);
    if (!f.is_object() || !f.contains("fault")) refuse(file, where + " is not {\"fault\": {...}, \"hosts\": [...]}");
    ScenarioFault sf;
    try {
      sf.fault = parse_fault(f["fault"]);
    } catch (const Error& e) {
      refuse(file, fmt::format("{}: {}", where, e.status().message()));
    }
    for (const auto& h : object_field(f, file, "hosts", json::array())) {
      if (!h.is_number_integer() || h.get<int>() < 0 || h.get<int>() >= s.hosts) {
        refuse(file, fmt::format("{}.hosts holds {}, not a host of 0..{}", where, h.dump(), s.hosts - 1));
      }
      sf.hosts.push_back(h.get<int>());
    }
    s.faults.push_back(std::move(sf));
  }
  s.run = object_field(j, file, "run", json::object());
  s.expect = object_field(j, file, "expect", json::object());
  s.action = object_field(j, file, "action", json::object());
  if (j.contains("resolver")) s.resolver = object_field(j, file, "resolver", json::object());
  s.setup = object_field(j, file, "setup", json::array());
  check_setup(s, file);
  for (const auto& [key, value] : s.expect.items()) {
    if (!kExpectations.count(key)) refuse(file, fmt::format("expect.{} is not an expectation this build knows", key));
  }
  const std::string outcome = field<std::string>(s.expect, file, "outcome", "fail");
  if (outcome != "fail" && outcome != "complete" && outcome != "refused") {
    refuse(file, fmt::format("expect.outcome '{}' is not fail, complete or refused", outcome));
  }
  const auto placement = s.placement();
  for (int h : placement) {
    if (h >= s.hosts) refuse(file, fmt::format("run.placement names host {}, of {}", h, s.hosts));
  }
  return s;
}

bool mentions_all(const std::string& text, const json& keywords) {
  return std::all_of(keywords.begin(), keywords.end(),
                     [&](const json& k) { return text.find(k.get<std::string>()) != std::string::npos; });
}

}  // namespace

std::vector<int> Scenario::placement() const {
  std::vector<int> out = run.value("placement", std::vector<int>{});
  if (!out.empty()) return out;
  for (int h = 0; h < hosts; ++h) {
    for (int l = 0; l < ranks_per_host; ++l)
      out.push_back(h);
  }
  return out;
}

bool Scenario::runs_alone() const {
  for (const char* timed : {"slow_link", "linkcheck", "certify", "bisect", "stall"}) {
    if (expect.contains(timed)) return true;
  }
  return !action.empty();
}

int Scenario::world_size() const {
  return run.value("world_size", static_cast<int>(placement().size()));
}

std::vector<Scenario> load_catalog(const std::string& dir) {
  std::vector<std::pair<std::string, json>> found;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    if (entry.path().extension() != ".json") continue;
    const std::string file = entry.path().filename().string();
    std::ifstream in(entry.path());
    json j = json::parse(in, nullptr, false);
    if (j.is_discarded()) refuse(file, "not valid JSON");
    found.emplace_back(file, std::move(j));
  }
  if (ec) throw Error(ErrorCategory::config, fmt::format("scenario catalog {}: {}", dir, ec.message()));
  std::sort(found.begin(), found.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<Scenario> out;
  std::map<std::string, std::string> file_of;
  for (const auto& [file, j] : found) {
    out.push_back(read_scenario(j, file));
    const auto [it, fresh] = file_of.emplace(out.back().name, file);
    if (!fresh) refuse(file, fmt::format("name '{}' is {}'s too", out.back().name, it->second));
  }
  return out;
}

void ScenarioRun::add(const events::EventMessage& m, std::optional<double> after_stop_s) {
  const int rank = m.rank;
  std::visit(
      [&](const auto& e) {
        using E = std::decay_t<decltype(e)>;
        if constexpr (std::is_same_v<E, events::StageEnded>) {
          if (e.ok) {
            entered.insert(std::string(name_of(e.stage)));
            if (!e.detail.empty()) notes.emplace_back(rank, std::string(name_of(e.stage)) + ": " + e.detail);
          }
        } else if constexpr (std::is_same_v<E, events::StageFailed>) {
          failures[rank] = e;
        } else if constexpr (std::is_same_v<E, events::CollectiveError>) {
          errors[rank].push_back(e.message);
        } else if constexpr (std::is_same_v<E, events::Links>) {
          links.emplace_back(rank, e);
        } else if constexpr (std::is_same_v<E, events::Connections>) {
          for (const auto& c : e.connections) {
            if (!c.outgoing || c.channel != 0) continue;
            ring[{rank, c.peer}] = c;
            // A transport that should have carried a connection and did not.
            if (!c.fallback.empty() && c.fallback.find("NCCL_SHM_DISABLE") == std::string::npos) {
              report.push_back(fmt::format("rank {} -> rank {} via {}: shared memory not used: {}", rank, c.peer,
                                           c.transport, c.fallback));
            }
          }
        } else if constexpr (std::is_same_v<E, events::Stall>) {
          const StallReport& r = e.report;
          stalls.push_back({r, after_stop_s});
          report.push_back(fmt::format(
              "stall at {} #{} seen by rank {} after {:.1f} s without progress, every rank asked in {:.1f} s{}: {}",
              name_of(r.collective), r.seq, r.reporter, static_cast<double>(r.stalled_for.count()) / 1000.0,
              static_cast<double>(r.gathered_in.count()) / 1000.0,
              after_stop_s ? fmt::format(" ({:.1f} s after the rank was stopped)", *after_stop_s) : std::string(),
              r.diagnosis));
        } else if constexpr (std::is_same_v<E, events::Bisect>) {
          report.push_back(events::describe(e));
          bisect.push_back(e);
        } else if constexpr (std::is_same_v<E, events::RankFailed>) {
          report.push_back(e.summary);
          exits[m.rank] = e.summary;
        } else if constexpr (std::is_same_v<E, events::RunDone>) {
          ++agents_done;
          all_ok = all_ok && e.ok;
        }
      },
      m.event);
}

namespace {

// Each rank's failure and what they say read together, in the report;
// "together": one of those sentences holds every keyword.
void report_failures(const json& expect, const ScenarioRun& run, ScenarioCheck& v) {
  std::vector<events::StageFailed> failed;
  for (const auto& [rank, f] : run.failures) {
    v.report.push_back(fmt::format("rank {} failed at {}: {} | hint: {}", rank, name_of(f.stage), f.summary, f.hint));
    failed.push_back(f);
  }
  const auto together = events::read_together(failed);
  for (const auto& t : together)
    v.report.push_back("read together: " + t);
  if (!expect.contains("together")) return;
  const json keywords = expect["together"].value("keywords", json::array());
  if (!std::any_of(together.begin(), together.end(), [&](const std::string& t) { return mentions_all(t, keywords); }))
    v.reasons.push_back(fmt::format("the failures read together do not say every one of: {}", keywords.dump()));
}

// "not_entered": stages no rank finished well; "notes": some stage that
// ended well says what it saw on the way.
void check_stages(const json& expect, const ScenarioRun& run, ScenarioCheck& v) {
  for (const auto& st : expect.value("not_entered", json::array())) {
    if (run.entered.count(st.get<std::string>()))
      v.reasons.push_back("stage " + st.get<std::string>() + " was entered");
  }
  if (!expect.contains("notes")) return;
  const json keywords = expect["notes"].value("keywords", json::array());
  const auto found = std::find_if(run.notes.begin(), run.notes.end(), [&](const std::pair<int, std::string>& n) {
    return mentions_all(n.second, keywords);
  });
  if (found == run.notes.end()) {
    v.reasons.push_back(fmt::format("no stage that ended well says every one of: {}", keywords.dump()));
  } else {
    v.report.push_back(fmt::format("rank {}: {}", found->first, found->second));
  }
}

// "transport": the ring connection from one rank to the next is carried
// by the named transport, and its fallback reason has every keyword.
void check_transport(const json& expect, const ScenarioRun& run, ScenarioCheck& v) {
  if (!expect.contains("transport")) return;
  auto fail = [&](std::string why) { v.reasons.push_back(std::move(why)); };
  const json& t = expect["transport"];
  const int from = t.value("from", -1), to = t.value("to", -1);
  const auto it = run.ring.find({from, to});
  if (it == run.ring.end()) {
    fail(fmt::format("rank {} reported no connection to rank {}", from, to));
  } else if (it->second.transport != t.value("via", "")) {
    fail(
        fmt::format("rank {} -> rank {} went via {}, expected {}", from, to, it->second.transport, t.value("via", "")));
  } else {
    for (const auto& k : t.value("keywords", json::array())) {
      if (it->second.fallback.find(k.get<std::string>()) == std::string::npos) {
        fail(fmt::format("rank {} -> rank {}: the reason ('{}') does not mention '{}'", from, to, it->second.fallback,
                         k.get<std::string>()));
      }
    }
  }
}

// "exits" ([{"rank": 1, "keywords": [...]}]): the agent's word on how that
// rank ended (its rank_failed summary) holds every keyword.
void check_exits(const json& expect, const ScenarioRun& run, ScenarioCheck& v) {
  for (const auto& e : expect.value("exits", json::array())) {
    const int rank = e.value("rank", -1);
    const auto it = run.exits.find(rank);
    if (it == run.exits.end()) {
      v.reasons.push_back(fmt::format("rank {}'s agent did not report it ending badly", rank));
      continue;
    }
    for (const auto& k : e.value("keywords", json::array())) {
      if (it->second.find(k.get<std::string>()) == std::string::npos)
        v.reasons.push_back(
            fmt::format("rank {}'s end ('{}') does not mention '{}'", rank, it->second, k.get<std::string>()));
    }
  }
}

// "slow_link": that link is the slowest flagged, or with "lossy" the one
// whose sender resent the most.
void check_slow_link(const json& expect, const ScenarioRun& run, const std::vector<SlowLink>& slow, ScenarioCheck& v) {
  if (!expect.contains("slow_link")) return;
  const int from = expect["slow_link"].value("from", -1), to = expect["slow_link"].value("to", -1);
  if (slow.empty()) {
    std::string measured;
    for (const auto& [rank, e] : run.links) {
      for (const auto& l : e.links) {
        measured +=
            fmt::format("{}{}->{} {:.1f} MB/s", measured.empty() ? "" : ", ", l.from, rank, l.gbs.value_or(0) * 1e3);
      }
    }
    v.reasons.push_back(fmt::format("expected the link rank {} -> rank {} flagged slow; no link was (measured: {})",
                                    from, to, measured.empty() ? "nothing" : measured));
  } else if (expect["slow_link"].value("lossy", false)) {
    // The link whose sender resent the most must be it.
    const auto most = std::max_element(slow.begin(), slow.end(), [](const SlowLink& a, const SlowLink& b) {
      return a.resent * std::max<std::uint64_t>(b.segments, 1) < b.resent * std::max<std::uint64_t>(a.segments, 1);
    });
    if (!most->lossy() || most->from != from || most->to != to)
      v.reasons.push_back(
          fmt::format("expected the link rank {} -> rank {} flagged lossy; flagged {}", from, to, most->describe()));
  } else if (slow.front().from != from || slow.front().to != to) {
    v.reasons.push_back(fmt::format("expected the link rank {} -> rank {} flagged slowest; flagged {}", from, to,
                                    slow.front().describe()));
  }
}

}  // namespace

namespace {

// "bisect": the run bisected its nodes (perf.bisect) and named `node`, or
// the `link` [a, b], or `verdict` ("none", "between"), within
// log2(hosts) + 2 rounds.
void check_bisect(const json& want, int hosts, const ScenarioRun& run, ScenarioCheck& v) {
  const events::Bisect* end = nullptr;
  int rounds = 0;
  for (const auto& b : run.bisect) {
    if (!b.verdict.empty()) end = &b;
    rounds += b.verdict.empty();
  }
  if (!end) {
    v.reasons.push_back("expected a bisection's verdict; none came");
    return;
  }
  const int most = static_cast<int>(std::floor(std::log2(std::max(hosts, 1)))) + 2;
  if (rounds > most) v.reasons.push_back(fmt::format("the bisection took {} rounds, over {}", rounds, most));
  if (want.contains("node") && (end->verdict != "node" || end->node != want["node"].get<int>()))
    v.reasons.push_back(fmt::format("the bisection named {} (node {}), expected node {}: {}", end->verdict, end->node,
                                    want["node"].get<int>(), end->text));
  if (want.contains("link")) {
    const auto link = want["link"].get<std::vector<int>>();
    if (end->verdict != "link" || link.size() != 2 || std::min(link[0], link[1]) != std::min(end->from, end->to) ||
        std::max(link[0], link[1]) != std::max(end->from, end->to))
      v.reasons.push_back(fmt::format("the bisection named {}, expected the link {}-{}: {}", end->verdict, link.at(0),
                                      link.at(1), end->text));
  }
  if (want.contains("verdict") && end->verdict != want["verdict"].get<std::string>())
    v.reasons.push_back(fmt::format("the bisection's verdict is {}, expected {}: {}", end->verdict,
                                    want["verdict"].get<std::string>(), end->text));
}

}  // namespace

ScenarioCheck check_run(const Scenario& s, const ScenarioRun& run) {
  ScenarioCheck v;
  const json& expect = s.expect;
  report_failures(expect, run, v);
  for (const auto& [rank, list] : run.errors) {
    for (const auto& e : list)
      v.report.push_back(fmt::format("rank {}: {}", rank, e));
  }
  const auto slow = find_slow_links(run.links);
  for (const auto& l : slow)
    v.report.push_back((l.lossy() ? "lossy link: " : "slow link: ") + l.describe());
  auto fail = [&](std::string why) { v.reasons.push_back(std::move(why)); };
  const std::string outcome = expect.value("outcome", "fail");
  check_transport(expect, run, v);
  check_exits(expect, run, v);
  check_slow_link(expect, run, slow, v);
  // "stall": a stall report whose diagnosis has every keyword, made within
  // within_s of the last progress (and of the SIGSTOP, for freeze_rank).
  if (expect.contains("stall")) {
    const json& want = expect["stall"];
    const double within_s = want.value("within_s", 0.0);
    if (run.stalls.empty()) fail("expected a stall report; none came");
    for (const auto& [r, after_stop_s] : run.stalls) {
      for (const auto& k : want.value("keywords", json::array())) {
        if (r.diagnosis.find(k.get<std::string>()) == std::string::npos) {
          fail("the stall report does not mention '" + k.get<std::string>() + "': " + r.diagnosis);
        }
      }
      const double seen_s = static_cast<double>((r.stalled_for + r.gathered_in).count()) / 1000.0;
      if (within_s > 0 && seen_s > within_s) {
        fail(fmt::format("the stall was reported {:.1f} s after the last progress, over {:.1f} s", seen_s, within_s));
      }
      if (within_s > 0 && after_stop_s && *after_stop_s > within_s) {
        fail(fmt::format("the stall was reported {:.1f} s after the rank was stopped, over {:.1f} s", *after_stop_s,
                         within_s));
      }
    }
  }
  if (expect.contains("bisect")) check_bisect(expect["bisect"], s.hosts, run, v);
  if (outcome == "complete") {
    if (!run.all_ok) fail("expected the run to complete, it failed");
    return v;
  }
  if (run.all_ok) fail("expected a failure, the run completed");
  const json keywords = expect.value("keywords", json::array());
  const std::string stage = expect.value("stage", "");
  // "any": at least one rank reports the stage with every keyword (a rank
  // whose store host failed first may only see the store go away).
  if (expect.value("ranks", json("all")) == "any") {
    const bool found = std::any_of(run.failures.begin(), run.failures.end(), [&](const auto& rf) {
      return name_of(rf.second.stage) == stage && mentions_all(events::to_json(rf.second).dump(), keywords);
    });
    if (!found) fail("no rank reported " + stage + " with every expected keyword");
    return v;
  }
  std::vector<int> ranks;
  const json who = expect.value("ranks", json("all"));
  const int placed = static_cast<int>(s.placement().size());
  for (int r = 0; r < s.world_size(); ++r) {
    if (r < placed || who.is_array()) {
      if (who == "nonzero" && r == 0) continue;
      if (who.is_array() && std::find(who.begin(), who.end(), json(r)) == who.end()) continue;
      ranks.push_back(r);
    }
  }
  const auto errors_of = [&](int r) {
    const auto it = run.errors.find(r);
    return it == run.errors.end() ? std::vector<std::string>{} : it->second;
  };
  for (int r : ranks) {
    if (!stage.empty()) {
      const auto f = run.failures.find(r);
      if (f == run.failures.end()) {
        fail(fmt::format("rank {} reported no stage failure (expected {})", r, stage));
        continue;
      }
      if (name_of(f->second.stage) != stage) {
        fail(fmt::format("rank {} failed at {}, expected {}", r, name_of(f->second.stage), stage));
      }
      const std::string text = events::to_json(f->second).dump();
      for (const auto& k : keywords) {
        if (text.find(k.get<std::string>()) == std::string::npos) {
          fail(fmt::format("rank {}'s report does not mention '{}'", r, k.get<std::string>()));
        }
      }
    }
    for (const auto& k : expect.value("error_keywords", json::array())) {
      const auto errors = errors_of(r);
      if (!std::any_of(errors.begin(), errors.end(),
                       [&](const std::string& e) { return e.find(k.get<std::string>()) != std::string::npos; })) {
        fail(fmt::format("rank {}'s error does not mention '{}'", r, k.get<std::string>()));
      }
    }
  }
  // Errors one of the ranks must mention: a dead peer is named first by
  // its ring neighbours; a rank further away may only see a neighbour's
  // abort.
  for (const auto& k : expect.value("any_error_keywords", json::array())) {
    const bool found = std::any_of(ranks.begin(), ranks.end(), [&](int r) {
      const auto errors = errors_of(r);
      return std::any_of(errors.begin(), errors.end(),
                         [&](const std::string& e) { return e.find(k.get<std::string>()) != std::string::npos; });
    });
    if (!found) fail("no rank's error mentions '" + k.get<std::string>() + "'");
  }
  if (expect.value("every_rank_errors", false)) {
    for (int r : ranks) {
      if (errors_of(r).empty() && !run.failures.count(r)) fail(fmt::format("rank {} reported no error", r));
    }
  }
  check_stages(expect, run, v);
  return v;
}

}  // namespace ringmaster::agent

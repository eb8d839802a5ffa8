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
  if (e.in_progress) {
    return {{"type", "stage_progress"},
            {"rank", e.rank},
            {"stage", name_of(e.stage)},
            {"outcome", e.connect_outcome},
            {"remote", e.remote_address},
            {"attempts", e.attempts},
            {"begin_us", std::chrono::duration_cast<std::chrono::microseconds>(e.begin.time_since_epoch()).count()},
            {"elapsed_ms", e.duration.count() / 1e6},
            {"detail", e.detail}};
  }
  return {{"type", "stage"},
          {"rank", e.rank},
          {"stage", name_of(e.stage)},
          {"ok", e.ok},
          {"begin_us", std::chrono::duration_cast<std::chrono::microseconds>(e.begin.time_since_epoch()).count()},
          {"duration_ms", e.duration.count() / 1e6},
          {"detail", e.detail}};
}

json to_json(const StageFailure& f) {
  return {{"type", "failure"},
          {"rank", f.rank},
          {"stage", name_of(f.stage)},
          {"category", name_of(f.category)},
          {"peer_rank", f.peer_rank},
          {"local", f.local_address},
          {"remote", f.remote_address},
          {"errno", f.errno_text},
          {"elapsed_ms", f.elapsed.count()},
          {"timeout_ms", f.timeout.count()},
          {"joined", f.joined},
          {"world_size", f.world_size},
          {"missing", f.missing},
          {"summary", f.summary},
          {"hint", f.hint}};
}

json to_json(const PerfSpec& spec, const PerfRow& row) {
  auto part = [](const PerfResult& r) {
    return json{{"time_us", r.time_us}, {"algbw", r.algbw}, {"busbw", r.busbw}, {"wrong", r.wrong}};
  };
  json j = {{"type", "result"},
            {"collective", name_of(spec.collective)},
            {"bytes", row.bytes},
            {"count", row.count},
            {"dtype", name_of(spec.type)},
            {"redop", name_of(spec.op)},
            {"root", spec.root},
            {"out_of_place", part(row.out_of_place)}};
  if (row.has_in_place) j["in_place"] = part(row.in_place);
  return j;
}

json to_json(const CollectiveRecord& r) {
  return {{"type", "decision"},
          {"collective", name_of(r.collective)},
          {"bytes", r.bytes},
          {"algorithm", name_of(r.algorithm)},
          {"protocol", name_of(r.protocol)},
          {"nchannels", r.nchannels},
          {"time_us", std::chrono::duration<double, std::micro>(r.time).count()}};
}

json to_json(const tune::Decision& d) {
  json candidates = json::array();
  for (const auto& c : d.candidates) {
    json j = {
        {"algorithm", name_of(c.algorithm)}, {"protocol", name_of(c.protocol)}, {"channels", c.channels},
        {"predicted_us", c.predicted_us},    {"latency_us", c.latency_us},      {"bandwidth_gbs", c.bandwidth_gbs}};
    if (!c.excluded.empty()) j["excluded"] = c.excluded;
    candidates.push_back(std::move(j));
  }
  return {{"type", "tuner"},    {"collective", name_of(d.collective)}, {"bytes", d.bytes}, {"nranks", d.nranks},
          {"chosen", d.chosen}, {"candidates", std::move(candidates)}};
}

json links_json(const std::vector<PeerLinkCounters>& links, const std::vector<ConnectionInfo>& connections) {
  json out = json::array();
  for (const auto& l : links) {
    if (l.bytes == 0 && l.ahead == 0) continue;
    json j = {{"from", l.peer}, {"bytes", l.bytes}, {"active_us", l.active_ns / 1000}, {"ahead", l.ahead}};
    if (l.bytes > 0 && l.active_ns > 0) j["gbs"] = static_cast<double>(l.bytes) / static_cast<double>(l.active_ns);
    for (const auto& c : connections) {
      if (c.peer == l.peer) j["transport"] = c.transport;
    }
    out.push_back(std::move(j));
  }
  return {{"type", "links"}, {"links", std::move(out)}};
}

json connections_json(const std::vector<ConnectionInfo>& connections) {
  json out = json::array();
  for (const auto& c : connections) {
    out.push_back({{"channel", c.channel},
                   {"peer", c.peer},
                   {"outgoing", c.outgoing},
                   {"transport", c.transport},
                   {"address", c.address},
                   {"fallback", c.fallback},
                   {"sockets", c.sockets}});
  }
  return {{"type", "connections"}, {"connections", std::move(out)}};
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

std::vector<SlowLink> find_slow_links(const std::vector<std::pair<int, json>>& links_events) {
  // Per transport: a socket link next to shared memory is not slow.
  // A link whose every large transfer was waiting for its reader set no
  // pace: it counts at the fastest measured rate of its transport (gbs 0
  // marks it here).
  std::map<std::string, std::vector<SlowLink>> by_transport;
  for (const auto& [rank, e] : links_events) {
    for (const auto& l : e.value("links", json::array())) {
      const double gbs = l.value("gbs", 0.0);
      const std::string transport = l.value("transport", std::string());
      if (gbs > 0) {
        by_transport[transport].push_back({l.value("from", -1), rank, gbs, 0, transport});
      } else if (l.value("ahead", std::uint64_t{0}) > 0) {
        by_transport[transport].push_back({l.value("from", -1), rank, 0, 0, transport});
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

std::optional<Stage> parse_stage(std::string_view name) {
  for (int s = 0; s <= static_cast<int>(Stage::ready); ++s) {
    if (name_of(static_cast<Stage>(s)) == name) return static_cast<Stage>(s);
  }
  return std::nullopt;
}

std::optional<StageEvent> stage_event_from_json(const json& j) {
  try {
    const auto stage = parse_stage(j.at("stage").get<std::string>());
    if (!stage) return std::nullopt;
    StageEvent e;
    e.stage = *stage;
    e.rank = j.at("rank").get<int>();
    e.ok = j.at("ok").get<bool>();
    e.begin = std::chrono::system_clock::time_point(std::chrono::microseconds(j.at("begin_us").get<long long>()));
    e.duration = std::chrono::nanoseconds(static_cast<long long>(j.at("duration_ms").get<double>() * 1e6));
    e.detail = j.at("detail").get<std::string>();
    return e;
  } catch (const json::exception&) {
    return std::nullopt;
  }
}

std::optional<PerfRow> perf_row_from_json(const json& j) {
  try {
    auto part = [](const json& p) {
      PerfResult r;
      r.time_us = p.at("time_us").get<double>();
      r.algbw = p.at("algbw").get<double>();
      r.busbw = p.at("busbw").get<double>();
      r.wrong = p.at("wrong").get<long>();
      return r;
    };
    PerfRow row;
    row.bytes = j.at("bytes").get<std::size_t>();
    row.count = j.at("count").get<std::size_t>();
    row.out_of_place = part(j.at("out_of_place"));
    row.has_in_place = j.contains("in_place");
    if (row.has_in_place) row.in_place = part(j.at("in_place"));
    return row;
  } catch (const json::exception&) {
    return std::nullopt;
  }
}

json to_json(const StallReport& report) {
  json ranks = json::array();
  for (const auto& w : report.ranks) {
    json calls = json::array();
    for (const auto& c : w.calls) {
      json call = {{"seq", c.seq},
                   {"collective", name_of(c.collective)},
                   {"bytes", c.bytes},
                   {"algorithm", name_of(c.algorithm)},
                   {"protocol", name_of(c.protocol)},
                   {"channels", c.channels},
                   {"state", name_of(c.state)},
                   {"age_us", c.age.count()},
                   {"duration_us", c.duration.count()}};
      if (c.waits_on >= 0) {
        call["step"] = c.step;
        call["waits_on"] = c.waits_on;
        call["waits_to"] = c.waits_to_send ? "send" : "receive";
      }
      calls.push_back(std::move(call));
    }
    ranks.push_back(
        {{"rank", w.rank}, {"answered", w.answered}, {"last_called", w.last_called}, {"calls", std::move(calls)}});
  }
  return {{"type", "stall"},
          {"reporter", report.reporter},
          {"seq", report.seq},
          {"collective", name_of(report.collective)},
          {"stalled_for_ms", report.stalled_for.count()},
          {"gathered_in_ms", report.gathered_in.count()},
          {"diagnosis", report.diagnosis},
          {"ranks", std::move(ranks)}};
}

namespace {

// The enum value whose name_of is `name`; nothing when none is.
template <class Enum>
std::optional<Enum> named(const std::string& name, Enum last) {
  for (int v = 0; v <= static_cast<int>(last); ++v) {
    if (name_of(static_cast<Enum>(v)) == name) return static_cast<Enum>(v);
  }
  return std::nullopt;
}

template <class Enum>
Enum must_be_named(const json& j, const char* field, Enum last) {
  const auto value = named(j.at(field).get<std::string>(), last);
  if (!value) throw std::invalid_argument(field);
  return *value;
}

}  // namespace

std::optional<StallReport> stall_report_from_json(const json& j) {
  try {
    StallReport r;
    r.reporter = j.at("reporter").get<int>();
    r.seq = j.at("seq").get<std::uint64_t>();
    r.collective = must_be_named(j, "collective", Collective::scatter);
    r.stalled_for = std::chrono::milliseconds(j.at("stalled_for_ms").get<std::int64_t>());
    r.gathered_in = std::chrono::milliseconds(j.value("gathered_in_ms", std::int64_t{0}));
    r.diagnosis = j.at("diagnosis").get<std::string>();
    for (const auto& w : j.at("ranks")) {
      RankWavefront wave;
      wave.rank = w.at("rank").get<int>();
      wave.answered = w.at("answered").get<bool>();
      wave.last_called = w.at("last_called").get<std::int64_t>();
      for (const auto& c : w.at("calls")) {
        CallRecord call;
        call.seq = c.at("seq").get<std::uint64_t>();
        call.collective = must_be_named(c, "collective", Collective::scatter);
        call.bytes = c.at("bytes").get<std::size_t>();
        call.algorithm = must_be_named(c, "algorithm", Algorithm::tree);
        call.protocol = must_be_named(c, "protocol", Protocol::simple);
        call.channels = c.at("channels").get<int>();
        call.state = must_be_named(c, "state", CallState::failed);
        call.age = std::chrono::microseconds(c.at("age_us").get<std::int64_t>());
        call.duration = std::chrono::microseconds(c.at("duration_us").get<std::int64_t>());
        if (c.contains("waits_on")) {
          call.waits_on = c.at("waits_on").get<int>();
          call.step = c.at("step").get<int>();
          call.waits_to_send = c.at("waits_to").get<std::string>() == "send";
        }
        wave.calls.push_back(call);
      }
      r.ranks.push_back(std::move(wave));
    }
    return r;
  } catch (const json::exception&) {
    return std::nullopt;
  } catch (const std::invalid_argument&) {
    return std::nullopt;
  }
}

}  // namespace ringmaster::agent

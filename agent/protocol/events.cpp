// The typed events of a run, both ways (ringmaster/agent/events.h).
#include "ringmaster/agent/events.h"
#include "ringmaster/tools/job_watch.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <chrono>
#include <limits>
#include <type_traits>

#include "fields.h"
#include "ringmaster/status.h"

namespace ringmaster::agent::events {

using nlohmann::json;

namespace {

using detail::Fields;
using detail::named;

// ---- each type: to JSON, from JSON ----

json body(const StageEnded& e) {
  return {{"rank", e.rank},         {"stage", name_of(e.stage)},    {"ok", e.ok},
          {"begin_us", e.begin_us}, {"duration_ms", e.duration_ms}, {"detail", e.detail}};
}
StageEnded read(const Fields& f, StageEnded e) {
  e.stage = f.stage();
  e.rank = f.integer("rank", -1);
  e.ok = f.flag("ok", true, true);
  e.begin_us = f.integer<long long>("begin_us");
  e.duration_ms = f.number("duration_ms");
  e.detail = f.text("detail");
  return e;
}

json body(const StageProgress& e) {
  return {{"rank", e.rank},         {"stage", name_of(e.stage)}, {"outcome", e.outcome},       {"remote", e.remote},
          {"attempts", e.attempts}, {"begin_us", e.begin_us},    {"elapsed_ms", e.elapsed_ms}, {"detail", e.detail}};
}
StageProgress read(const Fields& f, StageProgress e) {
  e.stage = f.stage();
  e.rank = f.integer("rank", -1);
  e.outcome = f.text("outcome");
  e.remote = f.text("remote");
  e.attempts = f.integer("attempts", 0);
  e.begin_us = f.integer<long long>("begin_us");
  e.elapsed_ms = f.number("elapsed_ms");
  e.detail = f.text("detail");
  return e;
}

json body(const StageFailed& e) {
  return {{"rank", e.rank},
          {"stage", name_of(e.stage)},
          {"category", e.category},
          {"peer_rank", e.peer_rank},
          {"local", e.local},
          {"remote", e.remote},
          {"errno", e.errno_text},
          {"elapsed_ms", e.elapsed_ms},
          {"timeout_ms", e.timeout_ms},
          {"joined", e.joined},
          {"world_size", e.world_size},
          {"missing", e.missing},
          {"summary", e.summary},
          {"hint", e.hint},
          {"conntrack", e.conntrack}};
}
StageFailed read(const Fields& f, StageFailed e) {
  e.stage = f.stage();
  e.rank = f.integer("rank", -1);
  e.category = f.text("category");
  e.peer_rank = f.integer("peer_rank", -1);
  e.local = f.text("local");
  e.remote = f.text("remote");
  e.errno_text = f.text("errno");
  e.elapsed_ms = f.integer<long long>("elapsed_ms");
  e.timeout_ms = f.integer<long long>("timeout_ms");
  e.joined = f.integer("joined", -1);
  e.world_size = f.integer("world_size", 0);
  e.missing = f.integers<int>("missing");
  e.summary = f.text("summary", true);
  e.hint = f.text("hint");
  e.conntrack = f.text("conntrack");
  return e;
}

json body(const Sample& e) {
  json channels = json::array();
  for (const auto& c : e.channels) {
    json j = {{"channel", c.channel},
              {"bytes_sent", c.bytes_sent},
              {"bytes_received", c.bytes_received},
              {"busy_ns", c.busy_ns},
              {"steps", c.steps}};
    if (!c.nic_out.empty()) j["nic_out"] = c.nic_out;
    if (!c.nic_in.empty()) j["nic_in"] = c.nic_in;
    channels.push_back(std::move(j));
  }
  json peers = json::array();
  for (const auto& p : e.peers)
    peers.push_back({{"peer", p.peer}, {"bytes_received", p.bytes_received}});
  return {{"t_us", e.t_us},
          {"channels", std::move(channels)},
          {"peers", std::move(peers)},
          {"calls", {{"started", e.calls_started}, {"ended", e.calls_ended}}}};
}
Sample read(const Fields& f, Sample e) {
  e.t_us = f.integer<long long>("t_us", 0, true);
  f.each("channels", [&](const Fields& c) {
    e.channels.push_back({c.integer("channel", 0, true), c.integer<std::uint64_t>("bytes_sent"),
                          c.integer<std::uint64_t>("bytes_received"), c.integer<std::uint64_t>("busy_ns"),
                          c.integer<std::uint64_t>("steps"), c.text("nic_out"), c.text("nic_in")});
  });
  f.each("peers", [&](const Fields& p) {
    e.peers.push_back({p.integer("peer", -1, true), p.integer<std::uint64_t>("bytes_received")});
  });
  if (const auto calls = f.object("calls")) {
    e.calls_started = calls->integer<std::uint64_t>("started");
    e.calls_ended = calls->integer<std::uint64_t>("ended");
  }
  return e;
}

json body(const Rings& e) {
  json rings = json::array();
  for (const auto& r : e.rings) {
    json j = {{"channel", r.channel}, {"ranks", r.ranks}};
    if (!r.nics.empty()) j["nics"] = r.nics;
    if (!r.devices.empty()) j["devices"] = r.devices;
    rings.push_back(std::move(j));
  }
  json j = {{"rings", std::move(rings)}};
  if (!e.gpus.empty()) j["gpus"] = e.gpus;
  return j;
}
Rings read(const Fields& f, Rings e) {
  f.each(
      "rings",
      [&](const Fields& r) {
        Rings::Ring ring{r.integer("channel", 0), r.integers<int>("ranks"), r.integers<int>("nics"),
                         r.texts("devices")};
        if ((!ring.nics.empty() && ring.nics.size() != ring.ranks.size()) ||
            (!ring.devices.empty() && ring.devices.size() != ring.ranks.size()))
          throw Error(ErrorCategory::protocol,
                      fmt::format("{}: 'nics' and 'devices' give one entry per ring position: {} ranks, {} nics, "
                                  "{} devices",
                                  r.where(), ring.ranks.size(), ring.nics.size(), ring.devices.size()));
        e.rings.push_back(std::move(ring));
      },
      true);
  e.gpus = f.integers<int>("gpus");
  return e;
}

json body(const Trees& e) {
  json trees = json::array();
  for (const auto& t : e.trees)
    trees.push_back({{"tree", t.tree}, {"parents", t.parents}});
  return {{"trees", std::move(trees)}};
}
Trees read(const Fields& f, Trees e) {
  f.each(
      "trees",
      [&](const Fields& t) {
        e.trees.push_back({t.integer("tree", 0), t.integers<int>("parents")});
      },
      true);
  return e;
}

json body(const Connections& e) {
  json out = json::array();
  for (const auto& c : e.connections) {
    out.push_back({{"channel", c.channel},
                   {"peer", c.peer},
                   {"outgoing", c.outgoing},
                   {"transport", c.transport},
                   {"address", c.address},
                   {"fallback", c.fallback},
                   {"sockets", c.sockets}});
  }
  return {{"connections", std::move(out)}};
}
Connections read(const Fields& f, Connections e) {
  f.each(
      "connections",
      [&](const Fields& c) {
        ConnectionInfo info;
        info.channel = c.integer("channel", -1);
        info.peer = c.integer("peer", -1, true);
        info.outgoing = c.flag("outgoing", true);
        info.transport = c.text("transport");
        info.address = c.text("address");
        info.fallback = c.text("fallback");
        info.sockets = c.integer("sockets", 1);
        e.connections.push_back(std::move(info));
      },
      true);
  return e;
}

json body(const Links& e) {
  json out = json::array();
  for (const auto& l : e.links) {
    json j = {{"from", l.from}, {"bytes", l.bytes}, {"active_us", l.active_us}, {"ahead", l.ahead}};
    if (l.gbs) j["gbs"] = *l.gbs;
    if (!l.transport.empty()) j["transport"] = l.transport;
    out.push_back(std::move(j));
  }
  json sent = json::array();
  for (const auto& t : e.sent)
    sent.push_back({{"to", t.to}, {"segments", t.segments}, {"resent", t.resent}});
  json body = {{"links", std::move(out)}};
  if (!sent.empty()) body["sent"] = std::move(sent);
  return body;
}
Links read(const Fields& f, Links e) {
  f.each(
      "links",
      [&](const Fields& l) {
        Links::Link link;
        link.from = l.integer("from", -1, true);
        link.bytes = l.integer<std::uint64_t>("bytes");
        link.active_us = l.integer<std::uint64_t>("active_us");
        link.ahead = l.integer<std::uint64_t>("ahead");
        const double gbs = l.number("gbs", -1);
        if (gbs >= 0) link.gbs = gbs;
        link.transport = l.text("transport");
        e.links.push_back(std::move(link));
      },
      true);
  f.each("sent", [&](const Fields& t) {
    e.sent.push_back(
        {t.integer("to", -1, true), t.integer<std::uint64_t>("segments"), t.integer<std::uint64_t>("resent")});
  });
  return e;
}

json body(const Decision& e) {
  return {{"collective", e.collective}, {"bytes", e.bytes},         {"algorithm", e.algorithm},
          {"protocol", e.protocol},     {"nchannels", e.nchannels}, {"time_us", e.time_us}};
}
Decision read(const Fields& f, Decision e) {
  e.collective = f.text("collective", true);
  e.bytes = f.integer<std::uint64_t>("bytes", 0, true);
  e.algorithm = f.text("algorithm");
  e.protocol = f.text("protocol");
  e.nchannels = f.integer("nchannels", 0);
  e.time_us = f.number("time_us", -1);
  return e;
}

json body(const TunerTable& e) {
  json candidates = json::array();
  for (const auto& c : e.candidates) {
    json j = {{"algorithm", c.algorithm},       {"protocol", c.protocol},     {"channels", c.channels},
              {"predicted_us", c.predicted_us}, {"latency_us", c.latency_us}, {"bandwidth_gbs", c.bandwidth_gbs}};
    if (!c.excluded.empty()) j["excluded"] = c.excluded;
    candidates.push_back(std::move(j));
  }
  return {{"collective", e.collective},
          {"bytes", e.bytes},
          {"nranks", e.nranks},
          {"chosen", e.chosen},
          {"candidates", std::move(candidates)}};
}
TunerTable read(const Fields& f, TunerTable e) {
  e.collective = f.text("collective", true);
  e.bytes = f.integer<std::uint64_t>("bytes", 0, true);
  e.nranks = f.integer("nranks", 0);
  e.chosen = f.integer("chosen", -1);
  f.each(
      "candidates",
      [&](const Fields& c) {
        e.candidates.push_back({c.text("algorithm"), c.text("protocol"), c.integer("channels", 0),
                                c.number("predicted_us"), c.number("latency_us"), c.number("bandwidth_gbs"),
                                c.text("excluded")});
      },
      true);
  if (e.chosen < -1 || e.chosen >= static_cast<int>(e.candidates.size())) {
    throw Error(ErrorCategory::protocol, fmt::format("event 'tuner': 'chosen' is {}, but there are {} candidates",
                                                     e.chosen, e.candidates.size()));
  }
  return e;
}

json timing(const Result::Timing& t) {
  return {{"time_us", t.time_us}, {"algbw", t.algbw}, {"busbw", t.busbw}, {"wrong", t.wrong}};
}
Result::Timing read_timing(const Fields& f) {
  return {f.number("time_us", 0, true), f.number("algbw"), f.number("busbw"), f.integer<long long>("wrong")};
}
json body(const Result& e) {
  json j = {{"collective", e.collective},
            {"bytes", e.bytes},
            {"count", e.count},
            {"dtype", e.dtype},
            {"redop", e.redop},
            {"root", e.root},
            {"out_of_place", timing(e.out_of_place)}};
  if (e.in_place) j["in_place"] = timing(*e.in_place);
  if (e.tuner) {
    j["tuner"] = {{"algorithm", e.tuner->algorithm},
                  {"protocol", e.tuner->protocol},
                  {"channels", e.tuner->channels},
                  {"predicted_us", e.tuner->predicted_us}};
  }
  if (!e.candidate.empty()) j["candidate"] = e.candidate;
  return j;
}
Result read(const Fields& f, Result e) {
  e.collective = f.text("collective", true);
  e.bytes = f.integer<std::uint64_t>("bytes", 0, true);
  e.count = f.integer<std::uint64_t>("count");
  e.dtype = f.text("dtype");
  e.redop = f.text("redop");
  e.root = f.integer("root", -1);
  e.out_of_place = read_timing(*f.object("out_of_place", true));
  if (const auto p = f.object("in_place")) e.in_place = read_timing(*p);
  if (const auto t = f.object("tuner")) {
    e.tuner =
        Result::Pick{t->text("algorithm"), t->text("protocol"), t->integer("channels", 0), t->number("predicted_us")};
  }
  e.candidate = f.text("candidate");
  return e;
}

json body(const CollectiveError& e) {
  return {{"category", e.category}, {"message", e.message}};
}
CollectiveError read(const Fields& f, CollectiveError e) {
  e.category = f.text("category");
  e.message = f.text("message", true);
  return e;
}

json body(const Stall& s) {
  const StallReport& report = s.report;
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
  return {{"reporter", report.reporter},
          {"seq", report.seq},
          {"collective", name_of(report.collective)},
          {"stalled_for_ms", report.stalled_for.count()},
          {"gathered_in_ms", report.gathered_in.count()},
          {"diagnosis", report.diagnosis},
          {"ranks", std::move(ranks)}};
}
Stall read(const Fields& f, Stall s) {
  StallReport& r = s.report;
  r.reporter = f.integer("reporter", -1, true);
  r.seq = f.integer<std::uint64_t>("seq", 0, true);
  r.collective = f.enumerated("collective", Collective::scatter);
  r.stalled_for = std::chrono::milliseconds(f.integer<std::int64_t>("stalled_for_ms", 0, true));
  r.gathered_in = std::chrono::milliseconds(f.integer<std::int64_t>("gathered_in_ms"));
  r.diagnosis = f.text("diagnosis");
  f.each(
      "ranks",
      [&](const Fields& w) {
        RankWavefront wave;
        wave.rank = w.integer("rank", -1, true);
        wave.answered = w.flag("answered", false, true);
        wave.last_called = w.integer<std::int64_t>("last_called", -1);
        w.each("calls", [&](const Fields& c) {
          CallRecord call;
          call.seq = c.integer<std::uint64_t>("seq", 0, true);
          call.collective = c.enumerated("collective", Collective::scatter);
          call.bytes = c.integer<std::size_t>("bytes");
          call.algorithm = c.enumerated("algorithm", Algorithm::pair);
          call.protocol = c.enumerated("protocol", Protocol::simple);
          call.channels = c.integer("channels", 0);
          call.state = c.enumerated("state", CallState::failed);
          call.age = std::chrono::microseconds(c.integer<std::int64_t>("age_us"));
          call.duration = std::chrono::microseconds(c.integer<std::int64_t>("duration_us"));
          if (const auto waits_on = c.maybe_integer<int>("waits_on")) {
            call.waits_on = *waits_on;
            call.step = c.integer("step", 0);
            call.waits_to_send = c.text("waits_to") == "send";
          }
          wave.calls.push_back(call);
        });
        r.ranks.push_back(std::move(wave));
      },
      true);
  return s;
}

json body(const RankDone& e) {
  return {{"wrong", e.wrong}, {"rows", e.rows}, {"exit_code", e.exit_code}};
}
RankDone read(const Fields& f, RankDone e) {
  e.wrong = f.integer<long long>("wrong");
  e.rows = f.integer<long long>("rows");
  e.exit_code = f.integer("exit_code", 0, true);
  return e;
}

}  // namespace

std::string describe(const Bisect& b) {
  if (!b.verdict.empty()) return fmt::format("bisect ({} round{}): {}", b.round, b.round == 1 ? "" : "s", b.text);
  std::string line = fmt::format("bisect round {}:", b.round);
  for (const auto& g : b.groups)
    line += fmt::format(" nodes {} {:.2f} GB/s{};", fmt::join(g.nodes, ","), g.busbw, g.slow ? " (slow)" : "");
  line.pop_back();
  return line;
}

namespace {

json body(const Bisect& e) {
  json groups = json::array();
  for (const auto& g : e.groups) {
    json j = {{"nodes", g.nodes}, {"busbw", g.busbw}, {"slow", g.slow}};
    if (!g.error.empty()) j["error"] = g.error;
    groups.push_back(std::move(j));
  }
  json j = {{"round", e.round}, {"groups", std::move(groups)}};
  if (!e.verdict.empty()) {
    j["verdict"] = e.verdict;
    j["text"] = e.text;
    if (e.node >= 0) j["node"] = e.node;
    if (e.from >= 0) j["from"] = e.from, j["to"] = e.to;
    if (!e.side_a.empty()) j["side_a"] = e.side_a, j["side_b"] = e.side_b;
  }
  return j;
}
Bisect read(const Fields& f, Bisect e) {
  e.round = f.integer("round", 0, true);
  f.each("groups", [&](const Fields& g) {
    e.groups.push_back({g.integers<int>("nodes"), g.number("busbw"), g.flag("slow", false), g.text("error")});
  });
  e.verdict = f.text("verdict");
  e.text = f.text("text");
  e.node = f.integer("node", -1);
  e.from = f.integer("from", -1);
  e.to = f.integer("to", -1);
  e.side_a = f.integers<int>("side_a");
  e.side_b = f.integers<int>("side_b");
  return e;
}

json body(const RankOutput& e) {
  json j = {{"text", e.text}};
  if (e.cut) j["cut"] = true;
  return j;
}
RankOutput read(const Fields& f, RankOutput e) {
  e.text = f.text("text", true);
  e.cut = f.flag("cut", false);
  return e;
}

json body(const RankExit& e) {
  return {{"exit_code", e.exit_code}};
}
RankExit read(const Fields& f, RankExit e) {
  e.exit_code = f.integer("exit_code", 0);
  return e;
}

json body(const RankFailed& e) {
  json j = {{"pid", e.pid}, {"stderr_tail", e.stderr_tail}, {"summary", e.summary}};
  if (e.exit_code) j["exit_code"] = *e.exit_code;
  if (e.signal) {
    j["signal"] = *e.signal;
    j["signal_name"] = e.signal_name;
  }
  return j;
}
RankFailed read(const Fields& f, RankFailed e) {
  e.pid = f.integer<long long>("pid");
  e.exit_code = f.maybe_integer<int>("exit_code");
  e.signal = f.maybe_integer<int>("signal");
  e.signal_name = f.text("signal_name");
  e.summary = f.text("summary");
  e.stderr_tail = f.text("stderr_tail");
  return e;
}

json body(const RunDone& e) {
  return {{"ok", e.ok}, {"cancelled", e.cancelled}};
}
RunDone read(const Fields& f, RunDone e) {
  e.ok = f.flag("ok", false, true);
  e.cancelled = f.flag("cancelled", false);
  return e;
}

// The fault of a fault event, through the fault library's own checks.
FaultSpec fault_of(const Fields& f) {
  try {
    return parse_fault(*f.raw("fault", true));
  } catch (const Error& e) {
    throw Error(ErrorCategory::protocol, fmt::format("{}: {}", f.where(), e.status().message()));
  }
}

json body(const FaultApplied& e) {
  return {{"fault_id", e.fault_id}, {"fault", agent::to_json(e.fault)}, {"mechanism", e.mechanism}, {"note", e.note}};
}
FaultApplied read(const Fields& f, FaultApplied e) {
  e.fault_id = f.integer("fault_id", 0, true);
  e.fault = fault_of(f);
  e.mechanism = f.text("mechanism", true);
  e.note = f.text("note");
  return e;
}

json body(const FaultReverted& e) {
  return {{"fault_id", e.fault_id}, {"fault", agent::to_json(e.fault)}, {"reason", e.reason}};
}
FaultReverted read(const Fields& f, FaultReverted e) {
  e.fault_id = f.integer("fault_id", 0, true);
  e.fault = fault_of(f);
  e.reason = f.text("reason", true);
  return e;
}

json body(const NicSample& e) {
  json nics = json::array();
  for (const auto& n : e.nics) {
    json j = {{"name", n.name}, {"rx_bytes", n.rx_bytes}, {"tx_bytes", n.tx_bytes}, {"speed_mbps", n.speed_mbps}};
    if (n.rdma) j["rdma"] = true;
    nics.push_back(std::move(j));
  }
  return {{"t_us", e.t_us}, {"nics", std::move(nics)}};
}
NicSample read(const Fields& f, NicSample e) {
  e.t_us = f.integer<long long>("t_us", 0, true);
  f.each("nics", [&](const Fields& n) {
    NicSample::Nic nic;
    nic.name = n.text("name", true);
    nic.rx_bytes = n.integer<std::uint64_t>("rx_bytes");
    nic.tx_bytes = n.integer<std::uint64_t>("tx_bytes");
    nic.speed_mbps = n.integer<std::uint64_t>("speed_mbps");
    nic.rdma = n.flag("rdma", false);
    e.nics.push_back(std::move(nic));
  });
  return e;
}

json body(const JobRank& e) {
  if (!e.error.empty()) return {{"pid", e.pid}, {"error", e.error}};
  return {{"pid", e.pid},
          {"rank", e.rank},
          {"world_size", e.world_size},
          {"stage", std::string(name_of(e.stage))},
          {"outcome", e.outcome},
          {"remote", e.remote},
          {"syn_retransmits", e.syn_retransmits},
          {"store_clients", e.store_clients},
          {"master_addr", e.master_addr},
          {"master_port", e.master_port},
          {"run_id", e.run_id},
          {"detail", e.detail},
          {"hint", e.hint},
          {"command", e.command}};
}
JobRank read(const Fields& f, JobRank e) {
  e.pid = f.integer("pid", 0, true);
  e.error = f.text("error");
  if (!e.error.empty()) return e;
  e.rank = f.integer("rank", -1);
  e.world_size = f.integer("world_size", -1);
  e.stage = f.stage();
  e.outcome = f.text("outcome");
  e.remote = f.text("remote");
  e.syn_retransmits = f.integer("syn_retransmits", 0);
  e.store_clients = f.integer("store_clients", 0);
  e.master_addr = f.text("master_addr");
  e.master_port = f.integer("master_port", 0);
  e.run_id = f.text("run_id");
  e.detail = f.text("detail");
  e.hint = f.text("hint");
  e.command = f.text("command");
  return e;
}

json body(const JobWavefront& e) {
  return {{"wavefront", e.wavefront}};
}
JobWavefront read(const Fields& f, JobWavefront e) {
  f.raw("wavefront", true);
  e.wavefront = f.texts("wavefront");
  return e;
}

json body(const JobNcclLog& e) {
  json j = {{"pid", e.pid}, {"rank", e.rank}, {"file", e.file}, {"summary", e.summary}};
  if (e.nccl.is_object()) j["nccl"] = e.nccl;
  return j;
}
JobNcclLog read(const Fields& f, JobNcclLog e) {
  e.pid = f.integer("pid", 0, true);
  e.rank = f.integer("rank", -1);
  e.file = f.text("file");
  e.summary = f.text("summary", true);
  if (const json* nccl = f.raw("nccl", false)) {
    if (!nccl->is_object()) throw Error(ErrorCategory::protocol, fmt::format("{}: 'nccl' is not an object", f.where()));
    e.nccl = *nccl;
  }
  return e;
}

json body(const JobRas& e) {
  json j = {{"address", e.address}, {"format", e.format}, {"findings", e.findings}};
  if (!e.error.empty()) j["error"] = e.error;
  return j;
}
JobRas read(const Fields& f, JobRas e) {
  e.address = f.text("address", true);
  e.format = f.text("format");
  e.findings = f.texts("findings");
  e.error = f.text("error");
  return e;
}

// Tries each alternative's kType in turn.
template <std::size_t I = 0>
Event parse_as(std::string_view type, const json& j) {
  if constexpr (I + 1 == std::variant_size_v<Event>) {  // Unknown, the last
    return Unknown{std::string(type), j};
  } else {
    using E = std::variant_alternative_t<I, Event>;
    if (type == E::kType) return read(Fields(j, fmt::format("event '{}'", type)), E{});
    return parse_as<I + 1>(type, j);
  }
}

}  // namespace

std::string_view type_of(const Event& e) {
  return std::visit(
      [](const auto& x) -> std::string_view {
        using E = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<E, Unknown>) {
          return x.type;
        } else {
          return E::kType;
        }
      },
      e);
}

json to_json(const Event& e) {
  return std::visit(
      [](const auto& x) -> json {
        using E = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<E, Unknown>) {
          json j = x.body;
          j["type"] = x.type;
          return j;
        } else {
          json j = {{"type", E::kType}};
          j.update(body(x));
          return j;
        }
      },
      e);
}

Event parse_event(const json& j) {
  if (!j.is_object()) throw Error(ErrorCategory::protocol, fmt::format("an event is an object, not {}", j.type_name()));
  const auto type = j.find("type");
  if (type == j.end() || !type->is_string()) {
    throw Error(ErrorCategory::protocol, "an event needs 'type', a string");
  }
  return parse_as(type->get<std::string>(), j);
}

std::optional<EventMessage> parse_event_message(const json& message, Body body) {
  if (!message.is_object() || message.value("type", json()) != "event") return std::nullopt;
  const Fields f(message, "'event' message");
  EventMessage m;
  m.run_id = f.text("run_id", true);
  m.rank = f.integer("rank", -1);
  const auto event = message.find("event");
  if (event == message.end()) throw Error(ErrorCategory::protocol, "'event' message: 'event' is missing");
  try {
    m.event = parse_event(*event);
    if (body == Body::keep) m.body = *event;
  } catch (const Error& e) {
    throw Error(ErrorCategory::protocol, fmt::format("rank {} of run {}: {}", m.rank, m.run_id, e.status().message()));
  }
  return m;
}

json to_json(const EventMessage& m) {
  return {{"run_id", m.run_id}, {"rank", m.rank}, {"event", m.body.is_null() ? to_json(m.event) : m.body}};
}

JobRank job_rank(const WatchedRank& r) {
  JobRank e;
  e.pid = r.pid;
  e.rank = r.rank;
  e.world_size = r.world_size;
  e.stage = r.stage;
  e.outcome = r.outcome;
  e.remote = r.remote;
  e.master_addr = r.master_addr;
  e.run_id = r.run_id;
  e.master_port = r.master_port;
  e.syn_retransmits = r.syn_retransmits;
  e.store_clients = r.store_clients;
  e.detail = r.detail;
  e.hint = r.hint;
  e.command = r.command;
  return e;
}

std::string describe(const JobRas& e) {
  return fmt::format("NCCL RAS at {}: {}", e.address,
                     !e.error.empty()     ? e.error
                     : e.findings.empty() ? std::string("every rank answered and agrees")
                                          : fmt::format("{}", fmt::join(e.findings, "; ")));
}

WatchedRank watched_rank(const JobRank& e) {
  WatchedRank r;
  r.pid = e.pid;
  r.rank = e.rank;
  r.world_size = e.world_size;
  r.stage = e.stage;
  r.outcome = e.outcome;
  r.remote = e.remote;
  r.master_addr = e.master_addr;
  r.run_id = e.run_id;
  r.master_port = e.master_port;
  r.syn_retransmits = e.syn_retransmits;
  r.store_clients = e.store_clients;
  r.detail = e.detail;
  r.hint = e.hint;
  r.command = e.command;
  return r;
}

StageEnded stage_ended(const StageEvent& e) {
  StageEnded s;
  s.stage = e.stage;
  s.rank = e.rank;
  s.ok = e.ok;
  s.begin_us = std::chrono::duration_cast<std::chrono::microseconds>(e.begin.time_since_epoch()).count();
  s.duration_ms = static_cast<double>(e.duration.count()) / 1e6;
  s.detail = e.detail;
  return s;
}

StageProgress stage_progress(const StageEvent& e) {
  StageProgress s;
  s.stage = e.stage;
  s.rank = e.rank;
  s.outcome = e.connect_outcome;
  s.remote = e.remote_address;
  s.attempts = e.attempts;
  s.begin_us = std::chrono::duration_cast<std::chrono::microseconds>(e.begin.time_since_epoch()).count();
  s.elapsed_ms = static_cast<double>(e.duration.count()) / 1e6;
  s.detail = e.detail;
  return s;
}

StageFailed stage_failed(const StageFailure& f) {
  StageFailed s;
  s.stage = f.stage;
  s.rank = f.rank;
  s.category = std::string(name_of(f.category));
  s.peer_rank = f.peer_rank;
  s.local = f.local_address;
  s.remote = f.remote_address;
  s.errno_text = f.errno_text;
  s.elapsed_ms = f.elapsed.count();
  s.timeout_ms = f.timeout.count();
  s.joined = f.joined;
  s.world_size = f.world_size;
  s.missing = f.missing;
  s.summary = f.summary;
  s.hint = f.hint;
  s.conntrack = f.conntrack;
  return s;
}

StageFailure stage_failure(const StageFailed& s) {
  StageFailure f;
  f.stage = s.stage;
  f.rank = s.rank;
  f.peer_rank = s.peer_rank;
  f.local_address = s.local;
  f.remote_address = s.remote;
  f.errno_text = s.errno_text;
  f.elapsed = std::chrono::milliseconds(s.elapsed_ms);
  f.timeout = std::chrono::milliseconds(s.timeout_ms);
  f.joined = s.joined;
  f.world_size = s.world_size;
  f.missing = s.missing;
  f.summary = s.summary;
  f.hint = s.hint;
  f.conntrack = s.conntrack;
  return f;
}

std::vector<std::string> read_together(const std::vector<StageFailed>& failures) {
  std::vector<StageFailure> engine_side;
  engine_side.reserve(failures.size());
  for (const auto& f : failures)
    engine_side.push_back(stage_failure(f));
  return ringmaster::read_together(engine_side);
}

Result result(const PerfSpec& spec, const PerfRow& row) {
  auto timing_of = [](const PerfResult& r) { return Result::Timing{r.time_us, r.algbw, r.busbw, r.wrong}; };
  Result r;
  r.collective = std::string(name_of(spec.collective));
  r.bytes = row.bytes;
  r.count = row.count;
  r.dtype = std::string(name_of(spec.type));
  r.redop = std::string(name_of(spec.op));
  r.root = spec.root;
  r.out_of_place = timing_of(row.out_of_place);
  if (row.has_in_place) r.in_place = timing_of(row.in_place);
  return r;
}

Decision decision(const CollectiveRecord& r) {
  return {std::string(name_of(r.collective)), r.bytes,     std::string(name_of(r.algorithm)),
          std::string(name_of(r.protocol)),   r.nchannels, std::chrono::duration<double, std::micro>(r.time).count()};
}

TunerTable tuner_table(const tune::Decision& d) {
  TunerTable t;
  t.collective = std::string(name_of(d.collective));
  t.bytes = d.bytes;
  t.nranks = d.nranks;
  t.chosen = d.chosen;
  for (const auto& c : d.candidates) {
    t.candidates.push_back({std::string(tune::algorithm_name(c)), std::string(name_of(c.protocol)), c.channels,
                            c.predicted_us, c.latency_us, c.bandwidth_gbs, c.excluded});
  }
  return t;
}

Links links(const std::vector<PeerLinkCounters>& counters, const std::vector<ConnectionInfo>& connections) {
  Links out;
  for (const auto& l : counters) {
    if (l.bytes == 0 && l.ahead == 0) continue;
    Links::Link link;
    link.from = l.peer;
    link.bytes = l.bytes;
    link.active_us = l.active_ns / 1000;
    link.ahead = l.ahead;
    if (l.bytes > 0 && l.active_ns > 0) link.gbs = static_cast<double>(l.bytes) / static_cast<double>(l.active_ns);
    for (const auto& c : connections) {
      if (c.peer == l.peer) link.transport = c.transport;
    }
    out.links.push_back(std::move(link));
  }
  for (const auto& l : counters) {
    if (l.segments_sent > 0) out.sent.push_back({l.peer, l.segments_sent, l.segments_resent});
  }
  return out;
}

PerfRow perf_row(const Result& r) {
  auto result_of = [](const Result::Timing& t) {
    PerfResult p;
    p.time_us = t.time_us;
    p.algbw = t.algbw;
    p.busbw = t.busbw;
    p.wrong = static_cast<long>(t.wrong);
    return p;
  };
  PerfRow row;
  row.bytes = r.bytes;
  row.count = r.count;
  row.out_of_place = result_of(r.out_of_place);
  row.has_in_place = r.in_place.has_value();
  if (r.in_place) row.in_place = result_of(*r.in_place);
  return row;
}

}  // namespace ringmaster::agent::events

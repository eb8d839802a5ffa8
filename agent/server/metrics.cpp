// Prometheus text for the agent's /metrics.
#include "metrics.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

#include "ringmaster/version.h"

namespace ringmaster::agent {
namespace {

// `object[key]` as a T, or `fallback` when object is not an object, has no
// such key, or holds another type there.
template <class T>
T field(const nlohmann::json& object, const char* key, T fallback) {
  if (!object.is_object()) return fallback;
  const auto it = object.find(key);
  if (it == object.end()) return fallback;
  try {
    return it->get<T>();
  } catch (const nlohmann::json::exception&) {
    return fallback;
  }
}

constexpr std::size_t kRunsKept = 16;  // series of older runs are dropped

std::string label(const std::string& value) {
  std::string out;
  for (char c : value) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

// A label name from a component's: letters, digits and underscores.
std::string label_name(const std::string& name) {
  std::string out;
  for (char c : name)
    out += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return out;
}

void family(std::string& out, const char* name, const char* type, const char* help) {
  out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
}

}  // namespace

void Metrics::remember_run(const std::string& run) {
  if (std::find(runs_.begin(), runs_.end(), run) != runs_.end()) return;
  runs_.push_back(run);
  while (runs_.size() > kRunsKept) {
    const std::string old = runs_.front();
    runs_.pop_front();
    std::erase_if(channels_, [&](const auto& kv) { return std::get<0>(kv.first) == old; });
    std::erase_if(results_, [&](const auto& kv) { return kv.first.first == old; });
    std::erase_if(calls_, [&](const auto& kv) { return kv.first.first == old; });
    stalls_.erase(old);
    std::erase_if(rank_ends_, [&](const auto& kv) { return kv.first.first == old; });
  }
}

void Metrics::observe(const nlohmann::json& tagged) {
  // Events come from ranks, which may print any JSON: every field is
  // looked up, never assumed (reading a missing key through a const json
  // is undefined behaviour; the ASan build's assertions stopped the agent
  // on a rank's `result` without `out_of_place`).
  const std::string run = field(tagged, "run_id", std::string());
  const int rank = field(tagged, "rank", -1);
  const auto event = tagged.is_object() ? tagged.find("event") : tagged.end();
  if (run.empty() || event == tagged.end() || !event->is_object()) return;
  const auto& e = *event;
  const std::string type = field(e, "type", std::string());
  remember_run(run);
  if (type == "failure") {
    ++stage_failures_[field(e, "stage", std::string("?"))];
  } else if (type == "stall") {
    ++stalls_[run];
  } else if (type == "sample") {
    if (const auto calls = e.find("calls"); calls != e.end() && calls->is_object()) {
      auto& c = calls_[{run, rank}];
      c.started = field(*calls, "started", std::uint64_t{0});
      c.ended = field(*calls, "ended", std::uint64_t{0});
    }
    const auto channels = e.find("channels");
    if (channels == e.end() || !channels->is_array()) return;
    for (const auto& c : *channels) {
      if (!c.is_object()) continue;
      auto& ch = channels_[{run, rank, field(c, "channel", 0)}];
      ch.sent = field(c, "bytes_sent", std::uint64_t{0});
      ch.received = field(c, "bytes_received", std::uint64_t{0});
      ch.busy_ns = field(c, "busy_ns", std::uint64_t{0});
    }
  } else if (type == "result") {
    auto& r = results_[{run, rank}];
    r.collective = field(e, "collective", std::string());
    r.bytes = field(e, "bytes", std::uint64_t{0});
    const auto out_of_place = e.find("out_of_place");
    r.busbw = out_of_place != e.end() ? field(*out_of_place, "busbw", 0.0) : 0.0;
  } else if (type == "rank_exit" || type == "rank_failed") {
    ++rank_ends_[{run, type == "rank_exit" ? "ok" : "failed"}];
  }
}

std::string Metrics::render(double uptime_s, std::uint64_t runs_started, std::uint64_t runs_failed) const {
  std::string out;
  family(out, "ringmaster_build_info", "gauge", "Always 1; the labels say which build and libraries the agent runs.");
  out += fmt::format("ringmaster_build_info{{version=\"{}\"", RINGMASTER_VERSION_STRING);
  for (const auto& [name, version] : component_versions()) {
    if (name != "ringmaster") out += fmt::format(",{}=\"{}\"", label_name(name), label(version));
  }
  out += "} 1\n";
  family(out, "ringmaster_agent_uptime_seconds", "gauge", "Seconds since the agent started.");
  out += fmt::format("ringmaster_agent_uptime_seconds {:.3f}\n", uptime_s);
  family(out, "ringmaster_runs_started_total", "counter", "Runs started on this agent.");
  out += fmt::format("ringmaster_runs_started_total {}\n", runs_started);
  family(out, "ringmaster_runs_failed_total", "counter", "Runs in which a rank on this agent failed.");
  out += fmt::format("ringmaster_runs_failed_total {}\n", runs_failed);
  family(out, "ringmaster_stage_failures_total", "counter", "Init stage failures of ranks on this agent, by stage.");
  for (const auto& [stage, n] : stage_failures_) {
    out += fmt::format("ringmaster_stage_failures_total{{stage=\"{}\"}} {}\n", label(stage), n);
  }
  family(out, "ringmaster_rank_exits_total", "counter", "Ranks that ended, by run and outcome.");
  for (const auto& [key, n] : rank_ends_) {
    out +=
        fmt::format("ringmaster_rank_exits_total{{run=\"{}\",outcome=\"{}\"}} {}\n", label(key.first), key.second, n);
  }
  family(out, "ringmaster_channel_bytes_sent_total", "counter", "Bytes a rank's channel has sent in a run.");
  for (const auto& [key, c] : channels_) {
    out += fmt::format("ringmaster_channel_bytes_sent_total{{run=\"{}\",rank=\"{}\",channel=\"{}\"}} {}\n",
                       label(std::get<0>(key)), std::get<1>(key), std::get<2>(key), c.sent);
  }
  family(out, "ringmaster_channel_bytes_received_total", "counter", "Bytes a rank's channel has received in a run.");
  for (const auto& [key, c] : channels_) {
    out += fmt::format("ringmaster_channel_bytes_received_total{{run=\"{}\",rank=\"{}\",channel=\"{}\"}} {}\n",
                       label(std::get<0>(key)), std::get<1>(key), std::get<2>(key), c.received);
  }
  family(out, "ringmaster_channel_busy_seconds_total", "counter", "Time a rank's channel spent moving data in a run.");
  for (const auto& [key, c] : channels_) {
    out +=
        fmt::format("ringmaster_channel_busy_seconds_total{{run=\"{}\",rank=\"{}\",channel=\"{}\"}} {:.6f}\n",
                    label(std::get<0>(key)), std::get<1>(key), std::get<2>(key), static_cast<double>(c.busy_ns) / 1e9);
  }
  family(out, "ringmaster_rank_collectives_started_total", "counter",
         "Collectives a rank has submitted in a run (its flight recorder's count).");
  for (const auto& [key, c] : calls_) {
    out += fmt::format("ringmaster_rank_collectives_started_total{{run=\"{}\",rank=\"{}\"}} {}\n", label(key.first),
                       key.second, c.started);
  }
  family(out, "ringmaster_rank_collectives_ended_total", "counter",
         "Collectives of a rank that have ended (done or failed) in a run; started minus ended are in flight.");
  for (const auto& [key, c] : calls_) {
    out += fmt::format("ringmaster_rank_collectives_ended_total{{run=\"{}\",rank=\"{}\"}} {}\n", label(key.first),
                       key.second, c.ended);
  }
  family(out, "ringmaster_stalls_total", "counter",
         "Stall reports (a collective without progress for RINGMASTER_STALL_S) made by ranks on this agent, by run.");
  for (const auto& [run, n] : stalls_) {
    out += fmt::format("ringmaster_stalls_total{{run=\"{}\"}} {}\n", label(run), n);
  }
  family(out, "ringmaster_bus_bandwidth_bytes_per_second", "gauge",
         "Bus bandwidth of a rank's latest result row (out of place), as nccl-tests' busbw.");
  for (const auto& [key, r] : results_) {
    out += fmt::format(
        "ringmaster_bus_bandwidth_bytes_per_second{{run=\"{}\",rank=\"{}\",collective=\"{}\",bytes=\"{}\"}} {:.0f}\n",
        label(key.first), key.second, label(r.collective), r.bytes, r.busbw * 1e9);
  }
  return out;
}

}  // namespace ringmaster::agent

// Prometheus text for the agent's /metrics.
#include "metrics.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <type_traits>
#include <variant>

#include "ringmaster/version.h"

namespace ringmaster::agent {
namespace {

constexpr std::size_t kRunsKept = 16;  // series of older runs are dropped
// A rank's samples name their channels; a rank that names a million (its
// output is its own) must not make a million series. NCCL has at most 64
// channels; past this or the total a channel's series is not kept, and
// ringmaster_metric_series_dropped_total counts it.
constexpr int kChannelsPerRank = 256;
constexpr std::size_t kChannelSeries = 1u << 16;

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

void Metrics::observe(const events::EventMessage& m) {
  if (m.run_id.empty()) return;
  const std::string& run = m.run_id;
  remember_run(run);
  std::visit(
      [&](const auto& e) {
        using E = std::decay_t<decltype(e)>;
        if constexpr (std::is_same_v<E, events::StageFailed>) {
          ++stage_failures_[std::string(name_of(e.stage))];
        } else if constexpr (std::is_same_v<E, events::Stall>) {
          ++stalls_[run];
        } else if constexpr (std::is_same_v<E, events::Sample>) {
          calls_[{run, m.rank}] = {e.calls_started, e.calls_ended};
          for (const auto& c : e.channels) {
            const std::tuple<std::string, int, int> key{run, m.rank, c.channel};
            auto it = channels_.find(key);
            if (it == channels_.end()) {
              if (c.channel < 0 || c.channel >= kChannelsPerRank || channels_.size() >= kChannelSeries) {
                ++series_dropped_;
                continue;
              }
              it = channels_.emplace(key, Channel{}).first;
            }
            it->second = {c.bytes_sent, c.bytes_received, c.busy_ns};
          }
        } else if constexpr (std::is_same_v<E, events::Result>) {
          results_[{run, m.rank}] = {e.collective, e.bytes, e.out_of_place.busbw};
        } else if constexpr (std::is_same_v<E, events::RankExit>) {
          ++rank_ends_[{run, "ok"}];
        } else if constexpr (std::is_same_v<E, events::RankFailed>) {
          ++rank_ends_[{run, "failed"}];
        }
      },
      m.event);
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
  family(out, "ringmaster_metric_series_dropped_total", "counter",
         "Channel samples not kept: a channel number out of range, or the series cap reached.");
  out += fmt::format("ringmaster_metric_series_dropped_total {}\n", series_dropped_);
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

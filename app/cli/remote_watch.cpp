// `ringmaster-cli remote watch`: a job this tool did not start, watched
// through the agents of its nodes. Each agent that has processes of the
// job starts a watcher as the job's user (an agent without any says so
// and is left out); their events come back as one stream, each line
// prefixed with the agent it came from.
#include "remote_watch.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <type_traits>
#include <variant>

#include "commands.h"
#include "ringmaster/agent/events.h"
#include "ringmaster/agent/requests.h"
#include "ringmaster/status.h"
#include "ringmaster/tools/job_watch.h"

namespace ringmaster::cli {
namespace {

using nlohmann::json;

// One watched event as a line for a person; empty for what is not shown.
std::string text_of(const agent::events::EventMessage& m) {
  namespace ev = agent::events;
  return std::visit(
      [](const auto& e) -> std::string {
        using E = std::decay_t<decltype(e)>;
        if constexpr (std::is_same_v<E, ev::JobRank>) {
          return e.error.empty() ? describe(ev::watched_rank(e)) : fmt::format("pid {}: {}", e.pid, e.error);
        } else if constexpr (std::is_same_v<E, ev::JobWavefront>) {
          std::string text;
          for (const auto& line : e.wavefront)
            text += (text.empty() ? "wavefront: " : "\nwavefront: ") + line;
          return text;
        } else if constexpr (std::is_same_v<E, ev::JobRas>) {
          return ev::describe(e);
        } else if constexpr (std::is_same_v<E, ev::JobNcclLog>) {
          return fmt::format("rank {} (pid {}) {}", e.rank, e.pid, e.summary);
        } else if constexpr (std::is_same_v<E, ev::RankFailed>) {
          return fmt::format("{}{}", e.summary, e.stderr_tail.empty() ? "" : ": " + e.stderr_tail);
        } else if constexpr (std::is_same_v<E, ev::RankOutput>) {
          return e.text;
        } else {
          return {};
        }
      },
      m.event);
}

}  // namespace

void add_remote_watch_options(CLI::App& watch, RemoteWatchOptions& o) {
  watch.add_option("--pid", o.request.pids, "A rank's process on its agent's node (repeat for more)");
  watch.add_option("--run-id", o.request.job_run_id, "Every process with this TORCHELASTIC_RUN_ID");
  watch.add_option("--master-port", o.request.master_port, "Every process with this MASTER_PORT");
  watch.add_option("--for", o.request.duration_s, "Seconds to watch (at most a day)")
      ->check(CLI::Range(0.0, 86400.0))
      ->capture_default_str();
  watch.add_option("--interval", o.request.interval_s, "Seconds between looks on each node")
      ->check(CLI::Range(0.05, 60.0))
      ->capture_default_str();
  watch.add_flag("--flight-recorder", o.request.flight_recorder,
                 "Read the ranks' PyTorch Flight Recorder through torch's debug server and name the ranks behind");
  watch.add_flag("--nccl-log", o.request.nccl_log, "Read each rank's NCCL_DEBUG_FILE");
  watch.add_flag("--nccl-ras", o.request.nccl_ras, "Ask NCCL's RAS port on each node for the job's status");
  watch.add_flag("--json", o.json, "Each relayed event message as a JSON line");
}

int remote_watch(const AgentSet& set, RemoteWatchOptions o) {
  if (o.request.pids.empty() && o.request.job_run_id.empty() && o.request.master_port == 0) {
    std::fprintf(stderr, "ringmaster-cli remote watch: name the job: --pid, --run-id or --master-port\n");
    return exit_code::usage;
  }
  o.request.watch_id =
      fmt::format("watch-{}-{}", ::getpid(), std::chrono::system_clock::now().time_since_epoch().count() % 1000000);
  auto inbox = std::make_shared<Inbox>();
  std::vector<std::unique_ptr<agent::AgentClient>> watching;
  const std::string token = token_of(set);
  for (const auto& endpoint : endpoints_of(set, "remote watch")) {
    const std::string address = endpoint.host + ":" + std::to_string(endpoint.port);
    auto client = agent::AgentClient::connect(
        client_options(set, endpoint, token), [inbox, address](const json& m) { inbox->push(m); },
        [inbox, address](const std::string& why) {
          inbox->push(json{{"type", "closed"}, {"agent", address}, {"message", why}});
        });
    client->call({{"type", "subscribe"}});
    json message = {{"type", "watch"}, {"watch", o.request.to_json()}};
    try {
      const json reply = client->call(message);
      std::printf("# %s: watching processes %s as %s (watcher pid %d)\n", address.c_str(),
                  reply.value("processes", json::array()).dump().c_str(), reply.value("user", "?").c_str(),
                  reply.value("pid", 0));
      watching.push_back(std::move(client));
    } catch (const Error& e) {
      std::printf("# %s: %s\n", address.c_str(), e.status().message().c_str());
    }
  }
  std::fflush(stdout);
  if (watching.empty()) {
    std::fprintf(stderr, "ringmaster-cli remote watch: no agent found a process of the job\n");
    return exit_code::failed;
  }
  // The watchers end by themselves after --for; a little longer here for
  // their last lines.
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::milliseconds(static_cast<long long>(o.request.duration_s * 1000) + 5000);
  std::size_t done = 0;
  int code = exit_code::ok;
  while (done < watching.size()) {
    auto m = inbox->pop(deadline);
    if (!m) break;
    const std::string type = m->value("type", "");
    if (type == "closed") {
      std::fprintf(stderr, "ringmaster-cli remote watch: agent %s: %s\n", m->value("agent", "?").c_str(),
                   m->value("message", "").c_str());
      code = exit_code::remote_failed;
      ++done;
      continue;
    }
    if (type != "event" || m->value("run_id", "") != o.request.watch_id) continue;
    std::optional<agent::events::EventMessage> message;
    try {
      message = agent::events::parse_event_message(*m);
    } catch (const Error& e) {
      std::fprintf(stderr, "# skipped an event: %s\n", e.status().message().c_str());
      continue;
    }
    if (std::holds_alternative<agent::events::RunDone>(message->event)) ++done;
    if (std::holds_alternative<agent::events::RankFailed>(message->event)) code = exit_code::failed;
    const std::string line = o.json ? m->dump() : text_of(*message);
    if (!line.empty()) std::printf("%s\n", line.c_str());
    std::fflush(stdout);
  }
  for (auto& client : watching) {
    if (client->connected()) client->request({{"type", "watch_stop"}, {"watch_id", o.request.watch_id}});
  }
  return code;
}

}  // namespace ringmaster::cli

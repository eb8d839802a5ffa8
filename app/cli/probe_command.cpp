// `ringmaster-cli probe`: walk the init stages as one rank (torchrun's
// environment or flags) or as N local ranks, and print the stage table.
// `ringmaster-cli env`: every tunable with its default and current value.
#include <fmt/format.h>
#include <sys/resource.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include "commands.h"
#include "ringmaster/agent/telemetry.h"
#include "ringmaster/tools/bootstrap.h"
#include "ringmaster/tools/params.h"

namespace ringmaster::cli {
namespace {

using agent::to_json;

struct ProbeOptions {
  int np = 0;
  int first_rank = 0;
  std::optional<int> rank, world_size;
  std::optional<std::string> master_addr;
  std::optional<int> master_port;
  std::optional<double> store_timeout, bootstrap_timeout;
  bool json = false;
};

void print_table(std::vector<StageEvent> events) {
  std::stable_sort(events.begin(), events.end(),
                   [](const auto& a, const auto& b) { return a.rank != b.rank ? a.rank < b.rank : a.stage < b.stage; });
  std::printf("%5s  %-17s %-6s %10s  %s\n", "rank", "stage", "status", "ms", "detail");
  for (const auto& e : events) {
    std::string detail = e.detail;
    if (detail.size() > 160) detail = detail.substr(0, 157) + "...";
    std::printf("%5d  %-17s %-6s %10.3f  %s\n", e.rank, std::string(name_of(e.stage)).c_str(), e.ok ? "ok" : "FAILED",
                e.duration.count() / 1e6, detail.c_str());
  }
}

}  // namespace

void print_live_line(const StageEvent& e) {
  if (e.duration >= std::chrono::seconds(1)) std::fprintf(stderr, "rank %d: %s\n", e.rank, e.detail.c_str());
}

namespace {

// Ranks run in one process share its descriptors: each holds its store
// connection, its bootstrap listener and its ring and tree connections,
// and the other end of each (the store's, the peer rank's) is in the same
// process: 7 to 8 a rank at once while they connect (5.4 a rank left
// when sampled at 1,024 ranks; 64 ranks failed under 448). Too few make
// ranks fail one by one after their timeouts, some with "Too many open
// files" and the rest blaming the store; so the soft limit is raised to
// what they need, and a hard limit below it is refused before any rank
// starts. Empty when the ranks fit.
std::string descriptors_short(int ranks) {
  const rlim_t needed = 8 * static_cast<rlim_t>(ranks) + 64;
  rlimit files{};
  if (::getrlimit(RLIMIT_NOFILE, &files) != 0 || files.rlim_cur >= needed) return {};
  if (files.rlim_max == RLIM_INFINITY || files.rlim_max >= needed) {
    files.rlim_cur = needed;
    if (::setrlimit(RLIMIT_NOFILE, &files) == 0) return {};
  }
  return fmt::format(
      "{} ranks in one process need about {} file descriptors (8 a rank: its store connection, listener, ring and "
      "tree connections, and the other end of each in this process); this process may open {} (ulimit -n; hard limit "
      "{}). Raise "
      "the hard limit (ulimit -Hn, LimitNOFILE= in a unit, --ulimit nofile= for a container) or run the ranks in "
      "several processes (--first-rank with --world-size)",
      ranks, needed, files.rlim_cur, files.rlim_max);
}

}  // namespace

Runner add_probe_command(CLI::App& app) {
  auto* probe = app.add_subcommand("probe", "Walk the rendezvous stages and print where a job would break");
  auto opts = std::make_shared<ProbeOptions>();
  probe->add_option("--np", opts->np, "Run N local ranks in this process (rank 0 hosts the store)");
  probe->add_option("--first-rank", opts->first_rank,
                    "With --np and --world-size: run ranks FIRST .. FIRST+N-1 of a larger job (several processes "
                    "share one, each under its own descriptor limit)");
  probe->add_option("--rank", opts->rank, "RANK (default: environment)");
  probe->add_option("--world-size", opts->world_size, "WORLD_SIZE (default: environment)");
  probe->add_option("--master-addr", opts->master_addr, "MASTER_ADDR (default: environment, else 127.0.0.1)");
  probe->add_option("--master-port", opts->master_port, "MASTER_PORT (default: environment, else 29500)");
  probe->add_option("--store-timeout", opts->store_timeout, "Seconds (RINGMASTER_STORE_TIMEOUT)");
  probe->add_option("--bootstrap-timeout", opts->bootstrap_timeout, "Seconds (RINGMASTER_BOOTSTRAP_TIMEOUT)");
  probe->add_flag("--json", opts->json, "One JSON object per line: stage events, then failures");

  return [=]() -> int {
    Config base = Config::from_env();
    if (opts->world_size) base.world_size = *opts->world_size;
    if (opts->rank) base.rank = *opts->rank;
    if (opts->master_addr) base.master_addr = *opts->master_addr;
    if (opts->master_port) base.master_port = static_cast<std::uint16_t>(*opts->master_port);
    if (opts->store_timeout)
      base.store_timeout = std::chrono::milliseconds(static_cast<long long>(*opts->store_timeout * 1000));
    if (opts->bootstrap_timeout) {
      base.bootstrap_timeout = std::chrono::milliseconds(static_cast<long long>(*opts->bootstrap_timeout * 1000));
    }
    std::vector<Config> ranks;
    if (opts->np > 0) {
      if (!opts->world_size) base.world_size = opts->np;
      if (opts->first_rank < 0 || static_cast<long long>(opts->first_rank) + opts->np > base.world_size) {
        std::fprintf(stderr, "error: --first-rank %d with --np %d runs ranks past --world-size %d\n", opts->first_rank,
                     opts->np, base.world_size);
        return exit_code::usage;
      }
      for (int r = 0; r < opts->np; ++r) {
        Config c = base;
        c.rank = opts->first_rank + r;
        ranks.push_back(c);
      }
    } else {
      ranks.push_back(base);
    }
    for (const auto& c : ranks)
      c.validate();
    if (const std::string short_by = descriptors_short(static_cast<int>(ranks.size())); !short_by.empty()) {
      std::fprintf(stderr, "error: %s\n", short_by.c_str());
      return exit_code::usage;
    }

    std::mutex mutex;
    std::vector<StageEvent> events;
    std::vector<StageFailure> failures;
    auto on_event = [&](const StageEvent& e) {
      std::lock_guard lock(mutex);
      if (opts->json) {
        std::printf("%s\n", to_json(e).dump().c_str());
        std::fflush(stdout);
      } else if (e.in_progress) {
        print_live_line(e);  // on stderr: the table stays clean
      }
      if (!e.in_progress) events.push_back(e);
    };
    const auto start = std::chrono::steady_clock::now();
    std::vector<std::thread> threads;
    std::vector<std::unique_ptr<Bootstrap>> done(ranks.size());
    for (std::size_t i = 0; i < ranks.size(); ++i) {
      threads.emplace_back([&, i] {
        try {
          done[i] = Bootstrap::run(ranks[i], on_event);
        } catch (const StageError& e) {
          std::lock_guard lock(mutex);
          failures.push_back(e.failure());
        }
      });
    }
    for (auto& t : threads)
      t.join();
    const double wall_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    // The process's peak resident memory: what its ranks held at most.
    rusage usage{};
    ::getrusage(RUSAGE_SELF, &usage);
    const long max_rss_kib = usage.ru_maxrss;
    if (opts->json) {
      for (const auto& f : failures)
        std::printf("%s\n", to_json(f).dump().c_str());
      std::printf("%s\n", nlohmann::json{{"type", "summary"},
                                         {"ranks", ranks.size()},
                                         {"failed", failures.size()},
                                         {"wall_ms", wall_ms},
                                         {"max_rss_kib", max_rss_kib}}
                              .dump()
                              .c_str());
    } else {
      print_table(events);
      std::sort(failures.begin(), failures.end(), [](const auto& a, const auto& b) { return a.rank < b.rank; });
      for (const auto& f : failures)
        std::printf("\n%s\n", f.to_string().c_str());
      for (const auto& t : read_together(failures))
        std::printf("\nRead together: %s\n", t.c_str());
      std::printf("\n%zu rank(s), %zu failed, %.1f ms, %.1f MB resident at most\n", ranks.size(), failures.size(),
                  wall_ms, max_rss_kib / 1024.0);
    }
    return failures.empty() ? exit_code::ok : exit_code::init_failed;
  };
}

Runner add_env_command(CLI::App& app) {
  auto* env = app.add_subcommand(
      "env", "Every variable Ringmaster reads, with its default, value and source; NCCL_* ones it ignores");
  auto json_out = std::make_shared<bool>(false);
  env->add_flag("--json", *json_out, "One JSON object on stdout instead of the tables");
  return [json_out]() -> int {
    auto variables = list_params();
    for (auto& v : list_other_variables())
      variables.push_back(std::move(v));
    // What this process would be, from the variables above.
    std::string placement;
    try {
      placement = Config::from_env().describe();
    } catch (const Error& e) {
      placement = std::string("error: ") + e.what();
    }
    const auto ignored = ignored_nccl_variables();
    if (*json_out) {
      nlohmann::json out = {
          {"variables", nlohmann::json::array()}, {"ignored", nlohmann::json::array()}, {"placement", placement}};
      for (const auto& v : variables) {
        out["variables"].push_back({{"name", v.name},
                                    {"group", v.group},
                                    {"default", v.default_value},
                                    {"value", v.value ? nlohmann::json(*v.value) : nlohmann::json()},
                                    {"source", v.value ? "environment" : "default"},
                                    {"help", v.help}});
      }
      for (const auto& i : ignored)
        out["ignored"].push_back({{"name", i.name}, {"value", i.value}, {"why", i.why}});
      std::printf("%s\n", out.dump(2).c_str());
      return exit_code::ok;
    }
    std::string group;
    for (const auto& v : variables) {
      if (v.group != group) {
        group = v.group;
        std::printf("%s# %s\n", group == "tunable" ? "" : "\n", group.c_str());
      }
      std::printf("%-34s %-14s %s\n    %s\n", v.name.c_str(), v.value ? v.value->c_str() : "(unset)",
                  v.value ? "from the environment"
                          : ("default " + (v.default_value.empty() ? std::string("none") : v.default_value)).c_str(),
                  v.help.c_str());
    }
    std::printf("\n# this process: %s\n", placement.c_str());
    if (!ignored.empty()) {
      std::printf("\n# NCCL variables set here that Ringmaster does not read\n");
      for (const auto& i : ignored)
        std::printf("%s=%s\n    %s\n", i.name.c_str(), i.value.c_str(), i.why.c_str());
    }
    return exit_code::ok;
  };
}

}  // namespace ringmaster::cli

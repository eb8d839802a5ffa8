// `ringmaster-cli watch`: a job this tool did not launch (a torchrun job,
// an mpirun job), its ranks found by PID, TORCHELASTIC_RUN_ID or
// MASTER_PORT, and where each rank's rendezvous stands by its sockets
// (ringmaster/tools/job_watch.h). Nothing is sent to the job's processes.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>
#include <deque>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <thread>

#include "commands.h"
#include "ringmaster/agent/events.h"
#include "ringmaster/tools/flight_recorder.h"
#include "ringmaster/tools/job_watch.h"
#include "ringmaster/tools/nccl_log.h"
#include "ringmaster/tools/nccl_ras.h"

namespace ringmaster::cli {
namespace {

struct WatchOptions {
  JobSelector selector;
  double for_s = 0;
  double interval_s = 0.5;
  bool json = false;
  bool flight_recorder = false;
  bool nccl_log = false;
  bool nccl_ras = false;
};

// The looks of one watch: what each look finds, printed when it changed
// since the last (as events with --json, with the time they were seen).
class Watcher {
 public:
  explicit Watcher(const WatchOptions& o) : o_(o) {}

  // One look at every rank; whether any rank could be read.
  bool look() {
    std::vector<WatchedRank> ranks;
    std::map<int, std::uint64_t> failed_recently;
    for (int pid : job_processes(o_.selector)) {
      std::string error;
      if (auto rank = watch_process(pid, &error)) {
        if (const auto failed = failed_connects(pid)) failed_recently[pid] = count_failures(pid, *failed);
        ranks.push_back(std::move(*rank));
      } else {
        agent::events::JobRank unread;
        unread.pid = pid;
        unread.error = error;
        show(pid, o_.json ? agent::events::to_json(unread).dump() : "pid " + std::to_string(pid) + ": " + error);
      }
    }
    read_resets(ranks, failed_recently);
    for (const auto& rank : ranks) {
      show(rank.pid, o_.json ? agent::events::to_json(agent::events::job_rank(rank)).dump() : describe(rank));
      if (o_.nccl_log && !rank.nccl_debug_file.empty()) nccl_log(rank);
    }
    if (o_.flight_recorder && !ranks.empty()) wavefront(ranks.front());
    if (o_.nccl_ras) ras(ranks);
    return !ranks.empty();
  }

 private:
  // Connect failures counted in the process's namespace over the last
  // kResetWindow (torch retries a refused connect every second or more, so
  // a single look's difference would flicker), from the running total.
  static constexpr auto kResetWindow = std::chrono::seconds(5);
  std::uint64_t count_failures(int pid, std::uint64_t total) {
    auto& seen = failures_[pid];
    const auto now = std::chrono::steady_clock::now();
    if (seen.total && total > *seen.total) seen.changes.push_back({now, total - *seen.total});
    seen.total = total;
    while (!seen.changes.empty() && now - seen.changes.front().first > kResetWindow)
      seen.changes.pop_front();
    std::uint64_t recent = 0;
    for (const auto& [_, n] : seen.changes)
      recent += n;
    return recent;
  }
  void print(std::string line) const {
    if (o_.json) {  // when it was seen, for a change's timing
      auto with_time = nlohmann::json::parse(line);
      with_time["seen_at"] = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
      line = with_time.dump();
    }
    std::printf("%s\n", line.c_str());
    std::fflush(stdout);
  }
  void show(int pid, const std::string& line) {
    if (last_[pid] == line) return;
    last_[pid] = line;
    print(line);
  }
  void nccl_log(const WatchedRank& rank) {
    std::ifstream in(rank.nccl_debug_file);
    std::stringstream text;
    text << in.rdbuf();
    const auto decisions = read_nccl_log(text.str());
    std::string nccl = !in ? fmt::format("cannot read {}", rank.nccl_debug_file) : summarize(decisions);
    nccl = o_.json ? agent::events::to_json(agent::events::JobNcclLog{rank.pid, rank.rank, rank.nccl_debug_file, nccl,
                                                                      nlohmann::json::parse(to_json(decisions))})
                         .dump()
                   : fmt::format("rank {} (pid {}) {}", rank.rank, rank.pid, nccl);
    if (last_nccl_[rank.pid] == nccl) return;
    last_nccl_[rank.pid] = nccl;
    print(nccl);
  }
  void wavefront(const WatchedRank& any) {
    if (any.master_port <= 0 || any.world_size <= 0) return;
    const auto records = fetch_flight_records(any.master_addr.empty() ? "127.0.0.1" : any.master_addr, any.master_port,
                                              any.world_size, std::chrono::seconds(5));
    auto now = read_wavefront(records);
    if (now == wavefront_) return;
    wavefront_ = std::move(now);
    if (o_.json) {
      print(agent::events::to_json(agent::events::JobWavefront{wavefront_}).dump());
      return;
    }
    for (const auto& line : wavefront_)
      print("wavefront: " + line);
  }

  // NCCL's RAS port of each address the ranks name (NCCL_RAS_ADDR; NCCL's
  // default localhost:28028), once a look.
  void ras(const std::vector<WatchedRank>& ranks) {
    std::set<std::string> addresses;
    for (const auto& r : ranks)
      addresses.insert(r.nccl_ras_addr);
    for (const auto& address : addresses) {
      const auto [host, port] = ras_address(address);
      const RasStatus status = query_ras(host, port, std::chrono::seconds(10));
      agent::events::JobRas e{fmt::format("{}:{}", host, port), status.format,
                              status.error.empty() ? read_ras(status) : std::vector<std::string>{}, status.error};
      const std::string line = o_.json ? agent::events::to_json(e).dump() : agent::events::describe(e);
      if (last_ras_[e.address] == line) continue;
      last_ras_[e.address] = line;
      print(line);
    }
  }

  const WatchOptions& o_;
  std::map<std::string, std::string> last_ras_;  // RAS address -> what was printed
  std::map<int, std::string> last_;              // pid -> what was printed
  std::map<int, std::string> last_nccl_;         // pid -> NCCL log summary printed
  std::vector<std::string> wavefront_;           // the wavefront printed last
  struct Failures {
    std::optional<std::uint64_t> total;  // its namespace's failed connects at the last look
    std::deque<std::pair<std::chrono::steady_clock::time_point, std::uint64_t>> changes;
  };
  std::map<int, Failures> failures_;  // by pid
};

}  // namespace

Runner add_watch_command(CLI::App& app) {
  auto o = std::make_shared<WatchOptions>();
  auto* cmd = app.add_subcommand(
      "watch", "Where the ranks of a job this tool did not start stand in their rendezvous (read from /proc)");
  cmd->add_option("--pid", o->selector.pids, "A rank's process (repeat for more)");
  cmd->add_option("--run-id", o->selector.run_id, "Every rank with this TORCHELASTIC_RUN_ID (torchrun's --rdzv-id)");
  cmd->add_option("--master-port", o->selector.master_port, "Every rank with this MASTER_PORT");
  cmd->add_option("--for", o->for_s, "Keep watching for this many seconds, a line each time a rank's state changes")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--interval", o->interval_s, "Seconds between looks")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_flag("--json", o->json, "One event a line (job_rank, job_wavefront, job_nccl; docs/protocol.md)");
  cmd->add_flag("--nccl-log", o->nccl_log,
                "Read each rank's NCCL_DEBUG_FILE (NCCL_DEBUG=INFO): channels, rings, trees, transports, picks, WARN "
                "lines");
  cmd->add_flag(
      "--nccl-ras", o->nccl_ras,
      "Ask NCCL's RAS port (each rank's NCCL_RAS_ADDR, localhost:28028 by default) for the job's status: dead, "
      "missing and lagging ranks");
  cmd->add_flag("--flight-recorder", o->flight_recorder,
                "Read the ranks' PyTorch Flight Recorder through torch's debug server and name the ranks behind");
  return [o] {
    if (o->selector.pids.empty() && o->selector.run_id.empty() && o->selector.master_port == 0) {
      std::fprintf(stderr, "ringmaster-cli watch: name the job: --pid, --run-id or --master-port\n");
      return exit_code::usage;
    }
    const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(o->for_s);
    Watcher watcher(*o);
    bool found = false;
    for (;;) {
      found |= watcher.look();
      if (std::chrono::steady_clock::now() >= until) break;
      std::this_thread::sleep_for(std::chrono::duration<double>(o->interval_s));
    }
    if (!found) {
      std::fprintf(stderr,
                   "ringmaster-cli watch: no rank found (a process with RANK in its environment%s); a process of "
                   "another user needs root or CAP_SYS_PTRACE\n",
                   o->selector.pids.empty() ? " matching --run-id/--master-port" : " among --pid");
      return exit_code::failed;
    }
    return exit_code::ok;
  };
}

}  // namespace ringmaster::cli

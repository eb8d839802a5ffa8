// `ringmaster-cli watch`: a job this tool did not launch (a torchrun job,
// an mpirun job), its ranks found by PID, TORCHELASTIC_RUN_ID or
// MASTER_PORT, and where each rank's rendezvous stands by its sockets
// (ringmaster/tools/job_watch.h). Nothing is sent to the job's processes.
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <thread>

#include "commands.h"
#include "ringmaster/tools/flight_recorder.h"
#include "ringmaster/tools/job_watch.h"
#include "ringmaster/tools/nccl_log.h"

namespace ringmaster::cli {
namespace {

nlohmann::json to_json(const WatchedRank& r) {
  return {{"pid", r.pid},
          {"rank", r.rank},
          {"world_size", r.world_size},
          {"stage", name_of(r.stage)},
          {"outcome", r.outcome},
          {"remote", r.remote},
          {"syn_retransmits", r.syn_retransmits},
          {"store_clients", r.store_clients},
          {"master_addr", r.master_addr},
          {"master_port", r.master_port},
          {"run_id", r.run_id},
          {"detail", r.detail},
          {"hint", r.hint},
          {"command", r.command}};
}

}  // namespace

Runner add_watch_command(CLI::App& app) {
  struct Options {
    JobSelector selector;
    double for_s = 0;
    double interval_s = 0.5;
    bool json = false;
    bool flight_recorder = false;
    bool nccl_log = false;
  };
  auto o = std::make_shared<Options>();
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
  cmd->add_flag("--json", o->json, "One JSON object a line");
  cmd->add_flag("--nccl-log", o->nccl_log,
                "Read each rank's NCCL_DEBUG_FILE (NCCL_DEBUG=INFO): channels, rings, trees, transports, picks, WARN "
                "lines");
  cmd->add_flag("--flight-recorder", o->flight_recorder,
                "Read the ranks' PyTorch Flight Recorder through torch's debug server and name the ranks behind");
  return [o] {
    if (o->selector.pids.empty() && o->selector.run_id.empty() && o->selector.master_port == 0) {
      std::fprintf(stderr, "ringmaster-cli watch: name the job: --pid, --run-id or --master-port\n");
      return exit_code::usage;
    }
    const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(o->for_s);
    std::map<int, std::string> last;       // pid -> what was printed
    std::set<std::string> said;            // wavefront lines printed
    std::map<int, std::string> last_nccl;  // pid -> NCCL log summary printed
    bool found = false;
    auto print = [&](std::string line, bool as_json) {
      if (as_json) {  // when it was seen, for a change's timing
        auto with_time = nlohmann::json::parse(line);
        with_time["seen_at"] =
            std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
        line = with_time.dump();
      }
      std::printf("%s\n", line.c_str());
      std::fflush(stdout);
    };
    for (;;) {
      std::optional<WatchedRank> any;
      for (int pid : job_processes(o->selector)) {
        std::string error;
        const auto rank = watch_process(pid, &error);
        std::string line;
        if (rank) {
          found = true;
          if (!any) any = rank;
          line = o->json ? to_json(*rank).dump() : describe(*rank);
        } else {
          line = o->json ? nlohmann::json{{"pid", pid}, {"error", error}}.dump()
                         : "pid " + std::to_string(pid) + ": " + error;
        }
        if (last[pid] != line) {
          last[pid] = line;
          print(line, o->json);
        }
        if (o->nccl_log && rank && !rank->nccl_debug_file.empty()) {
          std::ifstream in(rank->nccl_debug_file);
          std::stringstream text;
          text << in.rdbuf();
          const auto decisions = read_nccl_log(text.str());
          std::string nccl = !in ? fmt::format("cannot read {}", rank->nccl_debug_file) : summarize(decisions);
          nccl = o->json ? nlohmann::json{{"pid", pid},
                                          {"rank", rank->rank},
                                          {"nccl_log", rank->nccl_debug_file},
                                          {"nccl", nlohmann::json::parse(to_json(decisions))},
                                          {"summary", nccl}}
                               .dump()
                         : fmt::format("rank {} (pid {}) {}", rank->rank, pid, nccl);
          if (last_nccl[pid] != nccl) {
            last_nccl[pid] = nccl;
            print(nccl, o->json);
          }
        }
      }
      if (o->flight_recorder && any && any->master_port > 0 && any->world_size > 0) {
        const auto records = fetch_flight_records(any->master_addr.empty() ? "127.0.0.1" : any->master_addr,
                                                  any->master_port, any->world_size, std::chrono::seconds(5));
        for (const auto& line : read_wavefront(records)) {
          if (!said.insert(line).second) continue;
          print(o->json ? nlohmann::json{{"wavefront", line}}.dump() : "wavefront: " + line, o->json);
        }
      }
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

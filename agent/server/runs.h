// The ranks of runs, as child processes of ringmaster-cli perf with
// torchrun's environment; their JSON lines become events for clients.
#pragma once

#include <boost/asio/io_context.hpp>
#include <nlohmann/json.hpp>

#include <functional>
#include <map>
#include <memory>
#include <string>

#include "faults.h"
#include "memory_cgroup.h"
#include "ringmaster/agent/events.h"
#include "ringmaster/agent/requests.h"
#include "ringmaster/agent/server.h"
#include "run_cgroup.h"
#include "spawn.h"

namespace ringmaster::agent {

class RunManager {
 public:
  // `emit` receives every event with its run and rank; a rank's line that
  // is not a valid event arrives as output.
  // `faults` (may be null) learns when runs start and end, and gives the
  // connect filter of faults that fell back to it.
  RunManager(boost::asio::io_context& io, const AgentOptions& options, std::function<void(events::EventMessage)> emit,
             FaultManager* faults);
  ~RunManager();

  // Starts this agent's ranks of a run (a checked `run` message), as one
  // process group, in the run's directory's environment (run_env.h).
  // Returns the reply's fields: run_id, ranks with their pids, master_port
  // (chosen here when the message says 0). Throws Error(config) when the
  // run id is in use or not a plain name, a rank is named twice, the caps
  // on runs or ranks would be passed, the environment names a variable
  // not allowed, master_port 0 without rank 0 here, or a child cannot
  // start (those started are killed and reaped first).
  nlohmann::json start(const nlohmann::json& run);
  // Starts a watcher of a job this agent did not start (a checked `watch`
  // message, requests.h's WatchRequest): `ringmaster-cli watch --json`, as
  // the user the job's processes run as (found here with the agent's
  // rights; spawn.h's process_user), in a cgroup of its own as a run's
  // ranks are; its events come as the run watch_id's, rank -1. Returns the
  // reply's fields: watch_id, the watcher's pid, its user and the job's
  // processes found. Throws Error(config) when no process matches, they
  // run as several users, the id is in use or the cap on runs is reached.
  nlohmann::json start_watch(const nlohmann::json& watch);
  // Whether `id` names a watch in progress.
  bool is_watch(const std::string& id) const;
  // SIGTERM to every rank of the run, SIGKILL to all it started after the
  // grace period.
  // Throws Error(config) for an unknown run.
  void cancel(const std::string& run_id);
  // Kills every child now, and what they started (agent shutdown).
  void kill_all();
  // Runs in progress, for inventory.
  std::vector<ActiveRun> active() const;
  std::uint64_t runs_started() const noexcept { return started_; }
  std::uint64_t runs_failed() const noexcept { return failed_; }
  const RankUser& rank_user() const noexcept { return rank_user_; }

  struct Child;
  struct Run;

 private:
  void watch_children();
  void reap();
  Child& spawn_child(const std::shared_ptr<Run>& run, int rank, int local_rank, const std::vector<std::string>& argv,
                     std::vector<std::string> env);
  void relay(Child* child, const std::shared_ptr<Run>& run);
  std::map<std::string, std::string> run_environment(const RunRequest& request, int port,
                                                     const std::map<std::string, std::string>& client_env,
                                                     const std::string& run_dir) const;
  void finish_if_done(Child& child);
  // The run's cgroup (containment) and memory cgroup (OOM kills; a
  // memory_limit fault's limit). Throws Error(config) when the fault's
  // cgroup cannot be made.
  void give_cgroups(Run& run) const;
  // For a rank killed by SIGKILL: "the memory limit of its cgroup (64
  // MiB): ..." when the run's memory cgroup counted an OOM kill; empty
  // otherwise.
  static std::string oom_cause(const Run& run);
  static void signal_group(const Run& run, int sig);

  boost::asio::io_context& io_;
  const AgentOptions& options_;
  std::function<void(events::EventMessage)> emit_;
  FaultManager* faults_;
  std::map<std::string, std::shared_ptr<Run>> runs_;
  struct Signals;
  std::unique_ptr<Signals> signals_;
  RankUser rank_user_;
  // The uids runs take one each (AgentOptions::rank_uids); none when 0.
  uid_t run_uid_low_ = 0, run_uid_high_ = 0;
  // The user a new run's ranks run as: the rank user, with a uid of the
  // run's own when the range is set. Throws Error(config) when every uid
  // of the range is taken.
  RankUser user_for_a_run() const;
  CgroupHome cgroup_home_;  // where runs get a cgroup each, or why they do not
  std::uint64_t started_ = 0;
  std::uint64_t failed_ = 0;
};

}  // namespace ringmaster::agent

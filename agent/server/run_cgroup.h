// Each run in a cgroup (v2) of its own, below the agent's: every process a
// rank starts is in it, whatever session or process group it makes, so
// ending the run ends them all (cgroup.kill). No survivor of a failed rank
// keeps its output pipe open or a port bound after the agent is gone.
#pragma once

#include <memory>
#include <string>
#include <vector>

namespace ringmaster::agent {

// A small file of a cgroup (or /proc) read whole; empty when it cannot
// be. A text written to a cgroup file with one write(); false when not.
std::string read_cgroup_file(const std::string& path);
bool write_cgroup_file(const std::string& path, const std::string& text);

// The agent's own cgroup v2 directory (its cgroup2 mount joined with
// /proc/self/cgroup's "0::" path), or why there is none: no cgroup2
// mounted, not this process's, or not writable by it.
struct CgroupHome {
  std::string dir;
  std::string why_not;
};
CgroupHome find_cgroup_home();
// The same, looked up now rather than at the first call.
CgroupHome look_for_cgroup_home();

// Kills and removes the run cgroups under HOME of agents no longer
// running (SIGKILLed, crashed): what their ranks started does not outlive
// them past the next agent's start. Returns what it removed.
std::vector<std::string> remove_stale_run_cgroups(const std::string& home);
// Whether a cgroup's name is a run's (ringmaster-PID-RUN_ID) of an agent
// whose process is gone.
bool of_a_gone_agent(const std::string& name);

class RunCgroup {
 public:
  // Makes HOME/ringmaster-AGENT_PID-RUN_ID (agents on one machine may share
  // a cgroup, and run ids); nullptr with `why` when it cannot.
  static std::unique_ptr<RunCgroup> make(const std::string& home, const std::string& run_id, std::string& why);
  // Kills what is left in it, then removes it (waiting briefly for the
  // killed to be reaped).
  ~RunCgroup();
  RunCgroup(const RunCgroup&) = delete;
  RunCgroup& operator=(const RunCgroup&) = delete;

  // Its cgroup.procs, open for writing (O_CLOEXEC): a child writes "0"
  // there, before it execs, to join.
  int procs_fd() const noexcept { return procs_fd_; }
  const std::string& dir() const noexcept { return dir_; }
  // SIGKILL to every process in it at once (cgroup.kill, Linux 5.14; one
  // by one from cgroup.procs before).
  void kill() const;
  // Whether a process is still in it (cgroup.events "populated 1").
  bool populated() const;

 private:
  friend std::vector<std::string> remove_stale_run_cgroups(const std::string& home);
  RunCgroup(std::string dir, int procs_fd) : dir_(std::move(dir)), procs_fd_(procs_fd) {}
  std::string dir_;
  int procs_fd_ = -1;
};

}  // namespace ringmaster::agent

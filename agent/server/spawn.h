// Starting a rank: a child process in the run's process group, with its
// output on pipes, as the user ranks run as. An agent running as root
// never starts a rank as root unless told to: ranks run as an
// unprivileged user (`--rank-user`, default `nobody`) with that user's
// groups, in the run's own directory.
#pragma once

#include <sys/resource.h>
#include <sys/types.h>

#include <string>
#include <vector>

namespace ringmaster::agent {

// Who ranks run as.
struct RankUser {
  std::string name;
  uid_t uid = 0;
  gid_t gid = 0;
  std::vector<gid_t> groups;  // supplementary, from the group database
  bool switch_to = false;     // false: ranks run as the agent's own user
};

// The user ranks run as, for an agent whose effective uid is `agent_uid`.
// `name` empty: `nobody` when the agent is root, else the agent's user.
// Throws Error(config) for a user that does not exist, or another user
// than its own for an agent that is not root (it cannot switch).
RankUser resolve_rank_user(const std::string& name, uid_t agent_uid);

// The user the processes `pids` run as (the effective uid and gid and the
// supplementary groups /proc/PID/status lists), for a watcher of them that
// must hold no more rights than they do. Throws Error(config) when a
// process is gone, when they run as different users, or when an agent
// that is not root (`agent_uid`) would have to switch to another user.
RankUser process_user(const std::vector<int>& pids, uid_t agent_uid);

// The first directory on the way to `path` (itself included) that `user`
// may not pass through (no search permission for it as owner, group or
// other), as "DIR (mode 0700, uid 0)"; empty when it may reach it. A path
// that does not exist counts as unreachable.
std::string blocked_on_the_way(const RankUser& user, const std::string& path);

// A resource limit a rank starts under, soft and hard alike.
struct RankLimit {
  int resource = 0;  // RLIMIT_NOFILE, RLIMIT_MEMLOCK
  rlim_t value = 0;
};

struct SpawnRequest {
  std::vector<std::string> argv;  // argv[0] is the program's path
  std::vector<std::string> env;   // "NAME=value"
  std::string directory;          // the working directory
  pid_t process_group = 0;        // 0: a group of its own
  int stdout_fd = -1, stderr_fd = -1;
  int cgroup_procs_fd = -1;  // the run's cgroup.procs (run_cgroup.h), joined before the exec; -1: none
  int memory_procs_fd = -1;  // a v1 memory cgroup's cgroup.procs (memory_cgroup.h), likewise
  const RankUser* user = nullptr;
  std::vector<RankLimit> limits;  // set before the user is switched (a lower hard limit cannot be raised after)
};

// Starts the child and returns its pid once it has exec'd. Throws
// Error(config) naming the step that failed (the switch of user, the
// directory, the exec) with its errno; the child has then been reaped.
pid_t spawn_rank(const SpawnRequest& request);

}  // namespace ringmaster::agent

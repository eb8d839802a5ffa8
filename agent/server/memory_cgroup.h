// The memory cgroup a run's ranks are in, and the kernel's OOM kills in
// it: a rank killed by SIGKILL while the count rose was killed by the
// memory limit of its cgroup (a Pod's limits.memory, a unit's MemoryMax=,
// a memory_limit fault), not by a person or a crash, and its agent says
// so with the limit.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace ringmaster::agent {

class MemoryWatch {
 public:
  // For a run whose ranks join `run_v2_dir` (its cgroup v2, run_cgroup.h;
  // empty: none). With `limit` (a memory_limit fault): a cgroup of the
  // run's own limited to that many bytes, v2's memory.max of the run's
  // cgroup where its parent hands the memory controller down, else one in
  // the cgroup v1 memory hierarchy below the agent's; nullptr with `why`
  // when neither can be made. Without: the memory cgroup the ranks are in
  // anyway (the run's v2 cgroup when it has the controller, else the
  // agent's v1 memory cgroup); nullptr when there is none to watch.
  static std::unique_ptr<MemoryWatch> make(const std::string& run_v2_dir, const std::string& run_id,
                                           std::optional<std::int64_t> limit, std::string& why);
  // Whether make() could give a run a limit of its own here; why not.
  static bool can_limit(const std::string& v2_home, std::string& why);
  ~MemoryWatch();
  MemoryWatch(const MemoryWatch&) = delete;
  MemoryWatch& operator=(const MemoryWatch&) = delete;

  // The v1 cgroup's cgroup.procs to join before the exec (O_CLOEXEC); -1
  // when the ranks need not join one (v2, or one they are in already).
  int procs_fd() const noexcept { return procs_fd_; }
  const std::string& dir() const noexcept { return dir_; }
  // OOM kills in the cgroup since make(): v2's memory.events oom_kill,
  // v1's memory.oom_control oom_kill (Linux 4.13).
  std::uint64_t oom_kills() const;
  // The limit that bounds it: the smallest of its own and its ancestors'
  // (memory.max, memory.limit_in_bytes); none when nothing does.
  std::optional<std::int64_t> limit() const;

 private:
  MemoryWatch(std::string dir, bool v2, bool owned, int procs_fd);
  std::string dir_;
  bool v2_ = false, owned_ = false;
  int procs_fd_ = -1;
  std::uint64_t base_ = 0;
};

// Kills what is left in, and removes, the v1 memory cgroups that agents no
// longer running made for their runs (memory_limit faults); returns what
// it removed.
std::vector<std::string> remove_stale_memory_cgroups();

// "512 MiB", "1.5 GiB", "4096 bytes": a limit as a person reads it.
std::string memory_text(std::int64_t bytes);

}  // namespace ringmaster::agent

#include "memory_cgroup.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <sstream>
#include <thread>

#include "run_cgroup.h"

namespace ringmaster::agent {

namespace {

// A v1 limit at or above this is the kernel's "no limit" (PAGE_COUNTER_MAX
// in bytes, rounded to pages).
constexpr std::int64_t kNoV1Limit = std::int64_t{1} << 62;

// "oom_kill N" of a memory.events or memory.oom_control text.
std::uint64_t oom_kill_count(const std::string& text) {
  std::istringstream lines(text);
  for (std::string key; lines >> key;) {
    std::uint64_t value = 0;
    if (!(lines >> value)) break;
    if (key == "oom_kill") return value;
  }
  return 0;
}

// This process's cgroup in the v1 memory hierarchy, through a mount of it
// ("N:memory:/path" in /proc/self/cgroup, a "cgroup" mount whose options
// hold "memory" in /proc/self/mountinfo); empty, with why, when none.
std::string v1_memory_dir(std::string& why) {
  std::string path;
  std::istringstream cgroups(read_cgroup_file("/proc/self/cgroup"));
  for (std::string line; std::getline(cgroups, line);) {
    const auto a = line.find(':'), b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    std::istringstream controllers(line.substr(a + 1, b - a - 1));
    for (std::string c; std::getline(controllers, c, ',');) {
      if (c == "memory") path = line.substr(b + 1);
    }
  }
  if (path.empty()) {
    why = "this process is in no cgroup v1 memory hierarchy";
    return {};
  }
  std::istringstream mounts(read_cgroup_file("/proc/self/mountinfo"));
  for (std::string line; std::getline(mounts, line);) {
    const auto dash = line.find(" - cgroup ");
    if (dash == std::string::npos) continue;
    std::istringstream after(line.substr(dash + 10));
    std::string source, options;
    after >> source >> options;
    std::istringstream each(options);
    bool memory = false;
    for (std::string o; std::getline(each, o, ',');)
      memory |= o == "memory";
    if (!memory) continue;
    std::istringstream fields(line.substr(0, dash));
    std::string id, parent, devno, root, point;
    fields >> id >> parent >> devno >> root >> point;
    if (!path.starts_with(root)) continue;
    const std::string rest = root == "/" ? path : path.substr(root.size());
    return rest == "/" ? point : point + rest;
  }
  why = "the cgroup v1 memory hierarchy is not mounted here";
  return {};
}

bool has_file(const std::string& path) {
  return ::access(path.c_str(), F_OK) == 0;
}

}  // namespace

std::string memory_text(std::int64_t bytes) {
  constexpr std::int64_t kMiB = std::int64_t{1} << 20, kGiB = std::int64_t{1} << 30;
  if (bytes >= kGiB) {
    return bytes % kGiB == 0 ? fmt::format("{} GiB", bytes / kGiB)
                             : fmt::format("{:.1f} GiB", static_cast<double>(bytes) / static_cast<double>(kGiB));
  }
  if (bytes >= kMiB && bytes % kMiB == 0) return fmt::format("{} MiB", bytes / kMiB);
  return fmt::format("{} bytes", bytes);
}

namespace {

bool lists_memory(const std::string& path) {
  std::istringstream controllers(read_cgroup_file(path));
  for (std::string c; controllers >> c;) {
    if (c == "memory") return true;
  }
  return false;
}

// cgroup v2 hands a controller to a cgroup's children only when no process
// is in the cgroup itself: the agent moves into a leaf of its own below
// its home (ringmaster-PID-agent, beside its runs, as systemd's
// Delegate=yes asks of a service) and enables memory for the children.
// False, with why, when the controller is not the home's to hand down or
// other processes share the home.
bool hand_memory_down(const std::string& home, std::string& why) {
  if (!lists_memory(home + "/cgroup.controllers")) {
    why = fmt::format("{}/cgroup.controllers has no memory controller", home);
    return false;
  }
  const std::string leaf = fmt::format("{}/ringmaster-{}-agent", home, ::getpid());
  if (::mkdir(leaf.c_str(), 0755) != 0 && errno != EEXIST) {
    why = fmt::format("cannot make {}: {}", leaf, std::strerror(errno));
    return false;
  }
  if (!write_cgroup_file(leaf + "/cgroup.procs", std::to_string(::getpid()))) {
    why = fmt::format("cannot move the agent into {}: {}", leaf, std::strerror(errno));
    ::rmdir(leaf.c_str());
    return false;
  }
  if (write_cgroup_file(home + "/cgroup.subtree_control", "+memory")) return true;
  why = fmt::format(
      "cannot hand the memory controller down from {} ({}): other processes share the agent's cgroup; give the agent "
      "one of its own (systemd: Delegate=yes)",
      home, std::strerror(errno));
  write_cgroup_file(home + "/cgroup.procs", std::to_string(::getpid()));
  ::rmdir(leaf.c_str());
  return false;
}

}  // namespace

bool MemoryWatch::can_limit(const std::string& v2_home, std::string& why) {
  // v2: the run's cgroup gets memory.max when its parent hands the
  // controller down (cgroup.subtree_control); the agent does so itself
  // where the controller is its home's to hand.
  std::string v2_why;
  if (!v2_home.empty()) {
    if (lists_memory(v2_home + "/cgroup.subtree_control")) return true;
    if (hand_memory_down(v2_home, v2_why)) return true;
  }
  std::string v1_why;
  const std::string v1 = v1_memory_dir(v1_why);
  if (!v1.empty() && ::access(v1.c_str(), W_OK) == 0) return true;
  why = fmt::format(
      "{}; and {}",
      v2_home.empty()
          ? std::string("the agent has no cgroup v2 of its own")
          : fmt::format("{}/cgroup.subtree_control does not hand the memory controller down ({})", v2_home, v2_why),
      v1.empty() ? v1_why : fmt::format("{} is not writable by the agent", v1));
  return false;
}

std::unique_ptr<MemoryWatch> MemoryWatch::make(const std::string& run_v2_dir, const std::string& run_id,
                                               std::optional<std::int64_t> limit, std::string& why) {
  const bool v2_memory = !run_v2_dir.empty() && has_file(run_v2_dir + "/memory.max");
  if (v2_memory) {
    if (limit) {
      // No swap either: the limit is what the ranks may use, as a Pod's.
      if (!write_cgroup_file(run_v2_dir + "/memory.max", std::to_string(*limit))) {
        why = fmt::format("cannot write {}/memory.max: {}", run_v2_dir, std::strerror(errno));
        return nullptr;
      }
      write_cgroup_file(run_v2_dir + "/memory.swap.max", "0");
    }
    return std::unique_ptr<MemoryWatch>(new MemoryWatch(run_v2_dir, true, false, -1));
  }
  std::string v1_why;
  const std::string v1 = v1_memory_dir(v1_why);
  if (!limit) {
    if (v1.empty() || !has_file(v1 + "/memory.oom_control")) return nullptr;
    return std::unique_ptr<MemoryWatch>(new MemoryWatch(v1, false, false, -1));
  }
  if (v1.empty()) {
    why = "the run's cgroup has no memory controller and " + v1_why;
    return nullptr;
  }
  const std::string dir = fmt::format("{}/ringmaster-{}-{}", v1, ::getpid(), run_id);
  if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
    why = fmt::format("cannot make {}: {}", dir, std::strerror(errno));
    return nullptr;
  }
  const int fd = ::open((dir + "/cgroup.procs").c_str(), O_WRONLY | O_CLOEXEC);
  const std::string bytes = std::to_string(*limit);
  if (fd < 0 || !write_cgroup_file(dir + "/memory.limit_in_bytes", bytes)) {
    why = fmt::format("cannot limit {}: {}", dir, std::strerror(errno));
    if (fd >= 0) ::close(fd);
    ::rmdir(dir.c_str());
    return nullptr;
  }
  if (has_file(dir + "/memory.memsw.limit_in_bytes")) write_cgroup_file(dir + "/memory.memsw.limit_in_bytes", bytes);
  return std::unique_ptr<MemoryWatch>(new MemoryWatch(dir, false, true, fd));
}

namespace {

// What is left in a v1 cgroup is killed (v1 has no cgroup.kill), then the
// cgroup goes once the killed are reaped.
void empty_and_remove(const std::string& dir) {
  for (int i = 0; i < 200 && ::rmdir(dir.c_str()) != 0 && errno == EBUSY; ++i) {
    std::istringstream pids(read_cgroup_file(dir + "/cgroup.procs"));
    for (pid_t pid = 0; pids >> pid;)
      ::kill(pid, SIGKILL);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

}  // namespace

std::vector<std::string> remove_stale_memory_cgroups() {
  std::vector<std::string> removed;
  std::string why;
  const std::string v1 = v1_memory_dir(why);
  if (v1.empty()) return removed;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(v1, ec)) {
    if (!entry.is_directory(ec) || !of_a_gone_agent(entry.path().filename().string())) continue;
    empty_and_remove(entry.path().string());
    removed.push_back(entry.path().string());
  }
  return removed;
}

MemoryWatch::MemoryWatch(std::string dir, bool v2, bool owned, int procs_fd)
    : dir_(std::move(dir)), v2_(v2), owned_(owned), procs_fd_(procs_fd) {
  base_ = oom_kills();
}

MemoryWatch::~MemoryWatch() {
  if (procs_fd_ >= 0) ::close(procs_fd_);
  if (owned_) empty_and_remove(dir_);
}

std::uint64_t MemoryWatch::oom_kills() const {
  const std::uint64_t now = oom_kill_count(read_cgroup_file(dir_ + (v2_ ? "/memory.events" : "/memory.oom_control")));
  return now >= base_ ? now - base_ : 0;
}

std::optional<std::int64_t> MemoryWatch::limit() const {
  std::optional<std::int64_t> least;
  const char* file = v2_ ? "memory.max" : "memory.limit_in_bytes";
  for (std::filesystem::path dir = dir_; has_file((dir / file).string()); dir = dir.parent_path()) {
    const std::string text = read_cgroup_file((dir / file).string());
    std::int64_t value = 0;
    if (std::istringstream(text) >> value && value > 0 && value < kNoV1Limit)
      least = least ? std::min(*least, value) : value;
    if (dir == dir.parent_path()) break;
  }
  return least;
}

}  // namespace ringmaster::agent

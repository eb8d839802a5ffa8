#include "run_cgroup.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

namespace ringmaster::agent {

std::string read_cgroup_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

bool write_cgroup_file(const std::string& path, const std::string& text) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  ::close(fd);
  return ok;
}

CgroupHome find_cgroup_home() {
  // The first answer holds for the process's life: the agent may move
  // itself into a leaf below its home (memory_cgroup.h), and its runs
  // stay beside that leaf.
  static const CgroupHome home = look_for_cgroup_home();
  return home;
}

CgroupHome look_for_cgroup_home() {
  CgroupHome home;
  // "0::/system.slice/ringmaster-agent.service": the unified hierarchy.
  std::string path;
  {
    std::istringstream lines(read_cgroup_file("/proc/self/cgroup"));
    for (std::string line; std::getline(lines, line);) {
      if (line.rfind("0::", 0) == 0) path = line.substr(3);
    }
  }
  if (path.empty()) {
    home.why_not = "this process is in no cgroup v2 (no \"0::\" line in /proc/self/cgroup)";
    return home;
  }
  // The cgroup2 mount: /proc/self/mountinfo's fifth field where the
  // filesystem type (after " - ") is cgroup2.
  std::string mount;
  {
    std::istringstream lines(read_cgroup_file("/proc/self/mountinfo"));
    for (std::string line; std::getline(lines, line);) {
      const auto dash = line.find(" - cgroup2 ");
      if (dash == std::string::npos) continue;
      std::istringstream fields(line.substr(0, dash));
      std::string id, parent, devno, root, point;
      fields >> id >> parent >> devno >> root >> point;
      if (root == "/") {
        mount = point;
        break;
      }
    }
  }
  if (mount.empty()) {
    home.why_not = "no cgroup2 filesystem is mounted here";
    return home;
  }
  const std::string dir = path == "/" ? mount : mount + path;
  if (::access(dir.c_str(), W_OK) != 0) {
    home.why_not = fmt::format("{} is not writable by the agent ({})", dir, std::strerror(errno));
    return home;
  }
  home.dir = dir;
  return home;
}

bool of_a_gone_agent(const std::string& name) {
  // ringmaster-PID-RUN_ID
  if (name.rfind("ringmaster-", 0) != 0) return false;
  const std::string rest = name.substr(11);
  const auto dash = rest.find('-');
  if (dash == std::string::npos || dash == 0) return false;
  pid_t pid = 0;
  const auto [end, err] = std::from_chars(rest.data(), rest.data() + dash, pid);
  if (err != std::errc() || end != rest.data() + dash || pid <= 0) return false;
  return ::kill(pid, 0) != 0 && errno == ESRCH;  // its agent is gone
}

std::vector<std::string> remove_stale_run_cgroups(const std::string& home) {
  std::vector<std::string> removed;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(home, ec)) {
    if (!entry.is_directory(ec) || !of_a_gone_agent(entry.path().filename().string())) continue;
    const int fd = ::open((entry.path() / "cgroup.procs").c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0) continue;
    RunCgroup stale(entry.path().string(), fd);  // its destructor kills and removes
    removed.push_back(entry.path().string());
  }
  return removed;
}

std::unique_ptr<RunCgroup> RunCgroup::make(const std::string& home, const std::string& run_id, std::string& why) {
  const std::string dir = fmt::format("{}/ringmaster-{}-{}", home, ::getpid(), run_id);
  if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
    why = fmt::format("cannot make {}: {}", dir, std::strerror(errno));
    return nullptr;
  }
  const int fd = ::open((dir + "/cgroup.procs").c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) {
    why = fmt::format("cannot open {}/cgroup.procs: {}", dir, std::strerror(errno));
    ::rmdir(dir.c_str());
    return nullptr;
  }
  return std::unique_ptr<RunCgroup>(new RunCgroup(dir, fd));
}

void RunCgroup::kill() const {
  if (write_cgroup_file(dir_ + "/cgroup.kill", "1")) return;
  // Before Linux 5.14: each process listed, until none is left to list
  // (one may fork while the list is read).
  for (int round = 0; round < 16 && populated(); ++round) {
    std::istringstream pids(read_cgroup_file(dir_ + "/cgroup.procs"));
    for (pid_t pid = 0; pids >> pid;)
      ::kill(pid, SIGKILL);
  }
}

bool RunCgroup::populated() const {
  return read_cgroup_file(dir_ + "/cgroup.events").find("populated 1") != std::string::npos;
}

RunCgroup::~RunCgroup() {
  ::close(procs_fd_);
  if (populated()) kill();
  // The killed are gone once their parent (init, or the agent) has reaped
  // them: normally at once.
  for (int i = 0; i < 200 && ::rmdir(dir_.c_str()) != 0 && errno == EBUSY; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
}

}  // namespace ringmaster::agent

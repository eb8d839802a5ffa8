// fork and exec by hand, as posix_spawn cannot change the user: between
// the two the child makes only async-signal-safe calls (the agent may
// have threads), everything it needs prepared before the fork. A pipe
// closed on exec tells the parent whether the exec happened, or which
// step failed and why.
#include "spawn.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <grp.h>
#include <linux/close_range.h>
#include <pwd.h>
#include <signal.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

#include "ringmaster/status.h"

namespace ringmaster::agent {

RankUser resolve_rank_user(const std::string& name, uid_t agent_uid) {
  const std::string wanted = !name.empty() ? name : agent_uid == 0 ? "nobody" : "";
  passwd entry{};
  passwd* found = nullptr;
  std::array<char, 16384> buffer{};
  const int rc = wanted.empty() ? ::getpwuid_r(agent_uid, &entry, buffer.data(), buffer.size(), &found)
                                : ::getpwnam_r(wanted.c_str(), &entry, buffer.data(), buffer.size(), &found);
  if (rc != 0 || found == nullptr) {
    if (wanted.empty()) {
      RankUser own;
      own.name = std::to_string(agent_uid);
      own.uid = agent_uid;
      own.gid = ::getegid();
      return own;
    }
    throw Error(ErrorCategory::config, fmt::format("rank user '{}' does not exist{}", wanted,
                                                   rc != 0 ? std::string(": ") + strerror(rc) : ""));
  }
  RankUser user;
  user.name = entry.pw_name;
  user.uid = entry.pw_uid;
  user.gid = entry.pw_gid;
  if (user.uid == agent_uid) return user;  // no switch (nor groups to set)
  if (agent_uid != 0) {
    throw Error(ErrorCategory::config, fmt::format("rank user '{}': an agent that is not root runs ranks as its own "
                                                   "user (uid {}), and cannot switch to uid {}",
                                                   user.name, agent_uid, user.uid));
  }
  int count = 64;
  std::vector<gid_t> groups(static_cast<std::size_t>(count));
  if (::getgrouplist(user.name.c_str(), user.gid, groups.data(), &count) < 0) {
    groups.resize(static_cast<std::size_t>(count));
    ::getgrouplist(user.name.c_str(), user.gid, groups.data(), &count);
  }
  groups.resize(static_cast<std::size_t>(count));
  user.groups = std::move(groups);
  user.switch_to = true;
  return user;
}

namespace {

// The effective uid, gid and supplementary groups of a process.
struct ProcessCredentials {
  uid_t uid = 0;
  gid_t gid = 0;
  std::vector<gid_t> groups;
};

std::optional<ProcessCredentials> credentials_of(int pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  if (!status) return std::nullopt;
  ProcessCredentials c;
  int found = 0;
  for (std::string line; std::getline(status, line);) {
    std::istringstream fields(line);
    std::string key;
    fields >> key;
    unsigned long real = 0, effective = 0;
    if (key == "Uid:" && fields >> real >> effective) {
      c.uid = static_cast<uid_t>(effective);
      ++found;
    } else if (key == "Gid:" && fields >> real >> effective) {
      c.gid = static_cast<gid_t>(effective);
      ++found;
    } else if (key == "Groups:") {
      for (unsigned long g = 0; fields >> g;)
        c.groups.push_back(static_cast<gid_t>(g));
    }
  }
  if (found != 2) return std::nullopt;
  return c;
}

}  // namespace

RankUser process_user(const std::vector<int>& pids, uid_t agent_uid) {
  if (pids.empty()) throw Error(ErrorCategory::config, "no process to watch");
  std::optional<ProcessCredentials> first;
  for (int pid : pids) {
    const auto c = credentials_of(pid);
    if (!c) throw Error(ErrorCategory::config, fmt::format("process {} is gone (no /proc/{}/status)", pid, pid));
    if (!first) {
      first = c;
    } else if (c->uid != first->uid) {
      throw Error(ErrorCategory::config,
                  fmt::format("the job's processes run as different users (uid {} for process {}, uid {} for process "
                              "{}); watch each user's processes on their own",
                              first->uid, pids.front(), c->uid, pid));
    }
  }
  RankUser user;
  user.uid = first->uid;
  user.gid = first->gid;
  user.groups = first->groups;
  passwd entry{};
  passwd* found = nullptr;
  std::array<char, 16384> buffer{};
  user.name = ::getpwuid_r(user.uid, &entry, buffer.data(), buffer.size(), &found) == 0 && found != nullptr
                  ? std::string(entry.pw_name)
                  : std::to_string(user.uid);
  if (user.uid == agent_uid) return user;  // the agent's own user: no switch
  if (agent_uid != 0) {
    throw Error(ErrorCategory::config,
                fmt::format("the job runs as uid {}; an agent that is not root (uid {}) watches only its own user's "
                            "processes",
                            user.uid, agent_uid));
  }
  user.switch_to = true;
  return user;
}

std::string blocked_on_the_way(const RankUser& user, const std::string& path) {
  std::error_code ec;
  const std::filesystem::path absolute = std::filesystem::absolute(path, ec);
  std::filesystem::path walked;
  for (const auto& part : absolute) {
    walked /= part;
    struct stat st = {};
    if (::stat(walked.c_str(), &st) != 0) return fmt::format("{} ({})", walked.string(), strerror(errno));
    mode_t bit = S_IXOTH;
    if (st.st_uid == user.uid) {
      bit = S_IXUSR;
    } else if (st.st_gid == user.gid ||
               std::find(user.groups.begin(), user.groups.end(), st.st_gid) != user.groups.end()) {
      bit = S_IXGRP;
    }
    if (user.uid != 0 && (st.st_mode & bit) == 0) {
      return fmt::format("{} (mode {:04o}, uid {})", walked.string(), st.st_mode & 07777, st.st_uid);
    }
  }
  return {};
}

namespace {

// What the child writes on the status pipe when a step fails.
struct ChildFailure {
  int step = 0;
  int error = 0;
};

enum Step : int {
  kCgroup = 1,
  kGroup,
  kOutput,
  kDescriptors,
  kLimits,
  kGroups,
  kGid,
  kUid,
  kStillRoot,
  kDirectory,
  kSignals,
  kExec
};

const char* step_name(int step) {
  switch (step) {
    case kCgroup:
      return "joining the run's cgroup";
    case kGroup:
      return "joining the run's process group";
    case kOutput:
      return "connecting its input and output";
    case kDescriptors:
      return "closing the agent's descriptors";
    case kLimits:
      return "setting the run's resource limits";
    case kGroups:
      return "setting the rank user's groups";
    case kGid:
      return "setting the rank user's group id";
    case kUid:
      return "setting the rank user's user id";
    case kStillRoot:
      return "leaving root (it could become root again)";
    case kDirectory:
      return "entering the run's directory";
    case kSignals:
      return "resetting signals";
    case kExec:
      return "executing";
  }
  return "starting";
}

// Marks every descriptor from 3 up close-on-exec, so the program starts
// with 0, 1 and 2 only, whatever the agent (or a library it uses) opened
// without O_CLOEXEC: its listener, its clients' sessions, its store. The
// status pipe stays open until the exec itself. Linux 5.11's
// CLOSE_RANGE_CLOEXEC in one call; older kernels one fcntl a descriptor
// up to the descriptor limit. Async-signal-safe either way.
bool cloexec_from_3() {
  if (::syscall(SYS_close_range, 3U, ~0U, CLOSE_RANGE_CLOEXEC) == 0) return true;
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) return false;
  const rlim_t top = limit.rlim_cur == RLIM_INFINITY ? rlim_t{1} << 20 : std::min<rlim_t>(limit.rlim_cur, 1 << 20);
  for (rlim_t fd = 3; fd < top; ++fd) {
    const int flags = ::fcntl(static_cast<int>(fd), F_GETFD);
    if (flags >= 0 && (flags & FD_CLOEXEC) == 0 && ::fcntl(static_cast<int>(fd), F_SETFD, flags | FD_CLOEXEC) != 0) {
      return false;
    }
  }
  return true;
}

[[noreturn]] void fail_in_child(int status_fd, int step, int error) {
  const ChildFailure f{step, error};
  [[maybe_unused]] const auto n = ::write(status_fd, &f, sizeof(f));
  ::_exit(127);
}

}  // namespace

pid_t spawn_rank(const SpawnRequest& request) {
  std::vector<char*> argv, envp;
  for (const auto& a : request.argv)
    argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  for (const auto& e : request.env)
    envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  const RankUser* user = request.user;
  const bool switch_user = user != nullptr && user->switch_to;

  // The rank reads nothing of the agent's: its input is /dev/null.
  const int null_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (null_fd < 0) {
    throw Error(ErrorCategory::config, fmt::format("cannot start a rank: /dev/null: {}", strerror(errno)));
  }
  int status_pipe[2];
  if (::pipe2(status_pipe, O_CLOEXEC) != 0) {
    const int err = errno;
    ::close(null_fd);
    throw Error(ErrorCategory::config, fmt::format("cannot start a rank: pipe: {}", strerror(err)));
  }
  const pid_t pid = ::fork();
  if (pid < 0) {
    const int err = errno;
    ::close(null_fd);
    ::close(status_pipe[0]);
    ::close(status_pipe[1]);
    throw Error(ErrorCategory::config, fmt::format("cannot start a rank: fork: {}", strerror(err)));
  }
  if (pid == 0) {
    const int fd = status_pipe[1];
    // First, while still the agent's user: whatever the rank starts is
    // then in the run's cgroup too.
    for (const int procs : {request.cgroup_procs_fd, request.memory_procs_fd}) {
      if (procs >= 0 && ::write(procs, "0", 1) != 1) fail_in_child(fd, kCgroup, errno);
    }
    if (::setpgid(0, request.process_group) != 0) fail_in_child(fd, kGroup, errno);
    if (::dup2(null_fd, 0) < 0 || ::dup2(request.stdout_fd, 1) < 0 || ::dup2(request.stderr_fd, 2) < 0) {
      fail_in_child(fd, kOutput, errno);
    }
    if (!cloexec_from_3()) fail_in_child(fd, kDescriptors, errno);
    for (const auto& limit : request.limits) {
      const rlimit both{limit.value, limit.value};
      if (::setrlimit(limit.resource, &both) != 0) fail_in_child(fd, kLimits, errno);
    }
    if (switch_user) {
      if (::setgroups(user->groups.size(), user->groups.data()) != 0) fail_in_child(fd, kGroups, errno);
      if (::setgid(user->gid) != 0) fail_in_child(fd, kGid, errno);
      if (::setuid(user->uid) != 0) fail_in_child(fd, kUid, errno);
      if (user->uid != 0 && ::setuid(0) == 0) fail_in_child(fd, kStillRoot, 0);
    }
    if (!request.directory.empty() && ::chdir(request.directory.c_str()) != 0) fail_in_child(fd, kDirectory, errno);
    // The agent's signal mask and ignored signals would pass to the rank.
    sigset_t none;
    ::sigemptyset(&none);
    struct sigaction default_action = {};
    default_action.sa_handler = SIG_DFL;
    if (::sigprocmask(SIG_SETMASK, &none, nullptr) != 0 || ::sigaction(SIGPIPE, &default_action, nullptr) != 0) {
      fail_in_child(fd, kSignals, errno);
    }
    ::execve(argv[0], argv.data(), envp.data());
    fail_in_child(fd, kExec, errno);
  }
  ::close(null_fd);
  ::close(status_pipe[1]);
  // Also from here, so the group exists whichever side runs first.
  ::setpgid(pid, request.process_group == 0 ? pid : request.process_group);
  ChildFailure failure;
  ssize_t n;
  do {
    n = ::read(status_pipe[0], &failure, sizeof(failure));
  } while (n < 0 && errno == EINTR);
  ::close(status_pipe[0]);
  if (n == 0) return pid;  // closed by the exec
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (n != static_cast<ssize_t>(sizeof(failure))) {
    throw Error(ErrorCategory::config, "cannot start a rank: the child ended before it said why");
  }
  const std::string as = switch_user ? fmt::format(" as user '{}'", user->name) : std::string();
  throw Error(ErrorCategory::config,
              fmt::format("cannot start {}{}: {} failed{}", request.argv[0], as, step_name(failure.step),
                          failure.error != 0 ? std::string(": ") + strerror(failure.error) : ""));
}

}  // namespace ringmaster::agent

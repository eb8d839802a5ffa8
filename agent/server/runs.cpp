// Child processes for ranks: spawn with torchrun's environment, read their
// JSON lines and stderr without blocking the agent, reap them on SIGCHLD,
// and say how each one ended.
#include "runs.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <netinet/in.h>
#include <pwd.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/streambuf.hpp>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <set>
#include <vector>

#include "ringmaster/agent/log.h"
#include "ringmaster/agent/protocol.h"
#include "ringmaster/agent/requests.h"
#include "ringmaster/status.h"
#include "ringmaster/tools/job_watch.h"
#include "run_env.h"
#include "spawn.h"

extern char** environ;

namespace ringmaster::agent {

namespace asio = boost::asio;
using nlohmann::json;

struct RunManager::Child {
  int rank = 0;
  int local_rank = 0;
  pid_t pid = -1;
  std::unique_ptr<asio::posix::stream_descriptor> out, err;
  // A line longer than this is cut there (a rank printing without newlines
  // must not grow the agent); the pieces are relayed as output.
  asio::streambuf out_buffer{1 << 20};
  std::string err_tail;
  bool out_done = false, err_done = false, exited = false, reported = false;
  int status = 0;
  std::weak_ptr<Run> run;
};

struct RunManager::Run {
  // Declared first, so it goes last: its destructor kills what is left in
  // the run's cgroup and removes it, after the children's pipes close.
  std::unique_ptr<RunCgroup> cgroup;
  // The memory cgroup its ranks are in, watched for OOM kills (and made,
  // with a memory_limit fault, then removed before `cgroup`).
  std::unique_ptr<MemoryWatch> memory;
  std::string id;
  std::string dir;  // STATE_DIR/runs/ID
  RankUser user;    // who its ranks run as (a uid of its own, see rank_uids)
  std::vector<std::unique_ptr<Child>> children;
  std::unique_ptr<asio::steady_timer> kill_timer;
  bool cancelled = false;
  bool any_failed = false;
  bool watch = false;  // a watch's watcher, not a run's ranks
};

struct RunManager::Signals {
  explicit Signals(asio::io_context& io) : set(io, SIGCHLD) {}
  asio::signal_set set;
};

namespace {

constexpr std::size_t kStderrTail = 4096;

std::string signal_name(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  return abbrev ? fmt::format("SIG{}", abbrev) : fmt::format("signal {}", sig);
}

// Whether `port` can be bound on every address now (0: the kernel picks
// one); the port bound, 0 when not.
std::uint16_t bind_probe(std::uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_ANY);
  a.sin_port = htons(port);
  socklen_t len = sizeof(a);
  const bool ok = fd >= 0 && ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 &&
                  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0;
  if (fd >= 0) ::close(fd);
  return ok ? ntohs(a.sin_port) : 0;
}

// A free port for the store, above the kernel's ephemeral range
// (net.ipv4.ip_local_port_range, 32768-60999 by default) where there is
// room: a port the kernel handed out here could be handed out again to
// anyone's bind(0) or connect() before rank 0 listens on it (a run failed
// at STORE_CONNECT, "MASTER_PORT is already taken", beside busy tests).
// Where the range leaves no room above it, the kernel's pick.
std::uint16_t pick_free_port() {
  int high = 60999;
  if (FILE* f = std::fopen("/proc/sys/net/ipv4/ip_local_port_range", "r")) {
    int low = 0, top = 0;
    if (std::fscanf(f, "%d %d", &low, &top) == 2 && top > 0) high = top;
    std::fclose(f);
  }
  constexpr int kTop = 65535;
  if (high + 256 <= kTop) {
    std::uint32_t seed = static_cast<std::uint32_t>(::getpid()) * 2654435761u ^
                         static_cast<std::uint32_t>(std::chrono::steady_clock::now().time_since_epoch().count());
    for (int attempt = 0; attempt < 64; ++attempt) {
      seed = seed * 1664525u + 1013904223u;
      const auto port = static_cast<std::uint16_t>(high + 1 + static_cast<int>(seed >> 8) % (kTop - high));
      if (bind_probe(port) == port) return port;
    }
  }
  const std::uint16_t port = bind_probe(0);
  if (port == 0) throw Error(ErrorCategory::network, "cannot find a free port for the store");
  return port;
}

// A run message, every field checked; with engine nccl, refused up front
// when NCCL's runner cannot run it.
RunRequest run_request_of(const json& m) {
  RunRequest run = RunRequest::parse(m);
  if (run.perf.engine == PerfRequest::Engine::nccl) {
    if (const std::string refused = run.perf.nccl_refusal(); !refused.empty()) {
      throw Error(ErrorCategory::config, "run.perf.engine nccl: " + refused);
    }
  }
  return run;
}

// "LOW-HIGH" of --rank-uids; {0, 0} for an empty one.
std::pair<uid_t, uid_t> uid_range_of(const std::string& text) {
  if (text.empty()) return {0, 0};
  const auto range = low_high(text);
  const auto [lo, hi] = range.value_or(std::pair{0ul, 0ul});
  if (!range || lo < 1000 || lo > hi || hi >= (1ul << 31) || hi - lo > 1'000'000) {
    throw Error(
        ErrorCategory::config,
        fmt::format("--rank-uids {}: expected LOW-HIGH with 1000 <= LOW <= HIGH < 2^31 (a million at most)", text));
  }
  return {static_cast<uid_t>(lo), static_cast<uid_t>(hi)};
}

// The uids that own a process now (/proc/PID belongs to its process's uid).
std::set<uid_t> uids_with_processes() {
  std::set<uid_t> out;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/proc", ec)) {
    const std::string name = entry.path().filename().string();
    if (name.empty() || !std::isdigit(static_cast<unsigned char>(name[0]))) continue;
    struct stat st = {};
    if (::stat(entry.path().c_str(), &st) == 0) out.insert(st.st_uid);
  }
  return out;
}

bool uid_has_a_user(uid_t uid) {
  passwd entry{};
  passwd* found = nullptr;
  std::array<char, 16384> buffer{};
  return ::getpwuid_r(uid, &entry, buffer.data(), buffer.size(), &found) == 0 && found != nullptr;
}

// A run's directory back to the agent once its ranks are gone: its uid may
// be a later run's, which must not reach what this one left.
void reclaim_run_dir(const std::string& dir) {
  if (::chown(dir.c_str(), ::geteuid(), ::getegid()) != 0 && errno != ENOENT) {
    log::warn("cannot take {} back from its run's uid: {}", dir, strerror(errno));
  }
}

}  // namespace

RankUser RunManager::user_for_a_run() const {
  if (run_uid_low_ == 0) return rank_user_;
  std::set<uid_t> taken;
  for (const auto& [_, run] : runs_)
    taken.insert(run->user.uid);
  const auto busy = uids_with_processes();
  for (uid_t uid = run_uid_low_; uid <= run_uid_high_; ++uid) {
    if (taken.contains(uid) || busy.contains(uid) || uid_has_a_user(uid)) continue;
    RankUser user = rank_user_;
    user.uid = uid;
    return user;
  }
  throw Error(ErrorCategory::config,
              fmt::format("every uid of --rank-uids {}-{} is taken (by a run, a user or a process); a run needs one "
                          "of its own",
                          run_uid_low_, run_uid_high_));
}

// The run's process group (its first rank's pid), while one of its ranks
// is unreaped and so keeps the group's id from being reused.
void RunManager::signal_group(const Run& run, int sig) {
  const bool alive = std::any_of(run.children.begin(), run.children.end(), [](const auto& c) { return !c->exited; });
  if (alive && !run.children.empty() && run.children.front()->pid > 0) ::kill(-run.children.front()->pid, sig);
}

RunManager::RunManager(asio::io_context& io, const AgentOptions& options,
                       std::function<void(events::EventMessage)> emit, FaultManager* faults)
    : io_(io),
      options_(options),
      emit_(std::move(emit)),
      faults_(faults),
      signals_(std::make_unique<Signals>(io)),
      rank_user_(resolve_rank_user(options.rank_user, ::geteuid())),
      cgroup_home_(find_cgroup_home()) {
  if (rank_user_.uid == 0) {
    log::warn("ranks run as root (--rank-user {})", rank_user_.name);
  }
  // A uid a run when ranks switch to an unprivileged user; an agent that
  // is not root cannot, and ranks named root need no fence.
  if (rank_user_.switch_to && rank_user_.uid != 0) {
    std::tie(run_uid_low_, run_uid_high_) = uid_range_of(options.rank_uids);
  }
  if (cgroup_home_.dir.empty()) {
    log::warn(
        "runs go without a cgroup of their own ({}): what a rank starts in a session of its own outlives the "
        "run",
        cgroup_home_.why_not);
  } else {
    for (const auto& dir : remove_stale_run_cgroups(cgroup_home_.dir))
      log::info("removed {}, the cgroup of a run whose agent is gone, and what was left in it", dir);
  }
  for (const auto& dir : remove_stale_memory_cgroups()) {
    log::info("removed {}, the memory cgroup of a run whose agent is gone, and what was left in it", dir);
  }
  watch_children();
}

RunManager::~RunManager() {
  kill_all();
}

void RunManager::watch_children() {
  signals_->set.async_wait([this](boost::system::error_code ec, int) {
    if (ec) return;
    reap();
    watch_children();
  });
}

void RunManager::reap() {
  // Only our own children, one by one: a process embedding the agent may
  // have other children whose status is not ours to take.
  std::vector<std::pair<Child*, std::shared_ptr<Run>>> ended;
  for (auto& [id, run] : runs_) {
    for (auto& child : run->children) {
      if (child->exited) continue;
      int status = 0;
      if (::waitpid(child->pid, &status, WNOHANG) == child->pid) {
        child->exited = true;
        child->status = status;
        ended.emplace_back(child.get(), run);  // the run keeps the child alive
      }
    }
  }
  // Every rank of a run gone: what they started goes too (it would keep
  // their output pipes open, and the run unfinished, or a port bound).
  for (auto& [child, run] : ended) {
    const bool all_exited =
        std::all_of(run->children.begin(), run->children.end(), [](const auto& c) { return c->exited; });
    if (all_exited && run->cgroup && run->cgroup->populated()) run->cgroup->kill();
  }
  for (auto& [child, run] : ended)
    finish_if_done(*child);
}

void RunManager::give_cgroups(Run& run) const {
  if (!cgroup_home_.dir.empty()) {
    std::string why;
    run.cgroup = RunCgroup::make(cgroup_home_.dir, run.id, why);
    if (!run.cgroup) log::warn("run {} goes without a cgroup of its own: {}", run.id, why);
  }
  const auto limit = faults_ ? faults_->rank_memory_limit() : std::nullopt;
  std::string why;
  run.memory = MemoryWatch::make(run.cgroup ? run.cgroup->dir() : std::string(), run.id, limit, why);
  if (!run.memory && limit)
    throw Error(ErrorCategory::config,
                fmt::format("run {}: the memory_limit fault cannot be applied: {}", run.id, why));
}

std::string RunManager::oom_cause(const Run& run) {
  if (!run.memory) return {};
  const std::uint64_t kills = run.memory->oom_kills();
  if (kills == 0) return {};
  const auto limit = run.memory->limit();
  return fmt::format(
      "the memory limit of its cgroup{}: the kernel's OOM killer sent SIGKILL ({} OOM kill(s) in {} during the "
      "run). Give the ranks more memory (the Pod's limits.memory, the unit's MemoryMax=) or run smaller sizes",
      limit ? " (" + memory_text(*limit) + ")" : std::string(), kills, run.memory->dir());
}

void RunManager::finish_if_done(Child& child) {
  if (child.reported || !child.exited || !child.out_done || !child.err_done) return;
  child.reported = true;
  auto run = child.run.lock();
  if (!run) return;
  auto who = [&run](const Child& c) {
    return run->watch ? fmt::format("the watcher of {}", run->id) : fmt::format("rank {}", c.rank);
  };
  const int status = child.status;
  events::Event event;
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
    event = events::RankExit{0};
  } else {
    run->any_failed = true;
    events::RankFailed failed;
    failed.pid = child.pid;
    failed.stderr_tail = child.err_tail;
    if (WIFEXITED(status)) {
      failed.exit_code = WEXITSTATUS(status);
      failed.summary = fmt::format("{} exited with status {}", who(child), WEXITSTATUS(status));
    } else if (WIFSIGNALED(status)) {
      failed.signal = WTERMSIG(status);
      failed.signal_name = signal_name(WTERMSIG(status));
      const std::string oom = WTERMSIG(status) == SIGKILL ? oom_cause(*run) : std::string();
      failed.summary =
          fmt::format("{} was killed by {}", who(child), oom.empty() ? signal_name(WTERMSIG(status)) : oom);
    }
    event = std::move(failed);
  }
  emit_({run->id, child.rank, std::move(event), {}});
  for (const auto& c : run->children) {
    if (!c->reported) return;
  }
  if (run->any_failed) ++failed_;
  emit_({run->id, -1, events::RunDone{!run->any_failed, run->cancelled}, {}});
  if (run->kill_timer) run->kill_timer->cancel();
  if (!run->dir.empty() && run->user.uid != rank_user_.uid) reclaim_run_dir(run->dir);
  runs_.erase(run->id);
  if (faults_) {
    for (auto& reverted : faults_->run_ended(run->id))
      emit_({run->id, -1, std::move(reverted), {}});
  }
}

// One child of the run, in its process group (the first child's), its
// cgroups, as its user, in its directory; added to run->children. A
// failure part-way leaves nothing behind: the children started so far are
// killed and reaped, and Error(config) names the step.
RunManager::Child& RunManager::spawn_child(const std::shared_ptr<Run>& run, int rank, int local_rank,
                                           const std::vector<std::string>& argv, std::vector<std::string> env) {
  auto abandon = [&](const std::string& why) {
    for (auto& c : run->children) {
      ::kill(c->pid, SIGKILL);
      int status = 0;
      ::waitpid(c->pid, &status, 0);
    }
    if (!run->dir.empty() && run->user.uid != rank_user_.uid) reclaim_run_dir(run->dir);
    return Error(ErrorCategory::config, why);
  };
  int out_pipe[2] = {-1, -1}, err_pipe[2] = {-1, -1};
  if (::pipe2(out_pipe, O_CLOEXEC) != 0 || ::pipe2(err_pipe, O_CLOEXEC) != 0) {
    const int err = errno;
    for (int fd : {out_pipe[0], out_pipe[1]})
      if (fd >= 0) ::close(fd);
    throw abandon(fmt::format("cannot start rank {}: pipe: {}", rank, strerror(err)));
  }
  auto child = std::make_unique<Child>();
  child->rank = rank;
  child->local_rank = local_rank;
  child->run = run;
  // The run is one process group (its first rank's): cancel and shutdown
  // reach whatever the ranks start too.
  const SpawnRequest request{.argv = argv,
                             .env = std::move(env),
                             .directory = run->dir.empty() ? "/" : run->dir,
                             .process_group = run->children.empty() ? 0 : run->children.front()->pid,
                             .stdout_fd = out_pipe[1],
                             .stderr_fd = err_pipe[1],
                             .cgroup_procs_fd = run->cgroup ? run->cgroup->procs_fd() : -1,
                             .memory_procs_fd = run->memory ? run->memory->procs_fd() : -1,
                             .user = &run->user,
                             .limits = faults_ ? faults_->rank_limits() : std::vector<RankLimit>{}};
  try {
    child->pid = spawn_rank(request);
  } catch (const Error& e) {
    for (int fd : {out_pipe[0], out_pipe[1], err_pipe[0], err_pipe[1]})
      ::close(fd);
    throw abandon(e.status().message());
  }
  ::close(out_pipe[1]);
  ::close(err_pipe[1]);
  child->out = std::make_unique<asio::posix::stream_descriptor>(io_, out_pipe[0]);
  child->err = std::make_unique<asio::posix::stream_descriptor>(io_, err_pipe[0]);
  run->children.push_back(std::move(child));
  return *run->children.back();
}

// stdout: one JSON object per line, relayed as an event; stderr: its
// tail kept for rank_failed.
void RunManager::relay(Child* child, const std::shared_ptr<Run>& run) {
  // stdout: one JSON object per line, relayed as an event.
  auto read_line = std::make_shared<std::function<void()>>();
  *read_line = [this, child, run, read_line] {
    asio::async_read_until(
        *child->out, child->out_buffer, '\n',
        [this, child, run, read_line](boost::system::error_code ec, std::size_t n) {
          if (ec == asio::error::not_found) {
            // The buffer is full without a newline: relay what it holds
            // as output and read on.
            std::string piece(asio::buffers_begin(child->out_buffer.data()),
                              asio::buffers_end(child->out_buffer.data()));
            child->out_buffer.consume(child->out_buffer.size());
            try {
              emit_({run->id, child->rank, events::RankOutput{std::move(piece), true}, {}});
            } catch (const std::exception& e) {
              log::warn("rank {}'s output skipped: {}", child->rank, e.what());
            }
            (*read_line)();
            return;
          }
          if (ec) {
            child->out_done = true;
            *read_line = nullptr;  // ends the handler's self-reference
            finish_if_done(*child);
            return;
          }
          std::string line(asio::buffers_begin(child->out_buffer.data()),
                           asio::buffers_begin(child->out_buffer.data()) + static_cast<std::ptrdiff_t>(n) - 1);
          child->out_buffer.consume(n);
          // A line that is not a valid event of ours is output, whatever
          // it looks like; an event this build does not know is relayed.
          events::EventMessage m{run->id, child->rank, events::RankOutput{line, false}, {}};
          json parsed = json::parse(line, nullptr, false);
          if (!parsed.is_discarded() && parsed.is_object() && json_depth(line, kMaxJsonDepth) <= kMaxJsonDepth &&
              parsed.contains("type") && parsed["type"] != "output") {
            try {
              m.event = events::parse_event(parsed);
              m.body = std::move(parsed);
            } catch (const Error& e) {
              log::warn("rank {}'s line relayed as output: {}", child->rank, e.status().message());
            }
          }
          try {
            emit_(std::move(m));
          } catch (const std::exception& e) {
            log::warn("rank {}'s output skipped: {}", child->rank, e.what());
          }
          (*read_line)();
        });
  };
  (*read_line)();
  // stderr: keep the tail for rank_failed.
  auto buffer = std::make_shared<std::array<char, 4096>>();
  auto read_err = std::make_shared<std::function<void()>>();
  *read_err = [this, child, buffer, read_err] {
    child->err->async_read_some(asio::buffer(*buffer),
                                [this, child, buffer, read_err](boost::system::error_code ec, std::size_t n) {
                                  if (ec) {
                                    child->err_done = true;
                                    *read_err = nullptr;  // ends the handler's self-reference
                                    finish_if_done(*child);
                                    return;
                                  }
                                  child->err_tail.append(buffer->data(), n);
                                  if (child->err_tail.size() > kStderrTail)
                                    child->err_tail.erase(0, child->err_tail.size() - kStderrTail);
                                  (*read_err)();
                                });
  };
  (*read_err)();
}

// What every rank of the run gets in its environment: the agent's own,
// torchrun's variables but RANK and LOCAL_RANK, the run's limits and
// forced settings, then the client's checked variables.
std::map<std::string, std::string> RunManager::run_environment(const RunRequest& request, int port,
                                                               const std::map<std::string, std::string>& client_env,
                                                               const std::string& run_dir) const {
  std::map<std::string, std::string> env;
  for (char** e = environ; *e; ++e) {
    const std::string entry(*e);
    const auto eq = entry.find('=');
    if (eq != std::string::npos) env[entry.substr(0, eq)] = entry.substr(eq + 1);
  }
  env["WORLD_SIZE"] = std::to_string(request.world_size);
  env["LOCAL_WORLD_SIZE"] = std::to_string(request.ranks.size());
  env["MASTER_ADDR"] = request.master_addr;
  env["MASTER_PORT"] = std::to_string(port);
  env["RINGMASTER_RUN_ID"] = request.run_id;
  // An agent with a declared topology stands for the node its file
  // describes: its ranks search their rings over that file and are a
  // node of their own, so two such agents on one machine rehearse two
  // nodes (the run's own NCCL_TOPO_FILE or NCCL_HOSTID win).
  if (!options_.topology_file.empty()) {
    std::error_code ec;
    env["NCCL_TOPO_FILE"] = std::filesystem::absolute(options_.topology_file, ec).string();
    char host[256] = {};
    ::gethostname(host, sizeof(host) - 1);
    env["NCCL_HOSTID"] = fmt::format("{}-agent-{}", host, ::getpid());
  }
  if (faults_) {
    if (auto filter = faults_->connect_filter(); !filter.empty()) env["RINGMASTER_CONNECT_FILTER"] = filter;
  }
  // Whole seconds, rounded up.
  auto seconds = [](double s) { return std::to_string(static_cast<long long>(std::ceil(s))); };
  if (request.store_timeout_s) env["RINGMASTER_STORE_TIMEOUT"] = seconds(*request.store_timeout_s);
  if (request.bootstrap_timeout_s) env["RINGMASTER_BOOTSTRAP_TIMEOUT"] = seconds(*request.bootstrap_timeout_s);
  if (request.coll_timeout_s) env["RINGMASTER_COLL_TIMEOUT"] = seconds(*request.coll_timeout_s);
  // NCCL's own names for what the run forces.
  if (request.perf.engine == PerfRequest::Engine::nccl) {
    for (const auto& [k, v] : request.perf.to_nccl_env())
      env[k] = v;
  }
  for (const auto& [k, v] : client_env)
    env[k] = v;
  if (rank_user_.switch_to) {
    env["HOME"] = run_dir;
    env["USER"] = env["LOGNAME"] = rank_user_.name;
  }
  return env;
}

json RunManager::start(const json& m) {
  const RunRequest request = run_request_of(m);
  const PerfRequest& perf = request.perf;
  const std::string& id = request.run_id;
  check_run_id(id);
  const bool nccl = perf.engine == PerfRequest::Engine::nccl;
  if (runs_.count(id)) throw Error(ErrorCategory::config, fmt::format("run {} is already running here", id));
  if (static_cast<int>(runs_.size()) >= options_.max_runs) {
    throw Error(ErrorCategory::config, fmt::format("this agent runs {} runs already (its cap)", runs_.size()));
  }
  if (access(options_.cli_path.c_str(), X_OK) != 0) {
    throw Error(ErrorCategory::config,
                fmt::format("cannot run ranks: {} is not executable ({})", options_.cli_path, strerror(errno)));
  }
  const auto& ranks = request.ranks;
  {
    auto sorted = ranks;
    std::sort(sorted.begin(), sorted.end());
    if (const auto twice = std::adjacent_find(sorted.begin(), sorted.end()); twice != sorted.end()) {
      throw Error(ErrorCategory::config, fmt::format("run.ranks names rank {} twice", *twice));
    }
    std::size_t running = 0;
    for (const auto& [_, other] : runs_)
      running += other->children.size();
    if (running + ranks.size() > static_cast<std::size_t>(options_.max_ranks)) {
      throw Error(ErrorCategory::config, fmt::format("{} more ranks would pass this agent's cap of {} ({} running)",
                                                     ranks.size(), options_.max_ranks, running));
    }
  }
  // The run's own directory: what its file-naming variables name lives here.
  const std::string run_dir = options_.state_dir + "/runs/" + id;
  const auto client_env = checked_run_env(request.env.empty() ? json() : json(request.env), run_dir);
  {
    std::error_code ec;
    std::filesystem::create_directories(run_dir, ec);
    if (ec) throw Error(ErrorCategory::config, fmt::format("cannot create {}: {}", run_dir, ec.message()));
    std::filesystem::permissions(run_dir, std::filesystem::perms::owner_all, ec);
  }
  // The ranks' own: they write what the run's variables name here, and no
  // other run's ranks (another uid) may enter it.
  const RankUser run_user = user_for_a_run();
  if (run_user.switch_to && ::chown(run_dir.c_str(), run_user.uid, run_user.gid) != 0) {
    throw Error(ErrorCategory::config, fmt::format("cannot give {} to uid {} (rank user '{}'): {}", run_dir,
                                                   run_user.uid, run_user.name, strerror(errno)));
  }
  int port = request.master_port;
  const bool has_rank0 = std::find(ranks.begin(), ranks.end(), 0) != ranks.end();
  if (port == 0) {
    if (!has_rank0) {
      throw Error(ErrorCategory::config,
                  "master_port 0 (choose one) needs rank 0 on this agent, which hosts the store");
    }
    port = pick_free_port();
  }
  // The sweep through NCCL runs ringmaster-nccl-perf from beside the CLI
  // (built where the CUDA toolkit carries nccl.h).
  const std::string nccl_perf =
      (std::filesystem::path(options_.cli_path).parent_path() / "ringmaster-nccl-perf").string();
  if (nccl && access(nccl_perf.c_str(), X_OK) != 0) {
    throw Error(ErrorCategory::config,
                fmt::format("engine nccl: this agent has no {} ({}); it is built only where the CUDA toolkit's "
                            "nccl.h is",
                            nccl_perf, strerror(errno)));
  }
  std::vector<std::string> argv_strings = {nccl ? nccl_perf : options_.cli_path};
  for (auto& arg : nccl ? perf.to_nccl_argv() : perf.to_argv())
    argv_strings.push_back(std::move(arg));

  auto run = std::make_shared<Run>();
  run->id = id;
  run->dir = run_dir;
  run->user = run_user;
  give_cgroups(*run);
  const std::map<std::string, std::string> shared = run_environment(request, port, client_env, run_dir);
  json pids = json::array();
  for (std::size_t local = 0; local < ranks.size(); ++local) {
    std::map<std::string, std::string> env = shared;
    env["RANK"] = std::to_string(ranks[local]);
    env["LOCAL_RANK"] = std::to_string(local);
    std::vector<std::string> env_strings;
    for (const auto& [k, v] : env)
      env_strings.push_back(k + "=" + v);
    const Child& child = spawn_child(run, ranks[local], static_cast<int>(local), argv_strings, std::move(env_strings));
    pids.push_back({{"rank", child.rank}, {"pid", child.pid}});
  }
  runs_[id] = run;
  ++started_;
  if (faults_) faults_->run_started(id);

  for (auto& owned : run->children)
    relay(owned.get(), run);
  // A child may have exited before the handler was armed.
  reap();
  return json{{"run_id", id}, {"master_port", port}, {"ranks", pids}};
}

json RunManager::start_watch(const json& m) {
  const WatchRequest request = WatchRequest::parse(m.at("watch"));
  const std::string& id = request.watch_id;
  check_run_id(id);
  if (runs_.count(id)) throw Error(ErrorCategory::config, fmt::format("{} is already running here", id));
  if (static_cast<int>(runs_.size()) >= options_.max_runs) {
    throw Error(ErrorCategory::config,
                fmt::format("this agent runs {} runs and watches already (its cap)", runs_.size()));
  }
  if (access(options_.cli_path.c_str(), X_OK) != 0) {
    throw Error(ErrorCategory::config,
                fmt::format("cannot watch: {} is not executable ({})", options_.cli_path, strerror(errno)));
  }
  // The job's processes as the agent sees them, for whom the watcher runs
  // as: their own user, so it can read what they can and nothing more.
  const JobSelector selector{request.pids, request.job_run_id, request.master_port};
  const std::vector<int> processes = job_processes(selector);
  if (processes.empty()) {
    throw Error(ErrorCategory::config,
                fmt::format("watch {}: no process of the job on this node (a process with RANK in its environment{}){}",
                            id, request.pids.empty() ? " and the job_run_id or master_port given" : " among pids",
                            ::geteuid() == 0 ? "" : "; an agent that is not root sees only its own user's processes"));
  }
  auto run = std::make_shared<Run>();
  run->id = id;
  run->watch = true;
  run->user = process_user(processes, ::geteuid());
  give_cgroups(*run);
  std::vector<std::string> argv = {options_.cli_path};
  for (auto& arg : request.to_argv())
    argv.push_back(std::move(arg));
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e)
    env.emplace_back(*e);
  if (run->user.switch_to) env.push_back("HOME=/");
  const Child& watcher = spawn_child(run, -1, 0, argv, std::move(env));
  runs_[id] = run;
  relay(run->children.front().get(), run);
  reap();
  log::info("watching {} (processes {}) as {} (uid {}), watcher pid {}", id, fmt::join(processes, ", "), run->user.name,
            run->user.uid, watcher.pid);
  return json{{"watch_id", id},
              {"pid", watcher.pid},
              {"user", run->user.name},
              {"uid", run->user.uid},
              {"processes", processes}};
}

void RunManager::cancel(const std::string& run_id) {
  auto it = runs_.find(run_id);
  if (it == runs_.end()) throw Error(ErrorCategory::config, fmt::format("no run {} on this agent", run_id));
  auto run = it->second;
  run->cancelled = true;
  signal_group(*run, SIGTERM);
  for (auto& c : run->children) {
    if (!c->exited) ::kill(c->pid, SIGTERM);
  }
  run->kill_timer = std::make_unique<asio::steady_timer>(io_, options_.cancel_grace);
  run->kill_timer->async_wait([weak = std::weak_ptr<Run>(run)](boost::system::error_code ec) {
    auto r = weak.lock();
    if (ec || !r) return;
    signal_group(*r, SIGKILL);
    for (auto& c : r->children) {
      if (!c->exited) ::kill(c->pid, SIGKILL);
    }
    if (r->cgroup) r->cgroup->kill();
  });
}

void RunManager::kill_all() {
  for (auto& [id, run] : runs_) {
    if (run->cgroup) run->cgroup->kill();
    signal_group(*run, SIGKILL);
    for (auto& c : run->children) {
      if (!c->exited && c->pid > 0) {
        ::kill(c->pid, SIGKILL);
        int status = 0;
        ::waitpid(c->pid, &status, 0);
        c->exited = true;
      }
    }
  }
}

bool RunManager::is_watch(const std::string& id) const {
  const auto it = runs_.find(id);
  return it != runs_.end() && it->second->watch;
}

std::vector<ActiveRun> RunManager::active() const {
  std::vector<ActiveRun> out;
  for (const auto& [id, run] : runs_) {
    ActiveRun& a = out.emplace_back();
    a.run_id = id;
    a.cancelled = run->cancelled;
    a.watch = run->watch;
    for (const auto& c : run->children)
      a.ranks.push_back({c->rank, c->pid, c->exited});
  }
  return out;
}

}  // namespace ringmaster::agent

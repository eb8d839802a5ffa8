// The scenario runner (ringmaster/agent/scenario_runner.h): each scenario
// (resources/scenarios/*.json) builds a small cluster on this machine, one
// network namespace per host, joined by veth pairs to a bridge, addresses in
// 198.18.0.0/24, a real ringmaster-agent in each; breaks it the way clouds
// break (through the agents' fault injection, the ranks' environment, or by
// killing a rank), launches a run, and checks that what Ringmaster reports
// is what the scenario expects. Needs root.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <stop_token>
#include <thread>
#include <type_traits>
#include <variant>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "conntrack_fill.h"
#include "ringmaster/agent/certify.h"
#include "ringmaster/agent/client.h"
#include "ringmaster/agent/command.h"
#include "ringmaster/agent/linkcheck.h"
#include "ringmaster/agent/node_gate.h"
#include "ringmaster/agent/preflight.h"
#include "ringmaster/agent/protocol.h"
#include "ringmaster/agent/requests.h"
#include "ringmaster/agent/scenario.h"
#include "ringmaster/agent/scenario_runner.h"
#include "ringmaster/agent/telemetry.h"
#include "ringmaster/status.h"

namespace ringmaster::agent {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

void must(const std::vector<std::string>& argv) {
  const auto [code, output] = agent::run_command(argv);
  if (code != 0) {
    std::string cmd;
    for (const auto& a : argv)
      cmd += (cmd.empty() ? "" : " ") + a;
    throw Error(ErrorCategory::config, "`" + cmd + "` failed: " + output);
  }
}

// What the scenarios' agents did wrong at exit, said after the catalog;
// scenarios run side by side add to it under the lock.
std::mutex exit_problems_lock;
std::vector<std::string>& agent_exit_problems() {
  static std::vector<std::string> problems;
  return problems;
}
void add_exit_problem(std::string problem) {
  std::lock_guard lock(exit_problems_lock);
  agent_exit_problems().push_back(std::move(problem));
}

// Runs `body` on a thread of its own inside the network namespace
// `name` (setns() moves only the calling thread; this one stays where it
// is): sockets it makes belong to that namespace for good. Throws
// Error(config) when the namespace cannot be entered.
template <class Body>
void in_namespace(const std::string& name, Body&& body) {
  std::string error;
  std::thread([&] {
    const int netns = ::open(("/var/run/netns/" + name).c_str(), O_RDONLY | O_CLOEXEC);
    if (netns < 0 || ::setns(netns, CLONE_NEWNET) != 0) {
      error = fmt::format("cannot enter the namespace {}: {}", name, std::strerror(errno));
      if (netns >= 0) ::close(netns);
      return;
    }
    ::close(netns);
    try {
      body();
    } catch (const Error& e) {
      error = e.status().message();
    }
  }).join();
  if (!error.empty()) throw Error(ErrorCategory::config, error);
}

// Clusters of this process so far: each names its namespaces and veths
// after the process and its number, so that several run side by side.
std::atomic<int> clusters_made{0};

// The hosts of one scenario: namespaces, veths, a bridge, agents. The
// bridge (198.18.0.254) lives in a namespace of its own, the cluster's
// switch, where this process also talks to the agents from: nothing of a
// cluster is in the machine's own namespace, so clusters with the same
// addresses run side by side.
class Cluster {
 public:
  Cluster(int hosts, bool keep) : keep_(keep) {
    id_ = std::to_string(::getpid()) + "c" + std::to_string(clusters_made++);
    switch_ = "rm" + id_ + "s";
    // The agents' token and state, in a directory only we can read.
    std::string dir_template = (fs::temp_directory_path() / "ringmaster-repro-XXXXXX").string();
    if (::mkdtemp(dir_template.data()) == nullptr) {
      throw Error(ErrorCategory::internal, fmt::format("mkdtemp: {}", std::strerror(errno)));
    }
    private_dir_ = dir_template;
    token_file_ = private_dir_ + "/token";
    {
      const int fd = ::open(token_file_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
      const std::string line = agent::random_nonce() + "\n";
      const bool written = fd >= 0 && ::write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size());
      if (fd >= 0) ::close(fd);
      if (!written) throw Error(ErrorCategory::internal, "cannot write the agents' token in " + private_dir_);
    }
    must({"ip", "netns", "add", switch_});
    switch_made_ = true;
    must({"ip", "-n", switch_, "link", "set", "lo", "up"});
    must({"ip", "-n", switch_, "link", "add", "br0", "type", "bridge"});
    must({"ip", "-n", switch_, "addr", "add", "198.18.0.254/24", "dev", "br0"});
    must({"ip", "-n", switch_, "link", "set", "br0", "up"});
    for (int i = 0; i < hosts; ++i) {
      const std::string ns = "rm" + id_ + "h" + std::to_string(i);
      const std::string outside = "rm" + id_ + "v" + std::to_string(i);
      const std::string inside = "rm" + id_ + "p" + std::to_string(i);
      must({"ip", "netns", "add", ns});
      namespaces_.push_back(ns);
      must({"ip", "link", "add", outside, "type", "veth", "peer", "name", inside});
      must({"ip", "link", "set", outside, "netns", switch_});
      must({"ip", "link", "set", inside, "netns", ns});
      must({"ip", "-n", ns, "link", "set", inside, "name", "eth0"});
      must({"ip", "-n", ns, "addr", "add", address(i) + "/24", "dev", "eth0"});
      must({"ip", "-n", ns, "link", "set", "eth0", "up"});
      must({"ip", "-n", ns, "link", "set", "lo", "up"});
      must({"ip", "-n", switch_, "link", "set", outside, "master", "br0"});
      must({"ip", "-n", switch_, "link", "set", outside, "up"});
    }
  }

  ~Cluster() {
    stray_.clear();  // each thread is asked to stop and joined
    for (const int fd : held_)
      ::close(fd);
    clients_.clear();
    for (pid_t pid : agents_)
      ::kill(pid, SIGTERM);
    // Each agent ends within seconds of SIGTERM, and with status 0: one
    // that does not (hung at exit, crashed) is killed and said, and the
    // run of the catalog fails (agent_exit_problems), rather than the
    // runner waiting on it until ctest's limit.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    for (std::size_t i = 0; i < agents_.size(); ++i) {
      int status = 0;
      pid_t done = 0;
      while ((done = ::waitpid(agents_[i], &status, WNOHANG)) == 0 && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      const std::string who = fmt::format("the agent in {} (pid {})", namespaces_[i], agents_[i]);
      if (done == 0) {
        ::kill(agents_[i], SIGKILL);
        ::waitpid(agents_[i], &status, 0);
        add_exit_problem(who + " did not exit within 10 s of SIGTERM; killed");
      } else if (WIFSIGNALED(status)) {
        add_exit_problem(fmt::format("{} was killed by signal {} at exit", who, WTERMSIG(status)));
      } else if (WIFEXITED(status) && WEXITSTATUS(status) != 0) {
        add_exit_problem(fmt::format("{} exited with status {} on SIGTERM", who, WEXITSTATUS(status)));
      }
    }
    // The agents' cgroups, once empty: the leaves their agents moved into
    // first (their runs' went with the runs).
    for (const auto& dir : agent_cgroups_) {
      std::error_code ec;
      for (const auto& entry : fs::directory_iterator(dir, ec)) {
        if (entry.is_directory(ec)) ::rmdir(entry.path().c_str());
      }
      ::rmdir(dir.c_str());
    }
    if (keep_) return;
    // The outside end first: deleting it removes the pair at once, while a
    // namespace's own devices go only when the kernel gets round to it.
    for (std::size_t i = 0; i < namespaces_.size(); ++i) {
      agent::run_command({"ip", "-n", switch_, "link", "del", "rm" + id_ + "v" + std::to_string(i)});
    }
    for (const auto& ns : namespaces_) {
      agent::run_command({"ip", "netns", "del", ns});
    }
    for (const auto& dir : etc_dirs_) {
      std::error_code ec;
      fs::remove_all(dir, ec);
    }
    if (switch_made_) agent::run_command({"ip", "netns", "del", switch_});
    std::error_code ec;
    fs::remove_all(private_dir_, ec);
  }

  static std::string address(int host) { return "198.18.0." + std::to_string(host + 1); }
  static std::string host_name(int host) { return "host" + std::to_string(host); }

  // Each host's /etc/hosts and /etc/resolv.conf, as `ip netns exec` shows
  // them to what runs there (files in /etc/netns/<namespace>/): `lines`
  // on every host but those in `missing_on`, and no reachable DNS server,
  // so a name that is not in the file fails at once.
  // `lines_on`: more lines on some hosts only (a host's own name, as its
  // image wrote it).
  void write_resolver_files(const std::vector<std::string>& lines, const std::vector<int>& missing_on,
                            const std::map<int, std::vector<std::string>>& lines_on) {
    for (std::size_t i = 0; i < namespaces_.size(); ++i) {
      const fs::path dir = fs::path("/etc/netns") / namespaces_[i];
      fs::create_directories(dir);
      etc_dirs_.push_back(dir.string());
      std::ofstream hosts(dir / "hosts");
      hosts << "127.0.0.1 localhost\n";
      if (const auto own = lines_on.find(static_cast<int>(i)); own != lines_on.end()) {
        for (const auto& l : own->second)
          hosts << l << "\n";
      }
      if (std::find(missing_on.begin(), missing_on.end(), static_cast<int>(i)) == missing_on.end()) {
        for (const auto& l : lines)
          hosts << l << "\n";
      }
      std::ofstream(dir / "resolv.conf") << "nameserver 127.0.0.1\noptions timeout:1 attempts:1\n";
    }
  }
  const std::string& ns(int host) const { return namespaces_.at(static_cast<std::size_t>(host)); }

  // The host's interface carries `mtu` while the bridge's ports stay at
  // 1500: a hop that drops larger frames without a word, as a switch
  // does. Each TCP segment leaves as one frame (gso_max_segs 1), as a NIC
  // with segmentation offload puts them on the wire; a veth would
  // otherwise hand the bridge whole 64 KiB bursts, which it lets through.
  void set_mtu(int host, int mtu) {
    must({"ip", "-n", ns(host), "link", "set", "eth0", "mtu", std::to_string(mtu)});
    must({"ip", "-n", ns(host), "link", "set", "eth0", "gso_max_segs", "1"});
  }

  // Variables the host's agent starts with, as a node's unit or image
  // sets them; its ranks inherit them.
  void set_agent_env(int host, const std::string& name, const std::string& value) { agent_env_[host][name] = value; }

  // On a host whose cgroup2 has the memory controller: a cgroup for the
  // host's agent below the root, its cgroup.procs open to join (-1
  // elsewhere).
  int own_cgroup(int host) {
    std::ifstream controllers("/sys/fs/cgroup/cgroup.controllers");
    std::string c;
    while (controllers >> c && c != "memory") {
    }
    if (c != "memory") return -1;
    const std::string dir = "/sys/fs/cgroup/ringmaster-repro-" + id_ + "-h" + std::to_string(host);
    if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) return -1;
    agent_cgroups_.push_back(dir);
    return ::open((dir + "/cgroup.procs").c_str(), O_WRONLY | O_CLOEXEC);
  }

  // This process's environment with the host's agent_env over it.
  std::vector<std::string> agent_environment(int host) const {
    std::map<std::string, std::string> vars;
    for (char** e = environ; *e != nullptr; ++e) {
      const std::string entry(*e);
      const auto eq = entry.find('=');
      if (eq != std::string::npos) vars[entry.substr(0, eq)] = entry.substr(eq + 1);
    }
    if (const auto it = agent_env_.find(host); it != agent_env_.end()) {
      for (const auto& [k, v] : it->second)
        vars[k] = v;
    }
    std::vector<std::string> out;
    for (const auto& [k, v] : vars)
      out.push_back(k + "=" + v);
    return out;
  }

  void set_sysctl(int host, const std::string& key, const std::string& value) {
    must({"ip", "netns", "exec", ns(host), "sysctl", "-q", "-w", key + "=" + value});
  }

  // A TCP connection from `port` on `host` to the next host's agent, held
  // until the cluster goes: what an outbound connection that the kernel
  // handed that port does to a process that wants to listen there.
  void hold_outbound_port(int host, std::uint16_t port) {
    const int to = (host + 1) % static_cast<int>(namespaces_.size());
    int fd = -1;
    in_namespace(ns(host), [&] {
      fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      sockaddr_in local{};
      local.sin_family = AF_INET;
      local.sin_port = htons(port);
      sockaddr_in remote{};
      remote.sin_family = AF_INET;
      remote.sin_port = htons(29600);
      ::inet_pton(AF_INET, address(to).c_str(), &remote.sin_addr);
      if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&local), sizeof(local)) != 0 ||
          ::connect(fd, reinterpret_cast<sockaddr*>(&remote), sizeof(remote)) != 0) {
        const std::string why = std::strerror(errno);
        if (fd >= 0) ::close(fd);
        throw Error(ErrorCategory::config,
                    fmt::format("an outbound connection from port {} on host {}: {}", port, host, why));
      }
    });
    held_.push_back(fd);
  }

  // Unrelated traffic at `ports` of the `targets` hosts until the cluster
  // goes, from the bridge (198.18.0.254) as from a port scanner or a stray
  // client elsewhere on the network. Each connection, in turn: closed at
  // once, 64 random bytes, an HTTP request, a TLS ClientHello's first
  // bytes, or held open and silent (at most 16 held at a time).
  void start_stray_traffic(std::vector<int> targets, std::vector<std::uint16_t> ports) {
    stray_.emplace_back([this, targets = std::move(targets), ports = std::move(ports)](std::stop_token stop) {
      // From the switch, where 198.18.0.254 is.
      const int netns = ::open(("/var/run/netns/" + switch_).c_str(), O_RDONLY | O_CLOEXEC);
      const bool entered = netns >= 0 && ::setns(netns, CLONE_NEWNET) == 0;
      if (netns >= 0) ::close(netns);
      if (!entered) return;
      std::deque<int> silent;
      std::mt19937 random{std::random_device{}()};
      const std::string http = "GET / HTTP/1.1\r\nHost: scanner\r\n\r\n";
      const std::string tls("\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03", 11);
      for (std::uint64_t n = 0; !stop.stop_requested(); ++n) {
        const int host = targets[n % targets.size()];
        const std::uint16_t port = ports[(n / targets.size()) % ports.size()];
        const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        sockaddr_in to{};
        to.sin_family = AF_INET;
        to.sin_port = htons(port);
        ::inet_pton(AF_INET, address(host).c_str(), &to.sin_addr);
        pollfd p{fd, POLLOUT, 0};
        int err = 0;
        socklen_t len = sizeof(err);
        const bool connected = fd >= 0 && (::connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof(to)) == 0 ||
                                           (errno == EINPROGRESS && ::poll(&p, 1, 200) == 1 &&
                                            ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err == 0));
        if (connected) {
          ++stray_connections_;
          std::string say;
          switch (n % 5) {
            case 1:
              say.resize(64);
              for (char& c : say)
                c = static_cast<char>(random());
              break;
            case 2:
              say = http;
              break;
            case 3:
              say = tls;
              break;
            default:
              break;
          }
          if (!say.empty()) (void)!::send(fd, say.data(), say.size(), MSG_NOSIGNAL);
          if (n % 5 == 4) {
            silent.push_back(fd);
            if (silent.size() > 16) {
              ::close(silent.front());
              silent.pop_front();
            }
            continue;
          }
        }
        if (fd >= 0) ::close(fd);
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
      for (const int fd : silent)
        ::close(fd);
    });
  }
  int stray_connections() const { return stray_connections_.load(); }

  // Starts each host's agent and connects to it from this namespace.
  void start_agents(const std::string& agent_path, const agent::AgentClient::MessageHandler& on_message) {
    // The ranks run as whoever runs the scenarios, as they would without agents.
    const std::string rank_user = agent::effective_user_name();
    for (std::size_t i = 0; i < namespaces_.size(); ++i) {
      // Everything the child needs is made before the fork: the client
      // threads of the hosts started so far may hold the allocator's lock.
      // A host name of its own, as each node of a cluster has: the ranks
      // tell hosts apart by it (NCCL does too).
      const std::string name = host_name(static_cast<int>(i));
      // Plain TCP: the bridge joins namespaces of this host and nothing else.
      // `ip netns exec` gives the agent a sysfs of its namespace, without
      // the host's cgroup mounts: the host's cgroup v1 memory hierarchy,
      // else its cgroup2, is mounted again there (in the agent's mount
      // namespace only), so that memory_limit faults and OOM kills read
      // as on a node. On cgroup2 each agent starts in a cgroup of its own,
      // as a node's agent has, so that it can hand the memory controller
      // down to its runs.
      const int cgroup_procs = own_cgroup(static_cast<int>(i));
      const std::vector<std::string> args = {"ip",
                                             "netns",
                                             "exec",
                                             namespaces_[i],
                                             "/bin/sh",
                                             "-c",
                                             "mount -t cgroup -o memory ringmaster-memory /sys/fs/cgroup 2>/dev/null "
                                             "|| mount -t cgroup2 ringmaster-cgroup2 /sys/fs/cgroup 2>/dev/null; "
                                             "exec \"$0\" \"$@\"",
                                             agent_path,
                                             "--listen",
                                             address(static_cast<int>(i)) + ":29600",
                                             "--token-file",
                                             token_file_,
                                             "--state-dir",
                                             private_dir_ + "/host" + std::to_string(i),
                                             "--allow-fault-injection",
                                             "--allow-plaintext",
                                             "--print-port",
                                             "--rank-user",
                                             rank_user};
      const std::vector<std::string> env = agent_environment(static_cast<int>(i));
      std::vector<char*> argv, envp;
      for (const auto& a : args)
        argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      for (const auto& e : env)
        envp.push_back(const_cast<char*>(e.c_str()));
      envp.push_back(nullptr);
      int out[2];
      if (::pipe(out) != 0) throw Error(ErrorCategory::internal, "pipe failed");
      const pid_t pid = ::fork();
      if (pid == 0) {
        ::dup2(out[1], 1);
        ::close(out[0]);
        if (::unshare(CLONE_NEWUTS) != 0 || ::sethostname(name.data(), name.size()) != 0) _exit(126);
        if (cgroup_procs >= 0 && ::write(cgroup_procs, "0", 1) != 1) _exit(125);
        ::execvpe("ip", argv.data(), envp.data());
        _exit(127);
      }
      ::close(out[1]);
      if (cgroup_procs >= 0) ::close(cgroup_procs);
      agents_.push_back(pid);
      char c = 0;
      std::string line;
      while (::read(out[0], &c, 1) == 1 && c != '\n')
        line += c;
      ::close(out[0]);
      if (line.empty()) throw Error(ErrorCategory::config, "the agent in " + namespaces_[i] + " did not start");
      agent::ClientOptions options;
      options.host = address(static_cast<int>(i));
      options.port = 29600;
      options.token = agent::read_token_file(token_file_);
      // A scenario may cut a host's link for seconds (link-flap), and the
      // agent's connection shares it: the run goes on, so does the watch.
      options.silence_limit = std::chrono::seconds(20);
      std::unique_ptr<agent::AgentClient> client;
      in_namespace(switch_, [&] { client = agent::AgentClient::connect(options, on_message); });
      client->call({{"type", "subscribe"}});
      clients_.push_back(std::move(client));
    }
  }

  agent::AgentClient& client(int host) { return *clients_.at(static_cast<std::size_t>(host)); }

 private:
  bool keep_;
  std::string id_, switch_, token_file_, private_dir_;
  bool switch_made_ = false;
  std::vector<std::string> namespaces_;
  std::vector<std::string> etc_dirs_;  // /etc/netns/<namespace>
  std::map<int, std::map<std::string, std::string>> agent_env_;
  std::vector<std::string> agent_cgroups_;  // own_cgroup's
  std::vector<pid_t> agents_;
  std::vector<std::unique_ptr<agent::AgentClient>> clients_;
  std::vector<int> held_;  // sockets of hold_outbound_port
  std::atomic<int> stray_connections_{0};
  std::vector<std::jthread> stray_;  // start_stray_traffic's; last, so it stops first
};

struct Inbox {
  std::mutex mutex;
  std::condition_variable cv;
  std::deque<json> messages;
};

using Verdict = ScenarioVerdict;

// The process a namespace or device of the runner's is named after
// ("rm<pid>c<cluster>h<host>", "rm<pid>c<cluster>s", and "rm<pid>h<host>"
// of earlier versions), or 0 when the name is not of that form.
int owner_of(const std::string& name) {
  if (name.rfind("rm", 0) != 0) return 0;
  std::size_t end = 2;
  while (end < name.size() && name[end] >= '0' && name[end] <= '9')
    ++end;
  if (end == 2 || end == name.size() || (name[end] != 'c' && name[end] != 'h')) return 0;
  return std::atoi(name.substr(2, end - 2).c_str());
}

// Removes what runs killed before their cleanup left behind: namespaces
// (hosts and switches) and resolver files named after processes that no
// longer exist, and the bridges rmbr<pid> of earlier versions.
void remove_leftovers_of_dead() {
  auto dead = [](int pid) { return pid > 0 && ::kill(pid, 0) != 0 && errno == ESRCH; };
  const auto [code, namespaces] = agent::run_command({"ip", "netns", "list"});
  std::istringstream ns_lines(namespaces);
  for (std::string line; std::getline(ns_lines, line);) {
    const std::string name = line.substr(0, line.find(' '));
    if (dead(owner_of(name))) agent::run_command({"ip", "netns", "del", name});
  }
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator("/etc/netns", ec)) {
    if (dead(owner_of(entry.path().filename().string()))) fs::remove_all(entry.path(), ec);
  }
  const auto [code2, links] = agent::run_command({"ip", "-o", "link", "show", "type", "bridge"});
  std::istringstream link_lines(links);
  for (std::string line; std::getline(link_lines, line);) {
    const auto at = line.find("rmbr");
    if (at == std::string::npos) continue;
    const std::string name = line.substr(at, line.find(':', at) - at);
    if (dead(std::atoi(name.substr(4).c_str()))) agent::run_command({"ip", "link", "del", name});
  }
}

// What of ours is still there: namespaces, veths, resolver files and
// cgroups of this process's clusters.
std::vector<std::string> our_leftovers() {
  std::vector<std::string> out;
  const int me = ::getpid();
  const std::string mine = "rm" + std::to_string(me);
  const auto [c1, namespaces] = agent::run_command({"ip", "netns", "list"});
  std::istringstream ns_lines(namespaces);
  for (std::string line; std::getline(ns_lines, line);) {
    const std::string name = line.substr(0, line.find(' '));
    if (owner_of(name) == me) out.push_back("namespace " + name);
  }
  const auto [c2, links] = agent::run_command({"ip", "-o", "link", "show"});
  if (links.find(mine + "c") != std::string::npos) out.push_back("a veth " + mine + "c*");
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator("/etc/netns", ec)) {
    if (owner_of(entry.path().filename().string()) == me) out.push_back("resolver files " + entry.path().string());
  }
  for (const auto& entry : fs::directory_iterator("/sys/fs/cgroup", ec)) {
    if (entry.path().filename().string().rfind("ringmaster-repro-" + std::to_string(me) + "c", 0) == 0)
      out.push_back("cgroup " + entry.path().string());
  }
  // The memory cgroups the agents made for memory_limit faults, below
  // this process's in the v1 memory hierarchy ("N:memory:/path").
  std::ifstream cgroups("/proc/self/cgroup");
  for (std::string line; std::getline(cgroups, line);) {
    const auto at = line.find(":memory:");
    if (at == std::string::npos) continue;
    for (const auto& entry : fs::directory_iterator("/sys/fs/cgroup/memory" + line.substr(at + 8), ec)) {
      const std::string name = entry.path().filename().string();
      if (name.rfind("ringmaster-", 0) == 0 && name.find("-repro-") != std::string::npos)
        out.push_back("memory cgroup " + entry.path().string());
    }
  }
  return out;
}

// Sends each host the scenario's faults; `say` puts each in the report.
// False (v.skipped set) when a fault could only be stood in for.
bool apply_faults(Cluster& cluster, const agent::Scenario& s, int hosts, Verdict& v, bool say) {
  for (const auto& f : s.faults) {
    for (int h = 0; h < hosts; ++h) {
      if (!f.on(h)) continue;
      json reply;
      try {
        reply = cluster.client(h).call({{"type", "fault"}, {"fault", agent::to_json(f.fault)}});
      } catch (const Error& e) {
        // A host without a memory cgroup the agent may make (cgroup v2
        // whose controller is not handed down to the agent) cannot stage
        // a memory limit for real.
        if (!std::holds_alternative<agent::MemoryLimit>(f.fault)) throw;
        v.skipped = std::string("the agent cannot limit its ranks' memory here: ") + e.what();
        return false;
      }
      if (say) {
        v.report.push_back("host " + std::to_string(h) + ": fault: " + agent::describe(f.fault) + ", via " +
                           reply.value("mechanism", "?"));
      }
      // The engine's connect filter stands in for a firewall only inside
      // the ranks' own process: a scenario about what the network does
      // would pass on it by construction, so it is not run at all.
      if (reply.value("mechanism", "") == "connect_filter") {
        v.skipped = "the agent could not drop packets with nftables (" + reply.value("note", std::string("?")) +
                    "); a stand-in inside the ranks would prove nothing";
        return false;
      }
    }
  }
  return true;
}

// The agents' messages, one at a time, for a link check or certify.
agent::NextMessage next_message(const std::shared_ptr<Inbox>& inbox) {
  return [inbox](std::chrono::steady_clock::time_point deadline) -> std::optional<json> {
    std::unique_lock lock(inbox->mutex);
    if (!inbox->cv.wait_until(lock, deadline, [&] { return !inbox->messages.empty(); })) return std::nullopt;
    json m = std::move(inbox->messages.front());
    inbox->messages.pop_front();
    return m;
  };
}

// "preflight": before the run, as a person bringing the cluster up would,
// a preflight over the scenario's agents (with the run's MASTER_ADDR,
// MASTER_PORT and NCCL_SOCKET_IFNAME): one problem finding holds every
// keyword, and each listed cell of a class's matrix is as given.
void check_preflight(Cluster& cluster, int hosts, const json& run_spec, const json& want, Verdict& v) {
  std::vector<agent::PreflightAgent> agents;
  for (int h = 0; h < hosts; ++h)
    agents.push_back({&cluster.client(h), Cluster::address(h)});
  agent::PreflightOptions options;
  options.master_addr = run_spec.value("master_addr", Cluster::address(0));
  options.master_port = run_spec.value("master_port", std::uint16_t{29500});
  const json env = run_spec.value("env", json::object());
  options.socket_ifname = env.value("NCCL_SOCKET_IFNAME", "");
  options.port_range = env.value("RINGMASTER_PORT_RANGE", "");
  const PreflightReport report = agent::run_preflight(agents, options);
  const auto findings = diagnose_preflight(report);
  v.report.push_back(fmt::format("preflight over {} hosts took {:.1f} s", hosts, report.seconds));
  for (const auto& f : findings) {
    if (f.severity == PreflightFinding::Severity::problem) v.report.push_back("preflight: " + f.text);
  }
  auto fail = [&](std::string why) {
    v.passed = false;
    v.reasons.push_back(std::move(why));
  };
  std::vector<std::string> keywords = want.value("keywords", std::vector<std::string>{});
  const bool found = std::any_of(findings.begin(), findings.end(), [&](const PreflightFinding& f) {
    return f.severity == PreflightFinding::Severity::problem &&
           std::all_of(keywords.begin(), keywords.end(),
                       [&](const std::string& k) { return f.text.find(k) != std::string::npos; });
  });
  if (!found) fail(fmt::format("no preflight problem mentions every one of: {}", fmt::join(keywords, " | ")));
  for (const auto& c : want.value("cells", json::array())) {
    const std::string cls = c.value("class", ""), expected = c.value("reach", "");
    const int from = c.value("from", 0), to = c.value("to", 0);
    const std::string got = report.cell_text(from, to, cls);
    if (got != expected) {
      fail(fmt::format("preflight {} host {} -> host {} was {}, expected {}", cls, from, to, got, expected));
    }
  }
}

// "linkcheck": before the run, a link check over the scenario's agents
// (with the run's environment); one of its findings holds every keyword.
void check_linkcheck(Cluster& cluster, int hosts, const json& run_spec, const json& want,
                     const std::shared_ptr<Inbox>& inbox, const std::function<void()>& before_round, Verdict& v) {
  std::vector<agent::PreflightAgent> agents;
  for (int h = 0; h < hosts; ++h)
    agents.push_back({&cluster.client(h), Cluster::address(h)});
  agent::LinkcheckOptions options;
  options.bytes = want.value("bytes", std::string("2M"));
  options.iters = want.value("iters", 3);
  options.before_round = [&](int) { before_round(); };
  const json env = run_spec.value("env", json::object());
  for (const auto& [k, value] : env.items())
    options.env[k] = value.get<std::string>();
  const agent::NextMessage next = next_message(inbox);
  const auto report = agent::run_linkcheck(agents, next, options);
  const auto findings = agent::diagnose_links(report);
  std::string rates;
  for (const auto& l : report.links)
    rates += fmt::format("{}{}->{} {:.1f} MB/s", rates.empty() ? "" : ", ", l.from, l.to, l.gbs * 1000);
  v.report.push_back(fmt::format("link check over {} hosts took {:.1f} s: {}", hosts, report.seconds, rates));
  for (const auto& f : findings)
    v.report.push_back("link check: " + f);
  const auto keywords = want.value("keywords", std::vector<std::string>{});
  const bool found = std::any_of(findings.begin(), findings.end(), [&](const std::string& f) {
    return std::all_of(keywords.begin(), keywords.end(),
                       [&](const std::string& k) { return f.find(k) != std::string::npos; });
  });
  if (!found) {
    v.passed = false;
    v.reasons.push_back(fmt::format("no link check finding mentions every one of: {}", fmt::join(keywords, " | ")));
  }
}

// "certify": before the run, `certify` over the scenario's agents (with
// the run's environment): exactly the nodes of `isolate_nodes` isolated,
// each link of `isolate_links` isolated and no other link between nodes
// still in, within `within_s`.
void check_certify(Cluster& cluster, int hosts, const json& run_spec, const json& want,
                   const std::shared_ptr<Inbox>& inbox, const std::function<void()>& before_run, Verdict& v) {
  std::vector<agent::PreflightAgent> agents;
  for (int h = 0; h < hosts; ++h)
    agents.push_back({&cluster.client(h), Cluster::address(h)});
  agent::CertifyOptions options;
  options.preflight.master_port = run_spec.value("master_port", std::uint16_t{29500});
  options.linkcheck.bytes = want.value("link_bytes", std::string("2M"));
  options.linkcheck.iters = want.value("link_iters", 3);
  options.min_bytes = want.value("min_bytes", std::string("1M"));
  options.max_bytes = want.value("max_bytes", std::string("4M"));
  options.iters = want.value("iters", 3);
  options.before_run = before_run;
  const json env = run_spec.value("env", json::object());
  for (const auto& [k, value] : env.items())
    options.env[k] = value.get<std::string>();
  const agent::NextMessage next = next_message(inbox);
  const agent::CertifyReport report = agent::certify(agents, next, options);
  const std::string text = agent::render_certify(report);
  for (std::size_t at = 0; at < text.size();) {
    const std::size_t end = std::min(text.find('\n', at), text.size());
    if (end > at) v.report.push_back("certify: " + text.substr(at, end - at));
    at = end + 1;
  }
  auto fail = [&](std::string why) {
    v.passed = false;
    v.reasons.push_back(std::move(why));
  };
  const auto want_nodes = want.value("isolate_nodes", std::set<int>{});
  std::set<int> isolated;
  for (std::size_t i = 0; i < report.nodes.size(); ++i) {
    if (report.nodes[i].verdict == agent::Verdict::isolate) isolated.insert(static_cast<int>(i));
  }
  if (isolated != want_nodes)
    fail(fmt::format("certify isolated node(s) [{}], expected [{}]", fmt::join(isolated, ", "),
                     fmt::join(want_nodes, ", ")));
  std::set<std::pair<int, int>> want_links;
  for (const auto& l : want.value("isolate_links", json::array()))
    want_links.insert({l.at(0).get<int>(), l.at(1).get<int>()});
  std::set<std::pair<int, int>> links;
  for (const auto& l : report.links) {
    if (l.verdict == agent::Verdict::isolate && !isolated.count(l.from) && !isolated.count(l.to))
      links.insert({l.from, l.to});
  }
  if (links != want_links) {
    std::vector<std::string> got, expected;
    for (const auto& [a, b] : links)
      got.push_back(fmt::format("{}->{}", a, b));
    for (const auto& [a, b] : want_links)
      expected.push_back(fmt::format("{}->{}", a, b));
    fail(fmt::format("certify isolated link(s) [{}] between nodes still in, expected [{}]", fmt::join(got, ", "),
                     fmt::join(expected, ", ")));
  }
  const double within_s = want.value("within_s", 0.0);
  if (within_s > 0 && report.seconds > within_s)
    fail(fmt::format("certify took {:.1f} s, over {:.0f} s", report.seconds, within_s));
}

// The scenario's run as the agents read it (its ranks and environment
// per host come later): a bad field of the file is named before any agent
// is asked.
agent::RunRequest scenario_run(const json& run_spec, const std::string& run_id, int world) {
  agent::RunRequest run;
  run.run_id = run_id;
  run.world_size = world;
  run.master_addr = run_spec.value("master_addr", Cluster::address(0));
  run.master_port = run_spec.value("master_port", 29500);
  run.perf = agent::PerfRequest::parse(
      run_spec.value(
          "perf",
          json{{"collective", "all_reduce"}, {"min_bytes", "1K"}, {"max_bytes", "1K"}, {"iters", 2}, {"warmup", 1}}),
      "the scenario's run.perf");
  const json timeouts = run_spec.value("timeouts", json{{"store_s", 5}, {"bootstrap_s", 5}, {"coll_s", 10}});
  if (timeouts.contains("store_s")) run.store_timeout_s = timeouts["store_s"].get<double>();
  if (timeouts.contains("bootstrap_s")) run.bootstrap_timeout_s = timeouts["bootstrap_s"].get<double>();
  if (timeouts.contains("coll_s")) run.coll_timeout_s = timeouts["coll_s"].get<double>();
  return run;
}

// What a scenario does to its run once data moves (`action`): kill a
// rank; stop one (SIGSTOP) until a stall report is in, or kUnfreezeAfter
// without one, so the run can end; take a host's link down for a while
// (`flap`: {"host": 1, "down_s": 2}).
class ScenarioAction {
 public:
  ScenarioAction(const json& action, Cluster& cluster, std::map<int, int>& pid_of, Verdict& v)
      : cluster_(cluster), pid_of_(pid_of), v_(v) {
    kill_rank_ = action.value("kill_rank", -1);
    freeze_rank_ = action.value("freeze_rank", -1);
    const json flap = action.value("flap", json::object());
    flap_host_ = flap.value("host", -1);
    flap_down_ = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(flap.value("down_s", 0.0)));
  }
  ~ScenarioAction() {
    thaw("as the scenario ends");
    link_up();
  }

  void data_moves() {
    if (freeze_rank_ >= 0 && !frozen_at_) {
      frozen_at_ = Clock::now();
      ::kill(pid_of_[freeze_rank_], SIGSTOP);
      v_.report.push_back(
          fmt::format("stopped rank {} (pid {}, SIGSTOP) once data moved", freeze_rank_, pid_of_[freeze_rank_]));
    } else if (kill_rank_ >= 0 && !killed_) {
      killed_ = true;
      ::kill(pid_of_[kill_rank_], SIGKILL);
      v_.report.push_back(fmt::format("killed rank {} (pid {}) once data moved", kill_rank_, pid_of_[kill_rank_]));
    } else if (flap_host_ >= 0 && !down_at_) {
      down_at_ = Clock::now();
      must({"ip", "-n", cluster_.ns(flap_host_), "link", "set", "eth0", "down"});
      v_.report.push_back(fmt::format("took host {}'s eth0 down once data moved", flap_host_));
    }
  }
  // Every wake of the collecting loop.
  void tick() {
    if (frozen_at_ && Clock::now() - *frozen_at_ > kUnfreezeAfter) thaw("after 30 s without a stall report");
    if (down_at_ && Clock::now() - *down_at_ >= flap_down_) link_up();
  }
  void thaw(const char* why) {
    if (!frozen_at_ || thawed_) return;
    thawed_ = true;
    ::kill(pid_of_[freeze_rank_], SIGCONT);
    v_.report.push_back(fmt::format("continued rank {} {}", freeze_rank_, why));
  }
  // Since the SIGSTOP, for stall reports; nothing without one.
  std::optional<double> since_stop_s() const {
    if (!frozen_at_) return std::nullopt;
    return std::chrono::duration<double>(Clock::now() - *frozen_at_).count();
  }

 private:
  using Clock = std::chrono::steady_clock;
  static constexpr auto kUnfreezeAfter = std::chrono::seconds(30);
  void link_up() {
    if (!down_at_ || up_) return;
    up_ = true;
    agent::run_command({"ip", "-n", cluster_.ns(flap_host_), "link", "set", "eth0", "up"});
    v_.report.push_back(fmt::format("brought host {}'s eth0 back up after {:.1f} s", flap_host_,
                                    std::chrono::duration<double>(Clock::now() - *down_at_).count()));
  }
  Cluster& cluster_;
  std::map<int, int>& pid_of_;
  Verdict& v_;
  int kill_rank_ = -1, freeze_rank_ = -1, flap_host_ = -1;
  Clock::duration flap_down_{};
  bool killed_ = false, thawed_ = false, up_ = false;
  std::optional<Clock::time_point> frozen_at_, down_at_;
};

// Before the agents start: the hosts' resolver files and setup steps
// (MTU, sysctls) as the scenario has them.
void prepare_hosts(Cluster& cluster, const agent::Scenario& s, Verdict& v) {
  const int hosts = s.hosts;
  if (!s.resolver.is_null()) {
    std::map<int, std::vector<std::string>> lines_on;
    for (const auto& on : s.resolver.value("hosts_lines_on", json::array())) {
      for (const int h : on.value("hosts", std::vector<int>{}))
        lines_on[h] = on.value("lines", std::vector<std::string>{});
    }
    cluster.write_resolver_files(s.resolver.value("hosts_lines", std::vector<std::string>{}),
                                 s.resolver.value("missing_on", std::vector<int>{}), lines_on);
  }
  for (const auto& step : s.setup) {
    std::vector<int> on = step.value("hosts", std::vector<int>{});
    if (on.empty()) {
      for (int h = 0; h < hosts; ++h)
        on.push_back(h);
    }
    for (const int h : on) {
      if (step.contains("mtu")) {
        cluster.set_mtu(h, step["mtu"].get<int>());
        v.report.push_back(fmt::format("host {}: eth0 MTU {}, the bridge's ports 1500", h, step["mtu"].get<int>()));
      }
      if (step.contains("address")) {
        const std::string a = step["address"].get<std::string>();
        must({"ip", "-n", cluster.ns(h), "addr", "add", a, "dev", "eth0", "nodad"});
        v.report.push_back(fmt::format("host {}: eth0 also has {}", h, a));
      }
      if (step.contains("conntrack_full")) {
        // A stateful firewall, as a node has one: every packet of the
        // namespace is tracked from here on (the table fills once the
        // agents run).
        must({"ip", "netns", "exec", cluster.ns(h), "nft",
              "add table inet ringmaster-stateful; add chain inet ringmaster-stateful input { type filter hook input "
              "priority 0; policy accept; ct state established,related accept; }"});
        v.report.push_back(fmt::format("host {}: a stateful firewall (ct state established,related accept)", h));
      }
      const json agent_env = step.value("agent_env", json::object());
      for (const auto& [name, value] : agent_env.items()) {
        cluster.set_agent_env(h, name, value.get<std::string>());
        v.report.push_back(fmt::format("host {}: the agent starts with {}={}", h, name, value.get<std::string>()));
      }
      const json sysctls = step.value("sysctl", json::object());
      for (const auto& [key, value] : sysctls.items()) {
        cluster.set_sysctl(h, key, value.get<std::string>());
        v.report.push_back(fmt::format("host {}: {} = {}", h, key, value.get<std::string>()));
      }
    }
  }
}

// Once the agents run: the setup steps that need a peer to talk to.
// False (v.skipped set) when a step cannot be staged on this machine.
bool hold_ports(Cluster& cluster, const agent::Scenario& s, Verdict& v) {
  for (const auto& step : s.setup) {
    if (step.contains("stray_traffic")) {
      std::vector<int> on = step.value("hosts", std::vector<int>{});
      if (on.empty()) {
        for (int h = 0; h < s.hosts; ++h)
          on.push_back(h);
      }
      const std::string ports = step["stray_traffic"]["ports"].get<std::string>();
      cluster.start_stray_traffic(on, *agent::parse_port_list(ports));
      v.report.push_back(fmt::format("198.18.0.254: stray connections to ports {} of host(s) {} until the run ends",
                                     ports, fmt::join(on, ", ")));
    }
    if (step.contains("conntrack_full")) {
      for (const int h : step.value("hosts", std::vector<int>{0})) {
        const auto started = std::chrono::steady_clock::now();
        ConntrackFill fill;
        in_namespace(cluster.ns(h), [&] { fill = fill_conntrack_table(); });
        if (!fill.cannot.empty()) {
          v.skipped = "cannot fill a connection-tracking table here: " + fill.cannot;
          return false;
        }
        v.report.push_back(fmt::format(
            "host {}: connection-tracking table filled with {} established connections in {:.1f} s ({} of {} "
            "entries)",
            h, fill.inserted, std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count(),
            fill.count, fill.max));
      }
    }
    if (!step.contains("outbound_from_port")) continue;
    for (const int h : step.value("hosts", std::vector<int>{0})) {
      const auto port = step["outbound_from_port"].get<std::uint16_t>();
      cluster.hold_outbound_port(h, port);
      v.report.push_back(fmt::format("host {}: an outbound connection holds local port {}", h, port));
    }
  }
  return true;
}

// Before the run: the node gate over the inventories of the hosts with
// ranks, as every launcher asks it. True when the scenario ends here: the
// gate refused (as expected, or not), or let through a run the scenario
// expects refused.
bool gate_refuses(Cluster& cluster, const agent::Scenario& s, const agent::RunRequest& run, Verdict& v) {
  std::vector<agent::Inventory> nodes;
  const auto placement = s.placement();
  for (int h = 0; h < s.hosts; ++h) {
    if (std::find(placement.begin(), placement.end(), h) != placement.end())
      nodes.push_back(agent::Inventory::parse(cluster.client(h).call({{"type", "inventory"}})));
  }
  const agent::NodeGate gate = agent::check_nodes_alike(nodes, run.perf.engine);
  for (const auto& note : gate.notes)
    v.report.push_back("node gate: " + note);
  const bool expected = s.expect.value("outcome", "fail") == "refused";
  if (gate.passed()) {
    if (!expected) return false;
    v.passed = false;
    v.reasons.push_back("expected the node gate to refuse the run before launch; it let it go ahead");
    return true;
  }
  const std::string refusal = gate.refusal("launch with --allow-mixed-nodes");
  v.report.push_back(refusal);
  if (!expected) {
    v.passed = false;
    v.reasons.push_back("the node gate refused the run: " + refusal);
    return true;
  }
  for (const auto& k : s.expect.value("keywords", json::array())) {
    if (refusal.find(k.get<std::string>()) == std::string::npos) {
      v.passed = false;
      v.reasons.push_back("the node gate's refusal does not mention '" + k.get<std::string>() + "'");
    }
  }
  return true;
}

// The expectations read before the run, as a person bringing the
// cluster up would check it: preflight, certify.
void check_before_run(Cluster& cluster, const agent::Scenario& s, const std::shared_ptr<Inbox>& inbox, Verdict& v) {
  if (s.expect.contains("preflight")) check_preflight(cluster, s.hosts, s.run, s.expect["preflight"], v);
  if (!s.expect.contains("certify")) return;
  // A fault lasts one run on its host: each run certify starts meets the
  // scenario's faults afresh, as a link check's rounds do.
  const auto reapply = [&] {
    for (int h = 0; h < s.hosts; ++h)
      cluster.client(h).call({{"type", "fault_clear"}});
    apply_faults(cluster, s, s.hosts, v, false);
  };
  check_certify(cluster, s.hosts, s.run, s.expect["certify"], inbox, reapply, v);
}

// Launches the run on every host with ranks (each host's env_on over the
// run's env); fills `pid_of` (rank -> pid) and returns how many hosts run
// ranks. The run's header goes to `events` first.
int launch_run(Cluster& cluster, const agent::Scenario& s, agent::RunRequest& run, std::ostream* events,
               std::map<int, int>& pid_of) {
  const json& run_spec = s.run;
  const std::vector<int> placement = s.placement();
  const std::string& run_id = run.run_id;
  if (events) {
    std::set<int> with_ranks;
    for (int h : placement) {
      if (h >= 0) with_ranks.insert(h);
    }
    *events << json{{"run_begin", run_id},
                    {"world_size", s.world_size()},
                    {"agents", with_ranks.size()},
                    {"placement", placement}}
                   .dump()
            << "\n";
  }
  int running_hosts = 0;
  for (int h = 0; h < s.hosts; ++h) {
    run.ranks.clear();
    for (std::size_t r = 0; r < placement.size(); ++r) {
      if (placement[r] == h) run.ranks.push_back(static_cast<int>(r));
    }
    if (run.ranks.empty()) continue;
    // Per-host settings on top of the run's: {"hosts": [..], "env": {..}}.
    json env = run_spec.value("env", json::object());
    const json env_on = run_spec.value("env_on", json::array());
    for (const auto& on : env_on) {
      const auto on_hosts = on.value("hosts", std::vector<int>{});
      if (std::find(on_hosts.begin(), on_hosts.end(), h) == on_hosts.end()) continue;
      const json extra = on.value("env", json::object());
      for (const auto& [k, value] : extra.items())
        env[k] = value;
    }
    run.env = env.get<std::map<std::string, std::string>>();
    if (run.perf.bisect) run.env.emplace("GROUP_RANK", std::to_string(h));  // a bisection splits by node
    const json reply = cluster.client(h).call(run.to_json());
    for (const auto& p : reply["ranks"])
      pid_of[p["rank"].get<int>()] = p["pid"].get<int>();
    ++running_hosts;
  }
  return running_hosts;
}

// Says each step as it starts (ScenarioRunOptions::on_step), and that the
// hosts are being taken down when the scenario's scope ends.
struct StepTeller {
  const std::function<void(const std::string&)>& on_step;
  void operator()(const std::string& step) const {
    if (on_step) on_step(step);
  }
};
struct SaysTakingDown {
  StepTeller say;
  ~SaysTakingDown() { say("taking the hosts down"); }
};

Verdict run_one(const agent::Scenario& s, const ScenarioRunOptions& o) {
  Verdict v;
  const int hosts = s.hosts;
  const json& run_spec = s.run;
  const json& expect = s.expect;
  std::ostream* events = o.events;
  const std::atomic<bool>* stop = o.stop;
  const StepTeller say{o.on_step};
  say("building the hosts");
  Cluster cluster(hosts, o.keep);
  const SaysTakingDown taking_down{say};  // destroyed before the cluster
  prepare_hosts(cluster, s, v);
  auto inbox = std::make_shared<Inbox>();
  say("starting the agents");
  cluster.start_agents(o.agent_path, [inbox](const json& m) {
    std::lock_guard lock(inbox->mutex);
    inbox->messages.push_back(m);
    inbox->cv.notify_all();
  });
  say("applying the faults");
  if (!hold_ports(cluster, s, v) || !apply_faults(cluster, s, hosts, v, true)) return v;
  say("checking before the run (preflight, certify)");
  check_before_run(cluster, s, inbox, v);
  agent::RunRequest run = scenario_run(run_spec, "repro-" + s.name, s.world_size());
  const std::string& run_id = run.run_id;
  say("the node gate");
  if (gate_refuses(cluster, s, run, v)) return v;
  std::map<int, int> pid_of;
  say("launching the run");
  const int running_hosts = launch_run(cluster, s, run, events, pid_of);
  // Collect until every host with ranks is done.
  say("collecting the run's events");
  ScenarioAction act(s.action, cluster, pid_of, v);
  namespace ev = agent::events;
  agent::ScenarioRun said;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(s.timeout_s);
  while (said.agents_done < running_hosts) {
    std::unique_lock lock(inbox->mutex);
    const auto slice = std::min(deadline, std::chrono::steady_clock::now() + std::chrono::milliseconds(200));
    act.tick();
    if (stop != nullptr && stop->load()) {
      v.passed = false;
      v.reasons.push_back("interrupted");
      break;
    }
    if (!inbox->cv.wait_until(lock, slice, [&] { return !inbox->messages.empty(); })) {
      if (std::chrono::steady_clock::now() < deadline) continue;
      v.passed = false;
      v.reasons.push_back("the run did not end within the scenario's timeout: a hang");
      break;
    }
    const json m = std::move(inbox->messages.front());
    inbox->messages.pop_front();
    lock.unlock();
    if (m.value("type", "") != "event" || m.value("run_id", "") != run_id) continue;
    if (events) *events << json{{"agent", "repro"}, {"message", m}}.dump() << "\n";
    std::optional<ev::EventMessage> message;
    try {
      message = ev::parse_event_message(m);
    } catch (const Error& e) {
      v.report.push_back("skipped an event: " + e.status().message());
      continue;
    }
    // Once data moves (a sample with bytes sent on channel 0): the
    // scenario's action.
    if (const auto* sample = std::get_if<ev::Sample>(&message->event);
        sample && !sample->channels.empty() && sample->channels[0].bytes_sent > 0) {
      act.data_moves();
    }
    const std::size_t lines = said.report.size();
    said.add(*message, act.since_stop_s());
    v.report.insert(v.report.end(), said.report.begin() + static_cast<std::ptrdiff_t>(lines), said.report.end());
    if (std::holds_alternative<ev::Stall>(message->event)) act.thaw("after the stall report");
  }
  if (expect.contains("linkcheck")) {
    // After the run, so that the run meets the scenario as it always did.
    // A fault lasts one run on its host (docs/protocol.md), and each pair
    // of a link check is a run: every round starts from the scenario's
    // faults again.
    const auto reapply = [&] {
      for (int h = 0; h < hosts; ++h)
        cluster.client(h).call({{"type", "fault_clear"}});
      apply_faults(cluster, s, hosts, v, false);
    };
    say("the link check");
    check_linkcheck(cluster, hosts, run_spec, expect["linkcheck"], inbox, reapply, v);
  }
  const agent::ScenarioCheck check = agent::check_run(s, said);
  v.report.insert(v.report.end(), check.report.begin(), check.report.end());
  if (!check.passed()) v.passed = false;
  v.reasons.insert(v.reasons.end(), check.reasons.begin(), check.reasons.end());
  return v;
}

}  // namespace

std::string scenarios_cannot_run() {
  if (::geteuid() != 0) return "needs root to create network namespaces, veth pairs, a bridge and nftables rules";
  for (const char* tool : {"ip", "nft"}) {
    if (agent::run_command({tool, "-V"}).first == 127) {
      return fmt::format("`{}` is not installed (scripts/setup-deps installs iproute2 and nftables)", tool);
    }
  }
  return {};
}

void remove_scenario_leftovers() {
  remove_leftovers_of_dead();
}

std::vector<std::string> scenario_leftovers() {
  return our_leftovers();
}

std::vector<std::string> take_agent_exit_problems() {
  std::lock_guard lock(exit_problems_lock);
  std::vector<std::string> out;
  out.swap(agent_exit_problems());
  return out;
}

ScenarioVerdict run_scenario(const Scenario& scenario, const ScenarioRunOptions& options) {
  return run_one(scenario, options);
}

}  // namespace ringmaster::agent

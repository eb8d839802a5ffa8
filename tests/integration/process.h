// Runs ringmaster-cli as a real child process with its own environment and
// collects its output, for integration tests.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <map>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "net/socket.h"
#include "ringmaster/config.h"

extern char** environ;

namespace ringmaster::testing_support {

// Built with AddressSanitizer (the asan preset): allocations carry red zones
// and freed memory stays in quarantine, so resident-memory bounds say
// nothing there.
#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kAddressSanitizer = true;
#else
inline constexpr bool kAddressSanitizer = false;
#endif

// Resident memory of a process, KiB.
inline long rss_kib(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("VmRSS:", 0) == 0) return std::atol(line.c_str() + 6);
  }
  return 0;
}

// A port for a test's store, free now and below the kernel's ephemeral
// range (32768 and up), so no socket that binds port 0 meanwhile (another
// test's listener or connection, a libfabric endpoint) can take it before
// rank 0 listens on it.
// A rank of an n-rank job whose store is on loopback at `port`, with
// timeouts short enough for tests.
inline Config rank_config(int rank, int n, std::uint16_t port) {
  using namespace std::chrono_literals;
  Config c;
  c.rank = rank;
  c.world_size = n;
  c.master_addr = "127.0.0.1";
  c.master_port = port;
  c.store_timeout = 30s;
  c.bootstrap_timeout = 30s;
  return c;
}

inline std::uint16_t free_port() {
  static std::mt19937 pick(static_cast<unsigned>(::getpid()) ^
                           static_cast<unsigned>(std::chrono::steady_clock::now().time_since_epoch().count()));
  for (int attempt = 0; attempt < 1000; ++attempt) {
    const auto port = static_cast<std::uint16_t>(std::uniform_int_distribution<int>(10000, 32000)(pick));
    int err = 0;
    auto any = net::SocketAddress::parse("0.0.0.0:" + std::to_string(port));
    if (net::Socket::listen(*any, 1, err).valid()) return port;
  }
  int err = 0;
  auto any = net::SocketAddress::parse("127.0.0.1:0");
  return net::Socket::listen(*any, 1, err).local_address().port();
}

struct ChildProcess {
  pid_t pid = -1;
  int out_fd = -1;
  std::string output;
  int status = 0;

  // Reads until EOF and reaps the child.
  // Reads to the end and reaps it; a second call does nothing.
  void finish() {
    if (out_fd < 0) return;
    char buf[4096];
    for (;;) {
      const ssize_t n = ::read(out_fd, buf, sizeof(buf));
      if (n > 0) {
        output.append(buf, static_cast<std::size_t>(n));
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      break;
    }
    ::close(out_fd);
    out_fd = -1;
    ::waitpid(pid, &status, 0);
  }
  int exit_code() const { return WIFEXITED(status) ? WEXITSTATUS(status) : -1; }
};

// Starts `argv` with the current environment plus `env` (which wins);
// stdout is captured, stderr goes to the test's stderr unless
// `with_stderr` captures it too (interleaved with stdout).
inline ChildProcess spawn(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env,
                          bool with_stderr = false) {
  std::map<std::string, std::string> merged;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry(*e);
    const auto eq = entry.find('=');
    if (eq != std::string::npos) merged[entry.substr(0, eq)] = entry.substr(eq + 1);
  }
  for (const auto& [k, v] : env)
    merged[k] = v;
  std::vector<std::string> env_strings;
  for (const auto& [k, v] : merged)
    env_strings.push_back(k + "=" + v);
  std::vector<char*> envp, args;
  for (auto& s : env_strings)
    envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> argv_copy = argv;
  for (auto& s : argv_copy)
    args.push_back(s.data());
  args.push_back(nullptr);

  int pipefd[2];
  if (::pipe2(pipefd, O_CLOEXEC) != 0) throw std::runtime_error("pipe failed");
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, pipefd[1], 1);
  if (with_stderr) posix_spawn_file_actions_adddup2(&actions, pipefd[1], 2);
  ChildProcess child;
  const int rc = posix_spawn(&child.pid, args[0], &actions, nullptr, args.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  ::close(pipefd[1]);
  if (rc != 0) throw std::runtime_error("posix_spawn " + argv[0] + " failed");
  child.out_fd = pipefd[0];
  return child;
}

// A network namespace of the test's own (root only), with loopback up,
// removed with everything in it when the test ends.
struct NetNamespace {
  std::string name;
  explicit NetNamespace(const std::string& prefix) : name(prefix + std::to_string(::getpid())) {
    ::system(("ip netns del " + name + " 2>/dev/null").c_str());
    if (::system(("ip netns add " + name + " && ip netns exec " + name + " ip link set lo up").c_str()) != 0) {
      throw std::runtime_error("cannot create network namespace " + name);
    }
  }
  ~NetNamespace() { ::system(("ip netns del " + name).c_str()); }
  NetNamespace(const NetNamespace&) = delete;
  NetNamespace& operator=(const NetNamespace&) = delete;
  // The command prefix that runs a program inside.
  std::vector<std::string> exec() const { return {"/usr/sbin/ip", "netns", "exec", name}; }
  std::string ruleset() const {
    auto nft = spawn({"/usr/sbin/ip", "netns", "exec", name, "nft", "list", "ruleset"}, {});
    nft.finish();
    return nft.output;
  }
  // Loads nftables RULES (nft -f syntax) into the namespace.
  void nft(const std::string& rules) const {
    auto load = spawn({"/bin/sh", "-c", "printf '%s' \"$0\" | ip netns exec " + name + " nft -f -", rules}, {}, true);
    load.finish();
    if (load.exit_code() != 0) throw std::runtime_error("nft -f in " + name + " failed: " + load.output);
  }
};

}  // namespace ringmaster::testing_support

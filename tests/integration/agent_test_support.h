// What the agent's integration tests share: ringmaster-agent as a child
// process on a free loopback port, an inbox for the events its clients
// get, raw connections, run messages and a network namespace of the
// test's own. Each agent_*_test.cpp is a program of its own, so ctest
// runs them side by side.
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <linux/kcmp.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pwd.h>
#include <sched.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <mutex>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <thread>
#include <tuple>
#include <variant>

#include "agent/server/memory_cgroup.h"
#include "agent/server/metrics.h"
#include "agent/server/nic_counters.h"
#include "agent/server/run_cgroup.h"
#include "agent/server/run_env.h"
#include "process.h"
#include "ringmaster/agent/client.h"
#include "ringmaster/agent/command.h"
#include "ringmaster/agent/events.h"
#include "ringmaster/agent/fault.h"
#include "ringmaster/agent/linkcheck.h"
#include "ringmaster/agent/protocol.h"
#include "ringmaster/agent/telemetry.h"
#include "ringmaster/status.h"
#include "ringmaster/version.h"

namespace ringmaster::agent_testing {

using namespace std::chrono_literals;
using nlohmann::json;
using testing_support::kAddressSanitizer;
using testing_support::rss_kib;

// A ringmaster-agent child on a free loopback port.
struct Agent {
  testing_support::ChildProcess child;
  std::uint16_t port = 0;

  // `prefix` runs the agent through another command (ip netns exec NS).
  explicit Agent(std::vector<std::string> extra = {}, std::vector<std::string> prefix = {}) {
    static int serial = 0;
    state_dir = ::testing::TempDir() + "agent-state-" + std::to_string(::getpid()) + "-" + std::to_string(serial++);
    std::vector<std::string> argv = prefix;
    for (const char* a : {RINGMASTER_AGENT, "--listen", "127.0.0.1:0", "--print-port"})
      argv.push_back(a);
    if (const auto given = std::find(extra.begin(), extra.end(), "--state-dir"); given != extra.end()) {
      state_dir = *(given + 1);
    } else {
      argv.insert(argv.end(), {"--state-dir", state_dir});
    }
    argv.insert(argv.end(), extra.begin(), extra.end());
    child = testing_support::spawn(argv, {});
    std::string line;
    char c = 0;
    pollfd p{child.out_fd, POLLIN, 0};
    while (::poll(&p, 1, 10000) > 0 && ::read(child.out_fd, &c, 1) == 1 && c != '\n')
      line += c;
    port = static_cast<std::uint16_t>(std::atoi(line.c_str()));
    if (port == 0) {
      ::kill(child.pid, SIGKILL);
      child.finish();
      throw std::runtime_error("agent did not print its port within 10 s");
    }
    // Without --token-file the agent made its own token in its state directory.
    if (std::find(extra.begin(), extra.end(), "--token-file") == extra.end()) {
      token = agent::read_token_file(agent::token_path(state_dir));
    }
    if (std::find(extra.begin(), extra.end(), "--metrics") != extra.end()) {
      line.clear();
      while (::poll(&p, 1, 10000) > 0 && ::read(child.out_fd, &c, 1) == 1 && c != '\n')
        line += c;
      metrics_port = static_cast<std::uint16_t>(std::atoi(line.c_str()));
    }
  }
  std::uint16_t metrics_port = 0;
  std::string state_dir;
  // The agent still answers (it did not crash).
  bool alive() const {
    try {
      return agent::AgentClient::connect(options())->call({{"type", "ping"}})["type"] == "reply";
    } catch (const Error&) {
      return false;
    }
  }
  std::string token;
  ~Agent() {
    if (child.out_fd < 0) return;  // stopped by the test already
    ::kill(child.pid, SIGTERM);
    child.finish();
  }
  // With the agent's token unless told another.
  agent::ClientOptions options(std::optional<std::string> with_token = std::nullopt) const {
    agent::ClientOptions o;
    o.port = port;
    o.token = with_token.value_or(token);
    return o;
  }
};

// Messages from clients' I/O threads.
struct Inbox {
  std::mutex mutex;
  std::condition_variable cv;
  std::deque<json> messages;

  agent::AgentClient::MessageHandler handler() {
    return [this](const json& m) {
      std::lock_guard lock(mutex);
      messages.push_back(m);
      cv.notify_all();
    };
  }
  // Events of `run_id` until `done_count` run_done events, or the timeout.
  std::vector<json> run_events(const std::string& run_id, int done_count, std::chrono::seconds timeout) {
    std::vector<json> out;
    int done = 0;
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    std::unique_lock lock(mutex);
    while (done < done_count) {
      if (!cv.wait_until(lock, deadline, [&] { return !messages.empty(); })) {
        ADD_FAILURE() << "run " << run_id << ": " << done << " of " << done_count << " agents finished in time";
        break;
      }
      json m = std::move(messages.front());
      messages.pop_front();
      if (m.value("type", "") != "event" || m.value("run_id", "") != run_id) continue;
      if (m["event"].value("type", "") == "run_done") ++done;
      out.push_back(std::move(m));
    }
    return out;
  }
  // What has come and not been taken, left in place.
  std::vector<json> snapshot() {
    std::lock_guard lock(mutex);
    return {messages.begin(), messages.end()};
  }
};

// A token file as the agent wants it: mode 0600.
inline std::string write_token(const std::string& name, const std::string& token) {
  const std::string path = ::testing::TempDir() + name + "-" + std::to_string(::getpid());
  std::remove(path.c_str());
  std::ofstream(path) << token << "\n";
  ::chmod(path.c_str(), 0600);
  return path;
}

// The client's auth message for a raw connection, as the client library
// sends it (its own nonce, the proof over both).
inline json auth_message(const std::string& token, const json& hello, int id) {
  const std::string client_nonce = agent::random_nonce();
  return {{"type", "auth"},
          {"id", id},
          {"v", 1},
          {"nonce", client_nonce},
          {"hmac", agent::client_proof(token, hello["nonce"].get<std::string>(), client_nonce, "")}};
}

inline json perf_spec(std::string min, std::string max, int iters) {
  return {{"collective", "all_reduce"}, {"min_bytes", min}, {"max_bytes", max},
          {"step_factor", 4},           {"iters", iters},   {"warmup", 1},
          {"dtype", "float"},           {"op", "sum"}};
}

// A perf run of `ranks` of `world_size` on this host, the store at
// `master_port` (0: this agent starts one).
inline json perf_run(const std::string& id, int world_size, std::vector<int> ranks, json perf, int master_port = 0) {
  return {{"type", "run"},
          {"run_id", id},
          {"world_size", world_size},
          {"ranks", ranks},
          {"master_addr", "127.0.0.1"},
          {"master_port", master_port},
          {"perf", std::move(perf)}};
}

// A run of one rank (rank 0, the store here) of an 8-byte all_reduce.
inline json one_rank_run(const std::string& id, json env = json::object()) {
  json run = perf_run(id, 1, {0}, perf_spec("8", "8", 1));
  run["env"] = std::move(env);
  return run;
}

inline json with_timeouts(json run, json timeouts) {
  run["timeouts"] = std::move(timeouts);
  return run;
}

inline std::set<std::string> keys_of(const json& j, const std::string& prefix = "") {
  std::set<std::string> out;
  for (const auto& [k, v] : j.items()) {
    out.insert(prefix + k);
    if (v.is_object()) {
      for (const auto& sub : keys_of(v, prefix + k + "."))
        out.insert(sub);
    }
  }
  return out;
}

// A "links" event as a rank sends it, read back as the agent relays it.
inline agent::events::Links links_event(const nlohmann::json& j) {
  return std::get<agent::events::Links>(agent::events::parse_event(j));
}

// The agent answers `request` with an error whose message holds `says`.
inline void expect_refused(agent::AgentClient& client, const json& request, const std::string& says) {
  try {
    client.call(request);
    ADD_FAILURE() << request.dump() << " was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
  }
}

struct RawConnection {
  int fd = -1;
  explicit RawConnection(std::uint16_t port) {
    fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) throw std::runtime_error("connect failed");
  }
  ~RawConnection() { ::close(fd); }
  void send(const std::string& bytes) const {
    ASSERT_EQ(::write(fd, bytes.data(), bytes.size()), (ssize_t)bytes.size());
  }
  void send(const json& m) const { send(agent::encode_frame(m)); }
  // The next message; nothing at EOF or after 10 s.
  std::optional<json> read() const {
    agent::FrameDecoder d;
    char buf[4096];
    for (;;) {
      if (auto m = d.next()) return m;
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, 10000) <= 0) return std::nullopt;
      const ssize_t n = ::read(fd, buf, sizeof(buf));
      if (n <= 0) return std::nullopt;
      d.feed(buf, static_cast<std::size_t>(n));
    }
  }
};

// Everything the server sends until it closes (or 10 s of silence).
inline std::string read_until_closed(const RawConnection& raw) {
  std::string response;
  char buf[4096];
  pollfd p{raw.fd, POLLIN, 0};
  while (::poll(&p, 1, 10000) > 0) {
    const ssize_t n = ::read(raw.fd, buf, sizeof(buf));
    if (n <= 0) break;
    response.append(buf, static_cast<std::size_t>(n));
  }
  return response;
}

inline std::string http_get(std::uint16_t port, const std::string& path) {
  RawConnection raw(port);
  // One request: the server keeps HTTP/1.1 connections open otherwise.
  raw.send("GET " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
  return read_until_closed(raw);
}

// A network namespace of this test's own, with loopback up.
struct NetNamespace : testing_support::NetNamespace {
  NetNamespace() : testing_support::NetNamespace("rm-agent-test-") {}
  // A client whose socket lives in this namespace.
  std::unique_ptr<agent::AgentClient> connect(const agent::ClientOptions& options,
                                              agent::AgentClient::MessageHandler handler = {}) const {
    std::unique_ptr<agent::AgentClient> client;
    std::string error;
    std::thread([&] {
      const int fd = ::open(("/run/netns/" + name).c_str(), O_RDONLY | O_CLOEXEC);
      if (fd < 0 || ::setns(fd, CLONE_NEWNET) != 0) {
        error = "setns failed";
        return;
      }
      ::close(fd);
      try {
        client = agent::AgentClient::connect(options, std::move(handler));
      } catch (const std::exception& e) {
        error = e.what();
      }
    }).join();
    if (!client) throw std::runtime_error(error);
    return client;
  }
};

// The uid that owns the file a run's rank wrote (its NCCL_DEBUG_FILE).
inline uid_t debug_file_owner(Agent& a, const std::string& run_id) {
  Inbox inbox;
  auto watcher = agent::AgentClient::connect(a.options(), inbox.handler());
  watcher->call({{"type", "subscribe"}});
  auto client = agent::AgentClient::connect(a.options());
  client->call(one_rank_run(run_id, {{"NCCL_DEBUG", "INFO"}, {"NCCL_DEBUG_FILE", "debug.log"}}));
  const auto events = inbox.run_events(run_id, 1, 60s);
  EXPECT_FALSE(events.empty());
  if (!events.empty()) {
    EXPECT_TRUE(events.back()["event"].value("ok", false)) << events.back().dump();
  }
  struct stat st = {};
  const std::string log = a.state_dir + "/runs/" + run_id + "/debug.log";
  EXPECT_EQ(::stat(log.c_str(), &st), 0) << log;
  return st.st_uid;
}

// Agent CPU seconds so far (utime + stime).
inline double cpu_seconds(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::istringstream fields(text.substr(text.rfind(')') + 2));
  std::string f;
  long utime = 0, stime = 0;
  for (int i = 3; fields >> f; ++i) {
    if (i == 14) utime = std::atol(f.c_str());
    if (i == 15) stime = std::atol(f.c_str());
  }
  return static_cast<double>(utime + stime) / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

}  // namespace ringmaster::agent_testing

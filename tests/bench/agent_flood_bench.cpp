// The agent under a flood of hostile clients: 1,000 connections that
// trickle a byte a second and never authenticate, and 10 that announce a
// 16 MiB frame before authenticating and send part of it. Prints the
// agent's resident memory under the flood and how long a client that does
// authenticate waits for its first reply (connect, hello, auth, ping),
// against the same client on the idle agent in the same run.
//
//   agent_flood_bench [SECONDS]
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "ringmaster/agent/client.h"
#include "ringmaster/agent/protocol.h"

extern char** environ;

namespace {

using Clock = std::chrono::steady_clock;

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<std::size_t>(p * static_cast<double>(v.size())))];
}

long rss_kib(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("VmRSS:", 0) == 0) return std::atol(line.c_str() + 6);
  }
  return -1;
}

int connect_to(std::uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd < 0 || ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    if (fd >= 0) ::close(fd);
    return -1;
  }
  return fd;
}

// Milliseconds from connect to the reply of one ping, authenticated.
double served_ms(const ringmaster::agent::ClientOptions& options) {
  const auto start = Clock::now();
  try {
    auto client = ringmaster::agent::AgentClient::connect(options);
    client->call({{"type", "ping"}});
  } catch (const std::exception& e) {
    std::fprintf(stderr, "client not served: %s\n", e.what());
    return 1e9;
  }
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

}  // namespace

int main(int argc, char** argv) {
  const int seconds = argc > 1 ? std::atoi(argv[1]) : 10;
  rlimit files{};
  ::getrlimit(RLIMIT_NOFILE, &files);
  files.rlim_cur = files.rlim_max;
  ::setrlimit(RLIMIT_NOFILE, &files);
  ::signal(SIGPIPE, SIG_IGN);

  const std::string state = std::filesystem::temp_directory_path() / ("agent-flood-" + std::to_string(::getpid()));
  int pipefd[2];
  if (::pipe2(pipefd, O_CLOEXEC) != 0) return 1;
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, pipefd[1], 1);
  std::vector<std::string> args = {RINGMASTER_AGENT, "--listen", "127.0.0.1:0", "--print-port", "--state-dir", state};
  std::vector<char*> argv_c;
  for (auto& s : args)
    argv_c.push_back(s.data());
  argv_c.push_back(nullptr);
  pid_t agent = -1;
  posix_spawn(&agent, argv_c[0], &actions, nullptr, argv_c.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(pipefd[1]);
  std::string line;
  for (char c = 0; ::read(pipefd[0], &c, 1) == 1 && c != '\n';)
    line += c;
  const int port = std::atoi(line.c_str());
  if (port <= 0) {
    std::fprintf(stderr, "agent did not start\n");
    return 1;
  }
  ringmaster::agent::ClientOptions options;
  options.port = static_cast<std::uint16_t>(port);
  options.token = ringmaster::agent::read_token_file(ringmaster::agent::token_path(state));

  std::vector<double> idle_ms;
  for (int i = 0; i < 20; ++i)
    idle_ms.push_back(served_ms(options));
  const long idle_rss = rss_kib(agent);

  // The flood: 10 partial 16 MiB frames, then 1,000 tricklers, topped up
  // as the agent closes them (its auth deadline, its caps).
  std::vector<int> frames;
  for (int i = 0; i < 10; ++i) {
    const int fd = connect_to(options.port);
    if (fd < 0) continue;
    const std::string header = {0x01, 0x00, 0x00, 0x00};
    const std::string body(1 << 20, '[');
    (void)::send(fd, header.data(), header.size(), MSG_NOSIGNAL);
    (void)::send(fd, body.data(), body.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    frames.push_back(fd);
  }
  std::vector<int> tricklers;
  long peak_rss = 0;
  std::vector<double> flood_ms;
  const auto end = Clock::now() + std::chrono::seconds(seconds);
  int opened = 0;
  while (Clock::now() < end) {
    // Keep 1,000 open: replace the ones the agent closed.
    std::vector<int> alive;
    for (int fd : tricklers) {
      const char byte = 0;
      if (::send(fd, &byte, 1, MSG_NOSIGNAL | MSG_DONTWAIT) == 1) {
        alive.push_back(fd);
      } else {
        ::close(fd);
      }
    }
    tricklers.swap(alive);
    while (tricklers.size() < 1000) {
      const int fd = connect_to(options.port);
      if (fd < 0) break;
      tricklers.push_back(fd);
      ++opened;
    }
    peak_rss = std::max(peak_rss, rss_kib(agent));
    flood_ms.push_back(served_ms(options));
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  peak_rss = std::max(peak_rss, rss_kib(agent));
  for (int fd : tricklers)
    ::close(fd);
  for (int fd : frames)
    ::close(fd);
  ::kill(agent, SIGTERM);
  int status = 0;
  ::waitpid(agent, &status, 0);
  std::filesystem::remove_all(state);

  std::printf(
      "agent flood, %d s: 1,000 trickling unauthenticated connections (%d opened in all) and 10 partial "
      "16 MiB frames\n",
      seconds, opened);
  std::printf("  agent RSS          idle %.1f MB   peak under the flood %.1f MB\n", idle_rss / 1024.0,
              peak_rss / 1024.0);
  std::printf(
      "  authenticated ping idle median %.2f ms max %.2f ms   under the flood median %.2f ms p90 %.2f ms "
      "max %.2f ms (%zu clients)\n",
      percentile(idle_ms, 0.5), percentile(idle_ms, 1.0), percentile(flood_ms, 0.5), percentile(flood_ms, 0.9),
      percentile(flood_ms, 1.0), flood_ms.size());
  return 0;
}

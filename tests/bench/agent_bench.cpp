// Agent figures: idle RSS and CPU of a ringmaster-agent, and the latency of
// relaying a rank's event to a client (the 10 Hz channel samples), against
// the same ranks read directly from a pipe in the same run.
//
//   agent_bench [SECONDS]
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "ringmaster/agent/client.h"
#include "ringmaster/agent/protocol.h"

extern char** environ;

namespace {

using nlohmann::json;

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<std::size_t>(p * static_cast<double>(v.size())))];
}

pid_t spawn(const std::vector<std::string>& argv, int& out_fd) {
  int pipefd[2];
  if (::pipe2(pipefd, O_CLOEXEC) != 0) return -1;
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, pipefd[1], 1);
  std::vector<std::string> copy = argv;
  std::vector<char*> args;
  for (auto& s : copy)
    args.push_back(s.data());
  args.push_back(nullptr);
  pid_t pid = -1;
  posix_spawn(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(pipefd[1]);
  out_fd = pipefd[0];
  return pid;
}

std::string read_line(int fd) {
  std::string line;
  char c = 0;
  while (::read(fd, &c, 1) == 1 && c != '\n')
    line += c;
  return line;
}

long rss_kib(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("VmRSS:", 0) == 0) return std::atol(line.c_str() + 6);
  }
  return -1;
}

double cpu_seconds(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::istringstream fields(text.substr(text.rfind(')') + 2));
  std::string f;
  long utime = 0, stime = 0;
  for (int i = 3; i <= 15 && fields >> f; ++i) {
    if (i == 14) utime = std::atol(f.c_str());
    if (i == 15) stime = std::atol(f.c_str());
  }
  return static_cast<double>(utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

}  // namespace

int main(int argc, char** argv) {
  const int seconds = argc > 1 ? std::atoi(argv[1]) : 5;
  int agent_out = -1;
  const pid_t agent = spawn({RINGMASTER_AGENT, "--listen", "127.0.0.1:0", "--print-port"}, agent_out);
  const int port = std::atoi(read_line(agent_out).c_str());
  if (port <= 0) {
    std::fprintf(stderr, "agent did not start\n");
    return 1;
  }

  // Idle: RSS after start, CPU over a quiet interval with one client
  // connected (heartbeats both ways, as under a console).
  std::mutex mutex;
  std::vector<double> relayed_ms;
  std::string run_id = "bench";
  int done = 0;
  ringmaster::agent::ClientOptions options;
  options.port = static_cast<std::uint16_t>(port);
  auto client = ringmaster::agent::AgentClient::connect(options, [&](const json& m) {
    const long long now = ringmaster::agent::wall_us();
    if (m.value("type", "") != "event") return;
    const json& e = m["event"];
    std::lock_guard lock(mutex);
    if (e.value("type", "") == "sample")
      relayed_ms.push_back(static_cast<double>(now - e["t_us"].get<long long>()) / 1e3);
    if (e.value("type", "") == "run_done") ++done;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  const long idle_rss = rss_kib(agent);
  const double cpu0 = cpu_seconds(agent);
  std::this_thread::sleep_for(std::chrono::seconds(seconds));
  const double idle_cpu = (cpu_seconds(agent) - cpu0) / seconds * 100.0;

  // Relay: 2 ranks running all_reduce for `seconds`, samples at 10 Hz.
  const int iters = 350 * seconds;
  client->call({{"type", "subscribe"}});
  client->call(
      {{"type", "run"},
       {"run_id", run_id},
       {"world_size", 2},
       {"ranks", {0, 1}},
       {"master_addr", "127.0.0.1"},
       {"master_port", 0},
       {"perf",
        {{"collective", "all_reduce"}, {"min_bytes", "4M"}, {"max_bytes", "4M"}, {"iters", iters}, {"warmup", 1}}}});
  while (true) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    std::lock_guard lock(mutex);
    if (done > 0) break;
  }
  const long busy_rss = rss_kib(agent);

  // The same ranks read straight from their stdout, no agent between.
  std::vector<double> direct_ms;
  int perf_out = -1;
  const pid_t perf = spawn({RINGMASTER_CLI, "perf", "all_reduce", "--np", "2", "-b", "4M", "-e", "4M", "-n",
                            std::to_string(iters), "-w", "1", "--json"},
                           perf_out);
  for (std::string line; !(line = read_line(perf_out)).empty();) {
    const long long now = ringmaster::agent::wall_us();
    const json e = json::parse(line, nullptr, false);
    if (!e.is_discarded() && e.value("type", "") == "sample") {
      direct_ms.push_back(static_cast<double>(now - e["t_us"].get<long long>()) / 1e3);
    }
  }
  int status = 0;
  ::waitpid(perf, &status, 0);
  client.reset();
  ::kill(agent, SIGTERM);
  ::waitpid(agent, &status, 0);

  std::printf("agent idle: RSS %ld KiB, CPU %.3f%% of a core over %d s (one client, 1 s heartbeats)\n", idle_rss,
              idle_cpu, seconds);
  std::printf("agent RSS after a 2-rank run: %ld KiB\n", busy_rss);
  std::printf(
      "sample events: relayed by the agent p50 %.3f ms p99 %.3f ms (n=%zu); read from the rank's pipe p50 "
      "%.3f ms p99 %.3f ms (n=%zu); agent adds %.3f ms at p99 (aim: relayed p99 < 5 ms)\n",
      percentile(relayed_ms, 0.5), percentile(relayed_ms, 0.99), relayed_ms.size(), percentile(direct_ms, 0.5),
      percentile(direct_ms, 0.99), direct_ms.size(), percentile(relayed_ms, 0.99) - percentile(direct_ms, 0.99));
  return 0;
}

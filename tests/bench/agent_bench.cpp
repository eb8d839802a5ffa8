// Agent figures: idle RSS and CPU of a ringmaster-agent, and the latency of
// relaying a rank's event to a client (the 10 Hz channel samples), against
// the same ranks read directly from their pipes in the same run. Both ways
// start the ranks alike (two `ringmaster-cli perf --json` processes with
// RANK/WORLD_SIZE, as the agent starts them) and take turns for ROUNDS
// rounds (which goes first alternates), so the percentiles compare the
// same minutes of the machine over hundreds of samples each.
//
//   agent_bench [SECONDS] [ROUNDS]     (default 5 s per run, 6 rounds)
#include <signal.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "process.h"  // tests/integration: spawn, free_port
#include "ringmaster/agent/client.h"
#include "ringmaster/agent/protocol.h"

namespace {

using nlohmann::json;
namespace testing_support = ringmaster::testing_support;

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<std::size_t>(p * static_cast<double>(v.size())))];
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

// Two ranks started as the agent starts them, read straight from their
// stdout: the latency of each sample event when it is read.
void pipe_run(int iters, std::vector<double>& direct_ms) {
  const std::string port = std::to_string(testing_support::free_port());
  std::vector<testing_support::ChildProcess> ranks;
  for (int rank = 0; rank < 2; ++rank) {
    ranks.push_back(testing_support::spawn({RINGMASTER_CLI, "perf", "all_reduce", "--json", "-b", "4M", "-e", "4M",
                                            "-n", std::to_string(iters), "-w", "1"},
                                           {{"RANK", std::to_string(rank)},
                                            {"WORLD_SIZE", "2"},
                                            {"LOCAL_RANK", std::to_string(rank)},
                                            {"LOCAL_WORLD_SIZE", "2"},
                                            {"MASTER_ADDR", "127.0.0.1"},
                                            {"MASTER_PORT", port}}));
  }
  std::mutex mutex;
  std::vector<std::thread> readers;
  for (const auto& child : ranks) {
    readers.emplace_back([out = child.out_fd, &mutex, &direct_ms] {
      for (std::string line; !(line = read_line(out)).empty();) {
        const long long now = ringmaster::agent::wall_us();
        const json e = json::parse(line, nullptr, false);
        if (!e.is_discarded() && e.value("type", "") == "sample") {
          std::lock_guard lock(mutex);
          direct_ms.push_back(static_cast<double>(now - e["t_us"].get<long long>()) / 1e3);
        }
      }
    });
  }
  for (auto& t : readers)
    t.join();
  for (auto& child : ranks)
    child.finish();
}

int main(int argc, char** argv) {
  const int seconds = argc > 1 ? std::atoi(argv[1]) : 5;
  const int rounds = argc > 2 ? std::atoi(argv[2]) : 6;
  auto agent = testing_support::spawn({RINGMASTER_AGENT, "--listen", "127.0.0.1:0", "--print-port"}, {});
  const int port = std::atoi(read_line(agent.out_fd).c_str());
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
  const long idle_rss = rss_kib(agent.pid);
  const double cpu0 = cpu_seconds(agent.pid);
  std::this_thread::sleep_for(std::chrono::seconds(seconds));
  const double idle_cpu = (cpu_seconds(agent.pid) - cpu0) / seconds * 100.0;

  // Relay: 2 ranks running all_reduce for `seconds`, samples at 10 Hz,
  // through the agent and straight from their pipes, taking turns.
  const int iters = 350 * seconds;
  client->call({{"type", "subscribe"}});
  auto relay_run = [&](int round) {
    int done_before = 0;
    {
      std::lock_guard lock(mutex);
      done_before = done;
    }
    client->call(
        {{"type", "run"},
         {"run_id", run_id + std::to_string(round)},
         {"world_size", 2},
         {"ranks", {0, 1}},
         {"master_addr", "127.0.0.1"},
         {"master_port", 0},
         {"perf",
          {{"collective", "all_reduce"}, {"min_bytes", "4M"}, {"max_bytes", "4M"}, {"iters", iters}, {"warmup", 1}}}});
    while (true) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      std::lock_guard lock(mutex);
      if (done > done_before) break;
    }
  };
  std::vector<double> direct_ms;
  for (int round = 0; round < rounds; ++round) {
    if (round % 2 == 0) {
      relay_run(round);
      pipe_run(iters, direct_ms);
    } else {
      pipe_run(iters, direct_ms);
      relay_run(round);
    }
  }
  const long busy_rss = rss_kib(agent.pid);
  client.reset();
  ::kill(agent.pid, SIGTERM);
  agent.finish();

  std::printf("agent idle: RSS %ld KiB, CPU %.3f%% of a core over %d s (one client, 1 s heartbeats)\n", idle_rss,
              idle_cpu, seconds);
  std::printf("agent RSS after %d 2-rank runs: %ld KiB\n", rounds, busy_rss);
  // A p99 needs a hundred samples to be more than the maximum.
  auto p99 = [](const std::vector<double>& v) {
    return v.size() >= 100 ? fmt::format("{:.3f} ms", percentile(v, 0.99)) : std::string("- (under 100 samples)");
  };
  const bool enough = relayed_ms.size() >= 100 && direct_ms.size() >= 100;
  const std::string added_p99 =
      enough ? fmt::format("{:.3f} ms", percentile(relayed_ms, 0.99) - percentile(direct_ms, 0.99)) : "-";
  std::printf(
      "sample events over %d rounds, the two ways taking turns: relayed by the agent p50 %.3f ms p99 %s (n=%zu); "
      "read from the ranks' pipes p50 %.3f ms p99 %s (n=%zu); agent adds %.3f ms at p50, %s at p99 (aim: "
      "relayed p99 < 5 ms)\n",
      rounds, percentile(relayed_ms, 0.5), p99(relayed_ms).c_str(), relayed_ms.size(), percentile(direct_ms, 0.5),
      p99(direct_ms).c_str(), direct_ms.size(), percentile(relayed_ms, 0.5) - percentile(direct_ms, 0.5),
      added_p99.c_str());
  return 0;
}

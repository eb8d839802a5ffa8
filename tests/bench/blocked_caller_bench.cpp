// How long a collective's peers wait when the caller of one rank submits
// it and then blocks outside the engine (a pipe, another library's
// barrier, a sleep) instead of waiting for it: NCCL's proxy thread and
// Gloo's loop let the peers finish regardless, and so must Ringmaster.
//
// Ranks are processes on this host. After a barrier every rank submits an
// all_reduce of floats; rank 0's caller then sleeps for `--block-ms`
// (default 1000) before it waits, while every other rank waits at once
// and times its call. Each case runs `--rounds` times (default 5); the
// table prints, per rank count and size, the median and the slowest peer
// time, and whether the slowest was under 100 ms.
//
//   blocked_caller_bench [--ranks 2,3,4] [--sizes 8,65536,4194304] [--rounds 5] [--block-ms 1000]
#include <fmt/format.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "net/socket.h"
#include "process.h"  // tests/integration: rank_config
#include "ringmaster/comm.h"

namespace {

using namespace std::chrono_literals;

std::vector<long> list_of(const std::string& text) {
  std::vector<long> out;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');)
    out.push_back(std::stol(item));
  return out;
}

// A port the kernel has just handed out (and taken back) for the store.
std::uint16_t free_port() {
  int err = 0;
  const auto any = ringmaster::net::SocketAddress::parse("127.0.0.1:0");
  const ringmaster::net::Socket s = ringmaster::net::Socket::listen(*any, 1, err);
  return s.local_address().port();
}

// One case: the slowest peer's time in microseconds, or -1 on an error.
double run_case(int n, std::size_t bytes, std::chrono::milliseconds block) {
  const auto port = free_port();
  int fds[2];
  if (::pipe(fds) != 0) return -1;
  std::vector<pid_t> children;
  for (int r = 0; r < n; ++r) {
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::close(fds[0]);
      double us = 0;
      int code = 0;
      try {
        auto comm = ringmaster::Communicator::create(ringmaster::testing_support::rank_config(r, n, port));
        std::vector<float> data(std::max<std::size_t>(bytes / 4, 1), 1.0f);
        for (int i = 0; i < 3; ++i)  // warm: the first calls after init run slower
          comm->all_reduce(data.data(), data.data(), data.size(), ringmaster::DataType::fp32, ringmaster::RedOp::sum)
              .wait();
        comm->barrier().wait();
        const auto start = std::chrono::steady_clock::now();
        auto request =
            comm->all_reduce(data.data(), data.data(), data.size(), ringmaster::DataType::fp32, ringmaster::RedOp::sum);
        if (r == 0) std::this_thread::sleep_for(block);
        request.wait();
        us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
        comm->barrier().wait();
      } catch (const std::exception& e) {
        std::fprintf(stderr, "rank %d: %s\n", r, e.what());
        code = 1;
      }
      if (r != 0) {
        const std::string line = fmt::format("{}\n", code == 0 ? us : -1.0);
        (void)!::write(fds[1], line.data(), line.size());
      }
      ::_exit(code);
    }
    children.push_back(pid);
  }
  ::close(fds[1]);
  std::string text;
  char buf[256];
  for (ssize_t got; (got = ::read(fds[0], buf, sizeof buf)) > 0;)
    text.append(buf, static_cast<std::size_t>(got));
  ::close(fds[0]);
  bool ok = true;
  for (pid_t pid : children) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    ok = ok && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  }
  double slowest = 0;
  std::stringstream in(text);
  for (double us; in >> us;)
    slowest = us < 0 ? -1e18 : std::max(slowest, us);
  return ok && slowest >= 0 ? slowest : -1;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<long> ranks{2, 3, 4}, sizes{8, 65536, 4 << 20};
  int rounds = 5;
  long block_ms = 1000;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--ranks") {
      ranks = list_of(value);
    } else if (flag == "--sizes") {
      sizes = list_of(value);
    } else if (flag == "--rounds") {
      rounds = std::stoi(value);
    } else if (flag == "--block-ms") {
      block_ms = std::stol(value);
    } else {
      std::fprintf(stderr, "unknown flag %s\n", flag.c_str());
      return 2;
    }
  }
  std::printf(
      "# all_reduce submitted by every rank; rank 0's caller sleeps %ld ms before it waits; the other\n"
      "# ranks' time from submit to done, slowest peer per round; %d rounds; %u CPUs online\n",
      block_ms, rounds, std::thread::hardware_concurrency());
  std::printf("%6s %10s %12s %12s %s\n", "ranks", "bytes", "median ms", "slowest ms", "under 100 ms");
  bool all_ok = true;
  for (long n : ranks) {
    for (long bytes : sizes) {
      std::vector<double> times;
      for (int i = 0; i < rounds; ++i)
        times.push_back(
            run_case(static_cast<int>(n), static_cast<std::size_t>(bytes), std::chrono::milliseconds(block_ms)));
      if (std::any_of(times.begin(), times.end(), [](double t) { return t < 0; })) {
        std::printf("%6ld %10ld %12s %12s %s\n", n, bytes, "error", "error", "no");
        all_ok = false;
        continue;
      }
      std::sort(times.begin(), times.end());
      const double median = times[times.size() / 2] / 1000, slowest = times.back() / 1000;
      std::printf("%6ld %10ld %12.2f %12.2f %s\n", n, bytes, median, slowest, slowest < 100 ? "yes" : "no");
      all_ok = all_ok && slowest < 100;
    }
  }
  return all_ok ? 0 : 1;
}

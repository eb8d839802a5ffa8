// What the always-on flight recorder costs a collective: its three hooks
// (a call submitted, started, ended) timed alone in a tight loop, against
// the collective they ride on, measured in the same run: an 8 B all_reduce
// between two ranks over shared memory (threads of this process, each
// call waited for), the smallest and cheapest call there is.
//
//   flight_recorder_bench [calls]     (default 2,000,000 hook rounds, 200,000 collectives)
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <thread>
#include <vector>

#include "comm/flight_recorder.h"
#include "net/socket.h"
#include "ringmaster/comm.h"

namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

double hooks_ns(long rounds) {
  ringmaster::comm::FlightRecorder recorder;
  const auto start = Clock::now();
  for (std::uint64_t seq = 0; seq < static_cast<std::uint64_t>(rounds); ++seq) {
    recorder.begin(seq, ringmaster::Collective::all_reduce, 8, ringmaster::Algorithm::ring, ringmaster::Protocol::ll,
                   1);
    recorder.started(seq);
    recorder.ended(seq, true);
  }
  return std::chrono::duration<double, std::nano>(Clock::now() - start).count() / static_cast<double>(rounds);
}

// Rank 0's time per 8 B all_reduce, two ranks over shared memory.
double all_reduce_ns(long calls) {
  int err = 0;
  const auto any = ringmaster::net::SocketAddress::parse("127.0.0.1:0");
  const auto port = ringmaster::net::Socket::listen(*any, 1, err).local_address().port();
  double ns = 0;
  std::vector<std::thread> ranks;
  for (int r = 0; r < 2; ++r) {
    ranks.emplace_back([&, r] {
      ringmaster::Config c;
      c.rank = r;
      c.world_size = 2;
      c.master_addr = "127.0.0.1";
      c.master_port = port;
      auto comm = ringmaster::Communicator::create(c);
      std::vector<float> data(2, 1.0f);
      auto one = [&] {
        comm->all_reduce(data.data(), data.data(), data.size(), ringmaster::DataType::fp32, ringmaster::RedOp::sum)
            .wait();
      };
      for (long i = 0; i < calls / 10; ++i)
        one();
      const auto start = Clock::now();
      for (long i = 0; i < calls; ++i)
        one();
      if (r == 0)
        ns = std::chrono::duration<double, std::nano>(Clock::now() - start).count() / static_cast<double>(calls);
    });
  }
  for (auto& t : ranks)
    t.join();
  return ns;
}

}  // namespace

int main(int argc, char** argv) {
  const long rounds = argc > 1 ? std::atol(argv[1]) : 2'000'000;
  std::vector<double> hooks, calls;
  for (int i = 0; i < 3; ++i) {
    hooks.push_back(hooks_ns(rounds));
    calls.push_back(all_reduce_ns(rounds / 10));
  }
  std::sort(hooks.begin(), hooks.end());
  std::sort(calls.begin(), calls.end());
  fmt::print("flight recorder hooks: {:.1f} ns per call (runs {:.1f} to {:.1f})\n", hooks[1], hooks.front(),
             hooks.back());
  fmt::print("8 B all_reduce, 2 ranks over shared memory: {:.1f} ns per call (runs {:.1f} to {:.1f})\n", calls[1],
             calls.front(), calls.back());
  fmt::print("the hooks are {:.1f}% of the smallest collective\n", 100.0 * hooks[1] / calls[1]);
}

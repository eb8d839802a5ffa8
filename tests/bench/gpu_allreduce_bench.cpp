// all_reduce of CUDA device buffers (staged through pinned host memory,
// comm/device_calls.cpp) against the same all_reduce of host buffers, in
// the same run, calls of the three forms taking turns (medians): ranks as
// threads of this process, every rank on the first GPU. The host buffers
// come twice: one buffer used by every call (warm: what the CPU's caches
// keep of it from the call before), and buffers taken in turn from
// --cold-bytes of them (cold: read from memory, as data the GPU wrote
// would be). Prints, per size, each form's time per call, the device
// form's bus bandwidth (nccl-tests' definition) and its ratio to each host
// form. Without a usable device it says why and measures the two host
// forms alone.
//
//   gpu_allreduce_bench [--ranks 2] [--iters 20] [--sizes 16777216,67108864,268435456] [--cold-bytes 536870912]
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "gpu/gpu.h"
#include "net/socket.h"
#include "ringmaster/comm.h"

namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
namespace gpu = ringmaster::gpu;

std::uint16_t free_port() {
  int err = 0;
  const auto any = ringmaster::net::SocketAddress::parse("127.0.0.1:0");
  const ringmaster::net::Socket s = ringmaster::net::Socket::listen(*any, 1, err);
  return s.local_address().port();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 == 1 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

struct Medians {
  double host_us = 0, cold_us = 0, device_us = 0;
};

// Median microseconds per call of all_reduce on the warm host buffer, on
// the cold ones in turn and on the device buffer, the three timed in turn
// (`iters` times) so all meet the same moments of a noisy machine; each
// call is lined up by a barrier first. 3 warm-up calls of each. No device
// buffer (`dev` null): the host forms alone.
Medians time_calls(ringmaster::Communicator& comm, void* host, const std::vector<std::vector<float>*>& cold, void* dev,
                   std::size_t count, int iters) {
  auto call = [&](void* buf) {
    comm.barrier().wait();
    const auto start = Clock::now();
    comm.all_reduce(buf, buf, count, ringmaster::DataType::fp32, ringmaster::RedOp::sum).wait();
    return std::chrono::duration<double, std::micro>(Clock::now() - start).count();
  };
  std::size_t next_cold = 0;
  auto cold_buffer = [&] { return cold[next_cold++ % cold.size()]->data(); };
  for (int i = 0; i < 3; ++i) {
    call(host);
    call(cold_buffer());
    if (dev != nullptr) call(dev);
  }
  std::vector<double> host_us, cold_us, dev_us;
  for (int i = 0; i < iters; ++i) {
    host_us.push_back(call(host));
    cold_us.push_back(call(cold_buffer()));
    if (dev != nullptr) dev_us.push_back(call(dev));
  }
  return {median(host_us), median(cold_us), dev != nullptr ? median(dev_us) : 0};
}

}  // namespace

int main(int argc, char** argv) {
  int ranks = 2;
  int iters = 20;
  std::size_t cold_bytes = std::size_t{512} << 20;
  std::vector<std::size_t> sizes = {std::size_t{16} << 20, std::size_t{64} << 20, std::size_t{256} << 20};
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--ranks") == 0) ranks = std::atoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--iters") == 0) iters = std::atoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--cold-bytes") == 0) cold_bytes = std::stoull(argv[i + 1]);
    if (std::strcmp(argv[i], "--sizes") == 0) {
      sizes.clear();
      std::stringstream in(argv[i + 1]);
      for (std::string item; std::getline(in, item, ',');)
        sizes.push_back(std::stoull(item));
    }
  }
  const bool device = gpu::availability().usable;
  if (!device) fmt::print("# device buffers not measured: {}\n", gpu::availability().why);
  fmt::print(
      "# all_reduce fp32 sum, {} ranks as threads{}, {} calls of each form per size, in turn; medians\n"
      "# host: one host buffer every call; cold: host buffers in turn from {} MiB a rank; ratio, ratio_cold: "
      "host_us, cold_us over device_us\n",
      ranks, device ? " on GPU 0" : "", iters, cold_bytes >> 20);
  const char* chunk = std::getenv("RINGMASTER_CUDA_STAGE_CHUNK");
  fmt::print("# staging chunk: {}\n", chunk != nullptr && std::strcmp(chunk, "0") != 0 ? chunk : "8388608 (default)");
  fmt::print("{:>12} {:>10} {:>10} {:>10} {:>10} {:>7} {:>10} {:>9} {:>6}\n", "bytes", "host_us", "cold_us",
             "device_us", "dev_busbw", "ratio", "ratio_cold", "copies_us", "wrong");
  const auto port = free_port();
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int r = 0; r < ranks; ++r) {
    threads.emplace_back([&, r] {
      try {
        if (device) gpu::set_device(0);
        ringmaster::Config c;
        c.rank = r;
        c.world_size = ranks;
        c.master_port = port;
        c.store_timeout = 60s;
        c.bootstrap_timeout = 60s;
        auto comm = ringmaster::Communicator::create(c);
        for (std::size_t bytes : sizes) {
          const std::size_t count = bytes / sizeof(float);
          std::vector<float> host(count, 1.0f);
          std::vector<std::vector<float>> cold_buffers(std::clamp<std::size_t>((cold_bytes + bytes - 1) / bytes, 2, 64),
                                                       std::vector<float>(count, 1.0f));
          std::vector<std::vector<float>*> cold;
          for (auto& b : cold_buffers)
            cold.push_back(&b);
          if (!device) {
            const Medians m = time_calls(*comm, host.data(), cold, nullptr, count, iters);
            if (r == 0)
              fmt::print("{:>12} {:>10.1f} {:>10.1f} {:>10} {:>10} {:>7} {:>10} {:>9} {:>6}\n", bytes, m.host_us,
                         m.cold_us, "-", "-", "-", "-", "-", "-");
            continue;
          }
          gpu::DeviceMemory dev(bytes);
          gpu::copy_async(dev.data(), host.data(), bytes, nullptr);  // any values: the check below resets
          gpu::synchronize(nullptr);
          const Medians m = time_calls(*comm, host.data(), cold, dev.data(), count, iters);
          cold_buffers.clear();
          // The copies alone: to pinned memory and back, every rank at once.
          gpu::PinnedMemory pinned(bytes);
          gpu::Stream stream;
          comm->barrier().wait();
          const auto copies_start = Clock::now();
          for (int i = 0; i < iters; ++i) {
            gpu::copy_async(pinned.data(), dev.data(), bytes, stream.get());
            gpu::copy_async(dev.data(), pinned.data(), bytes, stream.get());
          }
          stream.synchronize();
          const double copies_us =
              std::chrono::duration<double, std::micro>(Clock::now() - copies_start).count() / iters;
          // One checked call: ones summed over the ranks.
          std::vector<float> ones(count, 1.0f);
          gpu::copy_async(dev.data(), ones.data(), bytes, nullptr);
          gpu::synchronize(nullptr);
          comm->all_reduce(dev.data(), dev.data(), count, ringmaster::DataType::fp32, ringmaster::RedOp::sum).wait();
          gpu::copy_async(ones.data(), dev.data(), bytes, nullptr);
          gpu::synchronize(nullptr);
          long wrong = 0;
          for (float v : ones)
            wrong += v != static_cast<float>(ranks) ? 1 : 0;
          if (r == 0) {
            const double factor = 2.0 * (ranks - 1) / ranks;
            const double dev_bus = static_cast<double>(bytes) / m.device_us / 1e3 * factor;
            fmt::print("{:>12} {:>10.1f} {:>10.1f} {:>10.1f} {:>10.2f} {:>7.2f} {:>10.2f} {:>9.1f} {:>6}\n", bytes,
                       m.host_us, m.cold_us, m.device_us, dev_bus, m.host_us / m.device_us, m.cold_us / m.device_us,
                       copies_us, wrong);
            std::fflush(stdout);
          }
          if (wrong != 0) ++failures;
        }
      } catch (const std::exception& e) {
        fmt::print(stderr, "rank {}: {}\n", r, e.what());
        ++failures;
      }
    });
  }
  for (auto& t : threads)
    t.join();
  return failures == 0 ? 0 : 1;
}

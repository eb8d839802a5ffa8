// Collectives on CUDA device buffers (comm/device_calls.cpp), ranks as
// threads of this process on the current GPU: every collective's result,
// in place and out of place, checked element by element after copying it
// back. Without a usable device every test skips, saying why.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "gpu/gpu.h"
#include "process.h"
#include "ringmaster/comm.h"

namespace ringmaster {
namespace {

class GpuCollectives : public testing::Test {
 protected:
  void SetUp() override {
    if (!gpu::availability().usable) GTEST_SKIP() << "no CUDA device: " << gpu::availability().why;
  }

 public:
  // Runs body(rank, communicator) on n ranks as threads; each failure is
  // reported with its rank.
  static void run_ranks(int n, const std::function<void(int, Communicator&)>& body, const CommOptions& options = {}) {
    const auto port = testing_support::free_port();
    std::vector<std::thread> threads;
    std::vector<std::string> errors(static_cast<std::size_t>(n));
    for (int r = 0; r < n; ++r) {
      threads.emplace_back([&, r] {
        try {
          gpu::set_device(0);
          auto comm = Communicator::create(testing_support::rank_config(r, n, port), options);
          body(r, *comm);
        } catch (const std::exception& e) {
          errors[static_cast<std::size_t>(r)] = e.what();
        }
      });
    }
    for (auto& t : threads)
      t.join();
    for (int r = 0; r < n; ++r)
      EXPECT_EQ(errors[static_cast<std::size_t>(r)], "") << "rank " << r;
  }
};

std::vector<float> to_host(const gpu::DeviceMemory& d, std::size_t count) {
  std::vector<float> out(count);
  gpu::copy_async(out.data(), d.data(), count * sizeof(float), nullptr);
  gpu::synchronize(nullptr);
  return out;
}

gpu::DeviceMemory to_device(const std::vector<float>& v) {
  gpu::DeviceMemory d(v.size() * sizeof(float));
  gpu::copy_async(d.data(), v.data(), v.size() * sizeof(float), nullptr);
  gpu::synchronize(nullptr);
  return d;
}

// Rank r's element i: small integers, so every sum is exact in fp32.
float value(int r, std::size_t i) {
  return static_cast<float>((static_cast<std::size_t>(r) * 7 + i) % 97);
}

std::vector<float> input(int r, std::size_t count) {
  std::vector<float> v(count);
  for (std::size_t i = 0; i < count; ++i)
    v[i] = value(r, i);
  return v;
}

// What an all_reduce sum of n ranks' inputs gives.
std::vector<float> sum_of_inputs(int n, std::size_t count) {
  std::vector<float> sum(count);
  for (std::size_t i = 0; i < count; ++i)
    for (int q = 0; q < n; ++q)
      sum[i] += value(q, i);
  return sum;
}

// First index where got differs from want, or -1.
long first_wrong(const std::vector<float>& got, const std::vector<float>& want) {
  for (std::size_t i = 0; i < want.size(); ++i) {
    if (got[i] != want[i]) return static_cast<long>(i);
  }
  return -1;
}

TEST_F(GpuCollectives, AllReduceInAndOutOfPlaceAtEverySize) {
  const int n = 3;
  run_ranks(n, [&](int r, Communicator& comm) {
    // Small, one chunk, several pipeline chunks with a tail.
    for (std::size_t count : {std::size_t{1}, std::size_t{1000}, (std::size_t{3} << 20) + 5}) {
      const std::vector<float> want = sum_of_inputs(n, count);
      auto send = to_device(input(r, count));
      gpu::DeviceMemory recv(count * sizeof(float));
      comm.all_reduce(send.data(), recv.data(), count, DataType::fp32, RedOp::sum).wait();
      EXPECT_EQ(first_wrong(to_host(recv, count), want), -1) << "out of place, count " << count;
      comm.all_reduce(send.data(), send.data(), count, DataType::fp32, RedOp::sum).wait();
      EXPECT_EQ(first_wrong(to_host(send, count), want), -1) << "in place, count " << count;
    }
  });
}

// Every collective, staged; and read on the GPU from the peers where
// that path takes it (cuda_ipc: ranks as threads, 2 and 3 of them).
void every_collective_on_device_buffers(int n, const CommOptions& options) {
  const std::size_t count = 70001;
  GpuCollectives::run_ranks(
      n,
      [&](int r, Communicator& comm) {
        const std::size_t all = count * n;
        // all_gather, out of place and in place.
        {
          auto send = to_device(input(r, count));
          gpu::DeviceMemory recv(all * sizeof(float));
          comm.all_gather(send.data(), recv.data(), count, DataType::fp32).wait();
          std::vector<float> want;
          for (int q = 0; q < n; ++q) {
            const auto block = input(q, count);
            want.insert(want.end(), block.begin(), block.end());
          }
          EXPECT_EQ(first_wrong(to_host(recv, all), want), -1) << "all_gather";
          std::vector<float> staged(all, -1.0f);
          std::copy_n(input(r, count).begin(), count, staged.begin() + static_cast<long>(r * count));
          auto inplace = to_device(staged);
          auto* mine = static_cast<float*>(inplace.data()) + r * count;
          comm.all_gather(mine, inplace.data(), count, DataType::fp32).wait();
          EXPECT_EQ(first_wrong(to_host(inplace, all), want), -1) << "all_gather in place";
        }
        // reduce_scatter: rank r gets block r of the sum.
        {
          auto send = to_device(input(r, all));
          gpu::DeviceMemory recv(count * sizeof(float));
          comm.reduce_scatter(send.data(), recv.data(), count, DataType::fp32, RedOp::sum).wait();
          std::vector<float> want(count);
          for (std::size_t i = 0; i < count; ++i)
            for (int q = 0; q < n; ++q)
              want[i] += value(q, static_cast<std::size_t>(r) * count + i);
          EXPECT_EQ(first_wrong(to_host(recv, count), want), -1) << "reduce_scatter";
        }
        // broadcast from rank 1, in place; reduce to rank 0.
        {
          auto buf = to_device(r == 1 ? input(1, count) : std::vector<float>(count, 0.0f));
          comm.broadcast(buf.data(), buf.data(), count, DataType::fp32, 1).wait();
          EXPECT_EQ(first_wrong(to_host(buf, count), input(1, count)), -1) << "broadcast";
          auto send = to_device(input(r, count));
          gpu::DeviceMemory recv(count * sizeof(float));
          comm.reduce(send.data(), recv.data(), count, DataType::fp32, RedOp::max, 0).wait();
          if (r == 0) {
            std::vector<float> want(count, -1.0f);
            for (std::size_t i = 0; i < count; ++i)
              for (int q = 0; q < n; ++q)
                want[i] = std::max(want[i], value(q, i));
            EXPECT_EQ(first_wrong(to_host(recv, count), want), -1) << "reduce";
          }
        }
        // all_to_all and sendrecv around the ring.
        {
          auto send = to_device(input(r, all));
          gpu::DeviceMemory recv(all * sizeof(float));
          comm.all_to_all(send.data(), recv.data(), count, DataType::fp32).wait();
          std::vector<float> want(all);
          for (int q = 0; q < n; ++q)
            for (std::size_t i = 0; i < count; ++i)
              want[static_cast<std::size_t>(q) * count + i] = value(q, static_cast<std::size_t>(r) * count + i);
          EXPECT_EQ(first_wrong(to_host(recv, all), want), -1) << "all_to_all";

          auto mine = to_device(input(r, count));
          gpu::DeviceMemory theirs(count * sizeof(float));
          comm.sendrecv(mine.data(), (r + 1) % n, theirs.data(), (r + n - 1) % n, count, DataType::fp32).wait();
          EXPECT_EQ(first_wrong(to_host(theirs, count), input((r + n - 1) % n, count)), -1) << "sendrecv";
          EXPECT_THROW(comm.send(mine.data(), count, DataType::fp32, (r + 1) % n), Error)
              << "a lone send of device memory";
        }
      },
      options);
}

TEST_F(GpuCollectives, EveryCollectiveOnDeviceBuffers) {
  every_collective_on_device_buffers(2, {});
}

TEST_F(GpuCollectives, EveryCollectiveOnTheGpuBetweenThreads) {
  CommOptions options;
  options.cuda_ipc = true;
  every_collective_on_device_buffers(2, options);
  every_collective_on_device_buffers(3, options);
}

// all_reduce read on the GPU from the peers (CommOptions::cuda_ipc), ranks
// as threads: every op the path takes (avg stays staged), in place and out
// of place, at sizes that split unevenly across the ranks' slices.
TEST_F(GpuCollectives, AllReduceOnTheGpuBetweenThreads) {
  const int n = 3;
  CommOptions options;
  options.cuda_ipc = true;
  run_ranks(
      n,
      [&](int r, Communicator& comm) {
        for (RedOp op : {RedOp::sum, RedOp::prod, RedOp::max, RedOp::min, RedOp::avg}) {
          for (std::size_t count : {std::size_t{1}, std::size_t{7}, std::size_t{1000}, (std::size_t{1} << 20) + 3}) {
            std::vector<float> want(count);
            for (std::size_t i = 0; i < count; ++i) {
              float v = op == RedOp::prod ? 1.0f : op == RedOp::max ? -1.0f : op == RedOp::min ? 1000.0f : 0.0f;
              for (int q = 0; q < n; ++q) {
                const float x =
                    op == RedOp::prod ? static_cast<float>(static_cast<int>(value(q, i)) % 3 + 1) : value(q, i);
                v = op == RedOp::prod  ? v * x
                    : op == RedOp::max ? std::max(v, x)
                    : op == RedOp::min ? std::min(v, x)
                                       : v + x;
              }
              want[i] = op == RedOp::avg ? v / n : v;
            }
            std::vector<float> in = input(r, count);
            if (op == RedOp::prod) {
              for (auto& x : in)
                x = static_cast<float>(static_cast<int>(x) % 3 + 1);
            }
            auto send = to_device(in);
            gpu::DeviceMemory recv(count * sizeof(float));
            comm.all_reduce(send.data(), recv.data(), count, DataType::fp32, op).wait();
            const auto got = to_host(recv, count);
            if (op == RedOp::avg) {
              for (std::size_t i = 0; i < count; ++i)
                ASSERT_NEAR(got[i], want[i], 1e-4f * std::abs(want[i]) + 1e-6f)
                    << "avg, count " << count << " at " << i;
            } else {
              EXPECT_EQ(first_wrong(got, want), -1) << name_of(op) << " out of place, count " << count;
              comm.all_reduce(send.data(), send.data(), count, DataType::fp32, op).wait();
              EXPECT_EQ(first_wrong(to_host(send, count), want), -1) << name_of(op) << " in place, count " << count;
            }
          }
        }
      },
      options);
}

// all_reduce, all_gather, reduce_scatter, broadcast and reduce between
// processes, through CUDA IPC: this program started again as each rank
// (RINGMASTER_TEST_IPC_RANK), with the engine's INFO lines, which name the
// path each collective took.
int ipc_rank_main(int r, int n, std::uint16_t port) {
  try {
    gpu::set_device(0);
    CommOptions options;
    options.cuda_ipc = true;
    auto comm = Communicator::create(testing_support::rank_config(r, n, port), options);
    auto check = [&](const char* what, std::size_t count, const std::vector<float>& got,
                     const std::vector<float>& want) {
      if (const long i = first_wrong(got, want); i >= 0) {
        std::printf("rank %d: %s, count %zu: element %ld wrong\n", r, what, count, i);
        return false;
      }
      return true;
    };
    for (std::size_t count : {std::size_t{5}, (std::size_t{4} << 20) + 1}) {
      const std::vector<float> want = sum_of_inputs(n, count);
      auto send = to_device(input(r, count));
      gpu::DeviceMemory recv(count * sizeof(float));
      for (int again = 0; again < 2; ++again) {  // the second reuses the mappings
        comm->all_reduce(send.data(), recv.data(), count, DataType::fp32, RedOp::sum).wait();
        if (!check("all_reduce", count, to_host(recv, count), want)) return 1;
      }
      // all_gather in place: every rank's block lands in every rank's buffer.
      const std::size_t all = count * static_cast<std::size_t>(n);
      std::vector<float> gathered;
      for (int q = 0; q < n; ++q) {
        const auto block = input(q, count);
        gathered.insert(gathered.end(), block.begin(), block.end());
      }
      std::vector<float> mine_only(all, -1.0f);
      std::copy_n(input(r, count).begin(), count,
                  mine_only.begin() + static_cast<long>(static_cast<std::size_t>(r) * count));
      auto both = to_device(mine_only);
      comm->all_gather(static_cast<float*>(both.data()) + static_cast<std::size_t>(r) * count, both.data(), count,
                       DataType::fp32)
          .wait();
      if (!check("all_gather", count, to_host(both, all), gathered)) return 1;
      // reduce_scatter of the gathered blocks: block r of their sum.
      gpu::DeviceMemory block(count * sizeof(float));
      comm->reduce_scatter(both.data(), block.data(), count, DataType::fp32, RedOp::sum).wait();
      std::vector<float> scattered(count);
      for (std::size_t i = 0; i < count; ++i)
        scattered[i] = static_cast<float>(n) * gathered[static_cast<std::size_t>(r) * count + i];
      if (!check("reduce_scatter", count, to_host(block, count), scattered)) return 1;
      // broadcast from the last rank, in place; reduce (max) to rank 0.
      auto root_block = to_device(r == n - 1 ? input(n - 1, count) : std::vector<float>(count, 0.0f));
      comm->broadcast(root_block.data(), root_block.data(), count, DataType::fp32, n - 1).wait();
      if (!check("broadcast", count, to_host(root_block, count), input(n - 1, count))) return 1;
      comm->reduce(send.data(), recv.data(), count, DataType::fp32, RedOp::max, 0).wait();
      if (r == 0) {
        std::vector<float> most(count, -1.0f);
        for (std::size_t i = 0; i < count; ++i)
          for (int q = 0; q < n; ++q)
            most[i] = std::max(most[i], value(q, i));
        if (!check("reduce", count, to_host(recv, count), most)) return 1;
      }
    }
    std::printf("rank %d: every element right\n", r);
    return 0;
  } catch (const std::exception& e) {
    std::printf("rank %d: %s\n", r, e.what());
    return 1;
  }
}

[[maybe_unused]] const int kIpcRank = [] {
  const char* r = std::getenv("RINGMASTER_TEST_IPC_RANK");
  if (r == nullptr) return -1;
  std::fflush(stdout);
  std::exit(ipc_rank_main(std::atoi(r), std::atoi(std::getenv("RINGMASTER_TEST_IPC_NRANKS")),
                          static_cast<std::uint16_t>(std::atoi(std::getenv("RINGMASTER_TEST_IPC_PORT")))));
}();

TEST_F(GpuCollectives, CollectivesOnTheGpuBetweenProcesses) {
  const int n = 2;
  const std::string port = std::to_string(testing_support::free_port());
  std::vector<testing_support::ChildProcess> ranks;
  for (int r = 0; r < n; ++r) {
    ranks.push_back(testing_support::spawn({"/proc/self/exe"},
                                           {{"RINGMASTER_TEST_IPC_RANK", std::to_string(r)},
                                            {"RINGMASTER_TEST_IPC_NRANKS", std::to_string(n)},
                                            {"RINGMASTER_TEST_IPC_PORT", port},
                                            {"NCCL_DEBUG", "INFO"},
                                            {"NCCL_DEBUG_SUBSYS", "ALL"}},
                                           true));
  }
  for (int r = 0; r < n; ++r) {
    auto& child = ranks[static_cast<std::size_t>(r)];
    child.finish();
    EXPECT_EQ(child.exit_code(), 0) << child.output;
    EXPECT_NE(child.output.find("every element right"), std::string::npos) << child.output;
    for (const char* what : {"all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce"}) {
      EXPECT_NE(
          child.output.find(fmt::format(
              "{} of device buffers: read on the GPU from the peers (0 in this process, 1 through CUDA IPC)", what)),
          std::string::npos)
          << what << ": " << child.output;
    }
  }
}

}  // namespace
}  // namespace ringmaster

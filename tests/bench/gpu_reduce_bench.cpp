// The CUDA reduction kernels against a device-to-device copy of the same
// size, on the first GPU: memory traffic per second of each (a reduce
// reads two buffers and writes one, a copy reads one and writes one) and
// their ratio. Prints one line per dtype x op measured; without a usable
// device it says why and exits 0 (nothing measured).
//
//   gpu_reduce_bench [--bytes 268435456] [--iters 50]
#include <fmt/format.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "gpu/gpu.h"
#include "ringmaster/status.h"

namespace {

using Clock = std::chrono::steady_clock;
using ringmaster::DataType;
using ringmaster::RedOp;
namespace gpu = ringmaster::gpu;

// Seconds per call of `body`, over `iters` calls after 3 warm-ups.
template <class Body>
double seconds_per_call(int iters, Body body) {
  for (int i = 0; i < 3; ++i)
    body();
  gpu::synchronize_device();
  const auto start = Clock::now();
  for (int i = 0; i < iters; ++i)
    body();
  gpu::synchronize_device();
  return std::chrono::duration<double>(Clock::now() - start).count() / iters;
}

}  // namespace

int main(int argc, char** argv) {
  std::size_t bytes = std::size_t{256} << 20;
  int iters = 50;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--bytes") == 0) bytes = std::strtoull(argv[i + 1], nullptr, 10);
    if (std::strcmp(argv[i], "--iters") == 0) iters = std::atoi(argv[i + 1]);
  }
  const auto& a = gpu::availability();
  if (!a.usable) {
    fmt::print("gpu_reduce_bench: nothing measured: {}\n", a.why);
    return 0;
  }
  try {
    gpu::DeviceMemory x(bytes), y(bytes), out(bytes);
    // Finite values, so no path is timed on NaN or denormal inputs.
    std::vector<float> host(bytes / sizeof(float), 1.5f);
    gpu::copy_async(x.data(), host.data(), host.size() * sizeof(float), nullptr);
    gpu::copy_async(y.data(), host.data(), host.size() * sizeof(float), nullptr);
    gpu::synchronize(nullptr);

    const double copy_s = seconds_per_call(iters, [&] { gpu::copy_async(out.data(), x.data(), bytes, nullptr); });
    const double copy_gbs = 2.0 * static_cast<double>(bytes) / copy_s / 1e9;
    fmt::print("# {} MiB per buffer, {} calls each, CUDA driver {}.{}\n", bytes >> 20, iters, a.driver_version / 1000,
               a.driver_version % 1000 / 10);
    fmt::print("{:<10} {:<6} {:>10} {:>12} {:>8}\n", "dtype", "op", "time_us", "traffic_GB/s", "vs_copy");
    fmt::print("{:<10} {:<6} {:>10.1f} {:>12.1f} {:>8}\n", "copy", "-", copy_s * 1e6, copy_gbs, "1.00");
    const std::pair<DataType, RedOp> cases[] = {{DataType::fp32, RedOp::sum},  {DataType::bf16, RedOp::sum},
                                                {DataType::fp16, RedOp::sum},  {DataType::fp64, RedOp::sum},
                                                {DataType::int32, RedOp::sum}, {DataType::int8, RedOp::sum},
                                                {DataType::fp32, RedOp::max},  {DataType::bf16, RedOp::prod}};
    for (const auto& [type, op] : cases) {
      const std::size_t count = bytes / ringmaster::size_of(type);
      const double s =
          seconds_per_call(iters, [&] { gpu::reduce(out.data(), x.data(), y.data(), count, type, op, nullptr); });
      const double gbs = 3.0 * static_cast<double>(bytes) / s / 1e9;
      fmt::print("{:<10} {:<6} {:>10.1f} {:>12.1f} {:>8.2f}\n", ringmaster::name_of(type), ringmaster::name_of(op),
                 s * 1e6, gbs, gbs / copy_gbs);
    }
  } catch (const ringmaster::Error& e) {
    fmt::print(stderr, "gpu_reduce_bench: {}\n", e.what());
    return 1;
  }
  return 0;
}

// Reduction kernel bandwidth against memcpy, in one run.
//
// Byte convention: every byte read or written counts once. A reduction of
// two N-byte buffers into a third moves 3N (2 reads + 1 write); memcpy of N
// bytes moves 2N (1 read + 1 write). The closing lines print each
// bandwidth (median of 5 repetitions) and the ratios the performance notes
// quote.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "kernels/reduce.h"

namespace {

using ringmaster::DataType;
using ringmaster::RedOp;
namespace kernels = ringmaster::kernels;

constexpr std::size_t kBytes = std::size_t{64} << 20;

struct Buffers {
  std::unique_ptr<std::byte[]> a{new std::byte[kBytes]}, b{new std::byte[kBytes]}, out{new std::byte[kBytes]};
  Buffers() {
    // Small integers in every byte keep fp/bf16 values finite and normal.
    std::memset(a.get(), 0x3c, kBytes);
    std::memset(b.get(), 0x3d, kBytes);
    std::memset(out.get(), 0, kBytes);
  }
};

Buffers& buffers() {
  static Buffers b;
  return b;
}

void set_rate(benchmark::State& state, std::size_t bytes_per_iteration) {
  state.counters["GB/s"] =
      benchmark::Counter(static_cast<double>(bytes_per_iteration) * state.iterations(), benchmark::Counter::kIsRate);
}

void BM_memcpy(benchmark::State& state) {
  auto& buf = buffers();
  for (auto _ : state) {
    std::memcpy(buf.out.get(), buf.a.get(), kBytes);
    benchmark::ClobberMemory();
  }
  set_rate(state, 2 * kBytes);
}

void BM_reduce(benchmark::State& state, DataType type) {
  auto& buf = buffers();
  const std::size_t count = kBytes / ringmaster::size_of(type);
  for (auto _ : state) {
    kernels::reduce(buf.out.get(), buf.a.get(), buf.b.get(), count, type, RedOp::sum);
    benchmark::ClobberMemory();
  }
  set_rate(state, 3 * kBytes);
}

BENCHMARK(BM_memcpy)
    ->Name("memcpy/64MiB")
    ->Unit(benchmark::kMillisecond)
    ->MinTime(0.5)
    ->Repetitions(5)
    ->ReportAggregatesOnly(true);
BENCHMARK_CAPTURE(BM_reduce, fp32, DataType::fp32)
    ->Name("reduce_sum/float/64MiB")
    ->Unit(benchmark::kMillisecond)
    ->MinTime(0.5)
    ->Repetitions(5)
    ->ReportAggregatesOnly(true);
BENCHMARK_CAPTURE(BM_reduce, bf16, DataType::bf16)
    ->Name("reduce_sum/bfloat16/64MiB")
    ->Unit(benchmark::kMillisecond)
    ->MinTime(0.5)
    ->Repetitions(5)
    ->ReportAggregatesOnly(true);

// Keeps each run's rate so the ratios can be printed after the table.
class RateReporter : public benchmark::ConsoleReporter {
 public:
  std::map<std::string, double> rate;
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const auto& run : runs) {
      auto it = run.counters.find("GB/s");
      if (it != run.counters.end() && run.run_type == Run::RT_Aggregate && run.aggregate_name == "median") {
        rate[run.run_name.function_name] = it->second.value;
      }
    }
    ConsoleReporter::ReportRuns(runs);
  }
};

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  std::printf("reduce kernels: level %s; bytes counted as reads + writes (reduce 2R+1W, memcpy 1R+1W)\n",
              std::string(kernels::name_of(kernels::active_level())).c_str());
  RateReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  const double memcpy_rate = reporter.rate["memcpy/64MiB"];
  if (memcpy_rate <= 0) return 0;
  std::printf("\n%-28s %10s %18s\n", "kernel (64 MiB, median)", "GB/s", "ratio to memcpy");
  for (const auto& [name, rate] : reporter.rate) {
    std::printf("%-28s %10.2f %18.2f\n", name.c_str(), rate / 1e9, rate / memcpy_rate);
  }
  return 0;
}

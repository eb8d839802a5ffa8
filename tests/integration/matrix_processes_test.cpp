// The dtype x op matrix once more, as separate processes: three ranks, each
// its own process through the public API (tests/integration/
// collective_rank.cpp), over shared memory and over sockets, and every
// element compared with a reference this file computes in long double from
// the inputs' formula (matrix_slice.h), not with the engine's kernels, which
// the in-process matrix's #wrong oracle uses.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>

#include "matrix_slice.h"
#include "process.h"

namespace ringmaster {
namespace {

namespace ms = matrix_slice;

// The reduction of element i over every rank's input, in long double:
// avg of integers truncates toward zero after the sum, as NCCL's does.
long double expected(std::size_t i, int n, DataType t, RedOp op) {
  long double acc = ms::input_value(0, i, t, op);
  for (int r = 1; r < n; ++r) {
    const long double v = ms::input_value(r, i, t, op);
    switch (op) {
      case RedOp::sum:
      case RedOp::avg:
        acc += v;
        break;
      case RedOp::prod:
        acc *= v;
        break;
      case RedOp::max:
        acc = std::max(acc, v);
        break;
      case RedOp::min:
        acc = std::min(acc, v);
        break;
    }
  }
  if (op == RedOp::avg) acc = ms::is_float(t) ? acc / n : std::trunc(acc / n);
  return acc;
}

// Exact, except float averages: NCCL (and the engine) scale each input by
// 1/n in the type before summing, a few units in the last place.
long double tolerance(DataType t, RedOp op, long double value) {
  if (op != RedOp::avg || !ms::is_float(t)) return 0;
  const long double eps = t == DataType::fp16   ? std::ldexp(1.0L, -10)
                          : t == DataType::bf16 ? std::ldexp(1.0L, -7)
                          : t == DataType::fp32 ? std::numeric_limits<float>::epsilon()
                                                : std::numeric_limits<double>::epsilon();
  return 4 * eps * std::max<long double>(1, std::fabs(value));
}

void run_slice(const std::string& transport, const std::map<std::string, std::string>& extra_env) {
  constexpr int kRanks = 3;
  constexpr std::size_t kCount = 1027;  // not a multiple of channels, slots or lines
  const std::filesystem::path out =
      std::filesystem::path(::testing::TempDir()) / ("matrix-" + transport + "-" + std::to_string(::getpid()));
  std::filesystem::remove_all(out);
  std::filesystem::create_directories(out);
  const auto port = testing_support::free_port();
  std::vector<testing_support::ChildProcess> ranks;
  for (int r = 0; r < kRanks; ++r) {
    std::map<std::string, std::string> env = {{"RANK", std::to_string(r)},
                                              {"WORLD_SIZE", std::to_string(kRanks)},
                                              {"MASTER_ADDR", "127.0.0.1"},
                                              {"MASTER_PORT", std::to_string(port)},
                                              {"RINGMASTER_STORE_TIMEOUT", "60"}};
    env.insert(extra_env.begin(), extra_env.end());
    ranks.push_back(testing_support::spawn({RINGMASTER_COLLECTIVE_RANK, out.string(), std::to_string(kCount)}, env,
                                           /*with_stderr=*/true));
  }
  for (int r = 0; r < kRanks; ++r) {
    ranks[static_cast<std::size_t>(r)].finish();
    ASSERT_EQ(ranks[static_cast<std::size_t>(r)].exit_code(), 0)
        << "rank " << r << ": " << ranks[static_cast<std::size_t>(r)].output;
  }
  int checked = 0;
  for (DataType t : ms::kTypes) {
    for (RedOp op : ms::kOps) {
      for (const std::string collective : {"all_reduce", "reduce_scatter"}) {
        for (int r = 0; r < kRanks; ++r) {
          std::ifstream in(out / ms::file_name(collective, t, op, r), std::ios::binary);
          const std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
          ASSERT_EQ(bytes.size(), kCount * size_of(t)) << collective << " rank " << r;
          int wrong = 0;
          for (std::size_t j = 0; j < kCount && wrong < 3; ++j) {
            const std::size_t i = collective == "reduce_scatter" ? static_cast<std::size_t>(r) * kCount + j : j;
            const long double want = expected(i, kRanks, t, op);
            const long double got = ms::load(bytes.data(), j, t);
            if (std::fabs(got - want) > tolerance(t, op, want)) {
              ++wrong;
              ADD_FAILURE() << collective << " " << name_of(t) << " " << name_of(op) << " over " << transport
                            << ": rank " << r << " element " << j << " is " << static_cast<double>(got) << ", expected "
                            << static_cast<double>(want);
            }
          }
          ++checked;
        }
      }
    }
  }
  EXPECT_EQ(checked, 10 * 5 * 2 * kRanks);
  std::filesystem::remove_all(out);
}

TEST(MatrixProcesses, SharedMemoryAgainstAnIndependentReference) {
  run_slice("shm", {});
}

TEST(MatrixProcesses, SocketsAgainstAnIndependentReference) {
  run_slice("socket", {{"NCCL_SHM_DISABLE", "1"}});
}

// The reference's own encoding, against values whose bits are known.
TEST(MatrixProcesses, ReferenceEncodesHalfFloatsAsIEEE) {
  EXPECT_EQ(ms::fp16_bits(1.0f), 0x3c00);
  EXPECT_EQ(ms::fp16_bits(-2.0f), 0xc000);
  EXPECT_EQ(ms::fp16_bits(30.0f), 0x4f80);
  EXPECT_EQ(ms::fp16_value(0x3555), 0.333251953125);
  EXPECT_EQ(ms::bf16_bits(1.0f), 0x3f80);
  EXPECT_EQ(ms::bf16_value(0xc0a0), -5.0);
}

}  // namespace
}  // namespace ringmaster

// The full matrix (every dtype x op x size x ranks, over shared memory,
// sockets, a mix and libfabric), registered as ctest's `slow` entries
// collectives_full_matrix_*; the representative subset is in
// collectives_test.
#include "collectives_test_support.h"

namespace ringmaster {
namespace {

using namespace collectives_support;

// Every collective, dtype and op over shared memory at these rank counts:
// every dtype x op at the small and odd sizes; the large sizes, whose
// reference costs O(ranks^2 x count) to build, for one type of each width
// class.
void shared_memory_matrix(std::initializer_list<int> rank_counts) {
  for (int n : rank_counts) {
    for (Collective c : kCollectives) {
      const bool reduces = c == Collective::all_reduce || c == Collective::reduce_scatter || c == Collective::reduce;
      for (DataType t : kAllDataTypes) {
        for (RedOp op : kAllRedOps) {
          if (!reduces && op != RedOp::sum) continue;
          check({c, t, op}, n, {0, 1, 7, 1023});
        }
      }
      for (DataType t : {DataType::fp32, DataType::bf16, DataType::int8, DataType::fp64}) {
        check({c, t, RedOp::sum}, n, {(1u << 20) + 3});
      }
      // 16 Mi elements in the largest buffer (all_gather's output,
      // reduce_scatter's input), so 8 ranks stay within memory.
      const bool per_rank = c == Collective::all_gather || c == Collective::reduce_scatter ||
                            c == Collective::all_to_all || c == Collective::gather || c == Collective::scatter;
      if (n == 2 || n == 4) check({c, DataType::fp32, RedOp::sum}, n, {(16u << 20) / (per_rank ? n : 1)});
    }
  }
}

// In three parts, each its own ctest entry: one test of them all took
// 470-620 s on a 2-core machine.
TEST(FullMatrix, SharedMemoryOneToThreeRanks) {
  shared_memory_matrix({1, 2, 3});
}

TEST(FullMatrix, SharedMemoryFourAndEightRanks) {
  shared_memory_matrix({4, 8});
}

// Sockets and mixed transports at 4 ranks, every collective and width.
TEST(FullMatrix, SocketsAndMixed) {
  for (Links links : {Links::socket, Links::mixed}) {
    for (Collective c : kCollectives) {
      for (DataType t : {DataType::fp32, DataType::bf16, DataType::int8, DataType::fp64})
        check({c, t, RedOp::sum}, 4, {0, 1, 7, 1023, (1u << 20) + 3}, links);
    }
  }
}

// libfabric at 4 ranks: alone and beside shared memory.
TEST(FullMatrix, OverLibfabric) {
  if (!ofi_usable()) GTEST_SKIP() << transport::ofi::availability("lo").why;
  for (Collective c : kCollectives) {
    check({c, DataType::fp32, RedOp::sum}, 4, {0, 1, 7, 1023, (1u << 20) + 3}, Links::ofi);
    check({c, DataType::fp32, RedOp::sum}, 4, {0, 7, 1023, (1u << 20) + 3}, Links::mixed_ofi);
  }
}

}  // namespace
}  // namespace ringmaster

// Collectives' results over every transport: each element checked, out of
// place and in place, through rings and trees, both protocols, direct
// connections, topology files, counters. The full matrix is
// collectives_matrix_test.
#include "collectives_test_support.h"

namespace ringmaster {
namespace {

using namespace collectives_support;

TEST(Collectives, RepresentativeSubset) {
  const std::vector<std::size_t> counts = {0, 1, 7, 1023, (1u << 20) + 3};
  for (int n : {1, 2, 3, 4}) {
    for (Collective c : kCollectives)
      check({c, DataType::fp32, RedOp::sum}, n, counts);
  }
  // The same over sockets only, and with one rank on sockets among ranks
  // that share memory (each connection carried by its own transport).
  for (Collective c : kCollectives) {
    check({c, DataType::fp32, RedOp::sum}, 2, counts, Links::socket);
    check({c, DataType::fp32, RedOp::sum}, 3, counts, Links::mixed);
  }
  EXPECT_EQ(shm_segments(), 0) << "segments left in /dev/shm";
  for (DataType t : {DataType::bf16, DataType::fp16, DataType::int8, DataType::uint64, DataType::fp64}) {
    check({Collective::all_reduce, t, RedOp::sum}, 3, {1023});
  }
  for (RedOp op : {RedOp::prod, RedOp::max, RedOp::min, RedOp::avg}) {
    check({Collective::all_reduce, DataType::fp32, op}, 4, {7, 1023});
    check({Collective::reduce_scatter, DataType::int32, op}, 3, {1023});
    check({Collective::reduce, DataType::bf16, op}, 3, {1023});
  }
}

// Shared memory lays LL and LL128 steps out as flagged lines (16 and 128
// bytes) instead of the byte ring: every collective through both, at sizes
// within one line, across many, and beyond the rings (64 KiB and 256 KiB),
// so they wrap and the writer waits for the reader.
TEST(Collectives, LineProtocolsOverSharedMemory) {
  const std::vector<std::size_t> counts = {0, 1, 7, 29, 1023, 65537, (1u << 20) + 3};
  for (int n : {1, 2, 3, 4}) {
    for (Collective c : kCollectives)
      check({c, DataType::fp32, RedOp::sum}, n, counts, Links::shm, {Protocol::ll, Protocol::ll128});
  }
  for (DataType t : {DataType::bf16, DataType::int8, DataType::fp64})
    check({Collective::all_reduce, t, RedOp::max}, 3, {1023, 65537}, Links::shm, {Protocol::ll, Protocol::ll128});
  EXPECT_EQ(shm_segments(), 0) << "segments left in /dev/shm";
}

// Ring and tree reductions read the peer's bytes where they lie in the
// shared-memory FIFO. A FIFO of an odd size makes elements straddle its wrap
// (those are copied out, the rest reduced in place) at every width.
TEST(Collectives, ReductionsReadFromTheFifoAcrossItsWrap) {
  ::setenv("RINGMASTER_SHM_FIFO_BYTES", "4099", 1);
  for (DataType t : {DataType::int8, DataType::bf16, DataType::fp32, DataType::fp64}) {
    for (Collective c : {Collective::all_reduce, Collective::reduce_scatter, Collective::reduce})
      check({c, t, RedOp::sum}, 3, {7, 1023, 65537}, Links::shm, {Protocol::simple});
  }
  check({Collective::all_reduce, DataType::fp64, RedOp::max}, 2, {1, 65537}, Links::shm, {Protocol::simple});
  check({Collective::all_reduce, DataType::int32, RedOp::prod}, 5, {1023, 65537}, Links::shm, {Protocol::simple});
  ::unsetenv("RINGMASTER_SHM_FIFO_BYTES");
  EXPECT_EQ(shm_segments(), 0) << "segments left in /dev/shm";
}

// Over sockets, steps from 64 KiB are read into the connection's small
// lending buffer and reduced from there; a read ends wherever the kernel
// stops, so elements are cut at its end as at a FIFO's wrap. One socket
// per connection and three (striped).
TEST(Collectives, ReductionsOverSocketsReadFromTheLendingBuffer) {
  for (const char* nsocks : {"1", "3"}) {
    ::setenv("RINGMASTER_NSOCKS_PER_CHANNEL", nsocks, 1);
    for (DataType t : {DataType::int8, DataType::bf16, DataType::fp64}) {
      for (Collective c : {Collective::all_reduce, Collective::reduce_scatter, Collective::reduce})
        check({c, t, RedOp::sum}, 3, {65537, (1u << 20) + 3}, Links::socket, {Protocol::simple});
      // Two ranks up to 512 KiB exchange whole inputs and reduce as they arrive.
      check({Collective::all_reduce, t, RedOp::sum}, 2, {65537, 100003}, Links::socket, {Protocol::simple});
      check({Collective::all_reduce, t, RedOp::avg}, 2, {65537}, Links::socket, {Protocol::simple});
    }
  }
  ::unsetenv("RINGMASTER_NSOCKS_PER_CHANNEL");
}

// avg of floating types multiplies each rank's input by 1/n before the sum,
// as NCCL does: the largest fp16 (65504) averaged on 3 ranks gave +inf
// when the sum came first; bf16 and fp32 near their largest alike. Every
// schedule that reduces: ring, tree, the 2-rank pair, reduce_scatter and
// reduce.
TEST(Collectives, AvgOfTheLargestFloatsStaysFinite) {
  using kernels::bf16_to_float;
  using kernels::half_to_float;
  struct Case {
    DataType type;
    std::uint32_t bits;  // the element's bit pattern, as wide as the type
    double value;
  };
  const Case cases[] = {{DataType::fp16, 0x7BFF, 65504.0},
                        {DataType::bf16, 0x7F7F, 3.3895313892515355e38},
                        {DataType::fp32, 0x7F7FFFFF, 3.4028234663852886e38}};
  for (int n : {2, 3}) {
    for (const auto& k : cases) {
      for (Collective c : {Collective::all_reduce, Collective::reduce_scatter, Collective::reduce}) {
        for (Algorithm a : {Algorithm::ring, Algorithm::tree}) {
          if (a == Algorithm::tree && c == Collective::reduce_scatter) continue;
          SCOPED_TRACE(fmt::format("{} {} {} on {} ranks", name_of(c), name_of(k.type), name_of(a), n));
          const std::size_t count = 1000;
          const std::size_t es = size_of(k.type);
          const auto port = free_port();
          std::vector<std::vector<std::byte>> results(static_cast<std::size_t>(n));
          std::vector<std::string> errors(static_cast<std::size_t>(n));
          std::vector<std::thread> threads;
          for (int r = 0; r < n; ++r) {
            threads.emplace_back([&, r] {
              try {
                auto comm = Communicator::create(rank_config(r, n, port));
                comm->select(a, std::nullopt);
                const std::size_t in_count =
                    c == Collective::reduce_scatter ? count * static_cast<std::size_t>(n) : count;
                std::vector<std::byte> in(in_count * es), out(count * es);
                for (std::size_t i = 0; i < in_count; ++i)
                  std::memcpy(in.data() + i * es, &k.bits, es);
                if (c == Collective::all_reduce) {
                  comm->all_reduce(in.data(), out.data(), count, k.type, RedOp::avg).wait();
                } else if (c == Collective::reduce_scatter) {
                  comm->reduce_scatter(in.data(), out.data(), count, k.type, RedOp::avg).wait();
                } else {
                  comm->reduce(in.data(), out.data(), count, k.type, RedOp::avg, n - 1).wait();
                }
                if (c != Collective::reduce || r == n - 1) results[static_cast<std::size_t>(r)] = out;
              } catch (const std::exception& e) {
                errors[static_cast<std::size_t>(r)] = e.what();
              }
            });
          }
          for (auto& t : threads)
            t.join();
          for (int r = 0; r < n; ++r) {
            ASSERT_EQ(errors[static_cast<std::size_t>(r)], "") << "rank " << r;
            const auto& out = results[static_cast<std::size_t>(r)];
            for (std::size_t i = 0; i < out.size() / es; ++i) {
              std::uint32_t bits = 0;
              std::memcpy(&bits, out.data() + i * es, es);
              float f = 0;
              if (k.type == DataType::fp32) std::memcpy(&f, &bits, 4);
              const double v = k.type == DataType::fp16   ? half_to_float(static_cast<std::uint16_t>(bits))
                               : k.type == DataType::bf16 ? bf16_to_float(static_cast<std::uint16_t>(bits))
                                                          : f;
              ASSERT_TRUE(std::isfinite(v)) << "rank " << r << " element " << i << " is " << v;
              ASSERT_NEAR(v / k.value, 1.0, 0.01) << "rank " << r << " element " << i;
            }
          }
        }
      }
    }
  }
}

// Steps from 64 KiB over sockets carry filler between header and data,
// sized by where the sender's data lies in its page (none when it already
// lies half a page from the header's end): buffers at every kind of page
// offset, in and out of place, reduced (lent) and gathered (not lent).
TEST(Collectives, LargeSocketStepsFromBuffersAtAnyPageOffset) {
  constexpr std::size_t kCount = (64 * 1024 + 12) / 4;  // 2 ranks: steps just over 32 KiB and 64 KiB
  run_ranks(
      2,
      [&](Communicator& comm) {
        const int r = comm.rank();
        for (std::size_t offset :
             {std::size_t{0}, std::size_t{8}, std::size_t{16}, std::size_t{2072}, std::size_t{4088}}) {
          for (std::size_t count : {kCount, 2 * kCount}) {
            std::vector<std::byte> in_store(count * 4 + 2 * 4096), out_store(2 * count * 4 + 2 * 4096);
            auto page = [&](std::vector<std::byte>& v) {
              const auto at = reinterpret_cast<std::uintptr_t>(v.data());
              return reinterpret_cast<float*>(v.data() + ((4096 - at % 4096) % 4096) + offset);
            };
            float* in = page(in_store);
            float* out = page(out_store);
            for (std::size_t i = 0; i < count; ++i)
              in[i] = static_cast<float>((i * 7 + static_cast<std::size_t>(r)) % 1000);
            comm.all_reduce(in, out, count, DataType::fp32, RedOp::sum).wait();
            for (std::size_t i = 0; i < count; ++i) {
              const auto want = static_cast<float>((i * 7) % 1000 + (i * 7 + 1) % 1000);
              ASSERT_EQ(out[i], want) << "all_reduce at page offset " << offset << ", element " << i;
            }
            comm.all_gather(in, out, count, DataType::fp32).wait();
            for (std::size_t i = 0; i < 2 * count; ++i) {
              const auto want = static_cast<float>(((i % count) * 7 + i / count) % 1000);
              ASSERT_EQ(out[i], want) << "all_gather at page offset " << offset << ", element " << i;
            }
          }
        }
      },
      {}, Links::socket);
}

// The double binary trees at rank counts whose trees are lopsided (odd,
// non-powers of two) and at 16, every root, pieces of 64 KiB.
TEST(Collectives, TreesAcrossRankCounts) {
  for (int n : {5, 6, 8, 16}) {
    for (Collective c : {Collective::all_reduce, Collective::broadcast, Collective::reduce})
      check({c, DataType::fp32, RedOp::sum}, n, {1, 7, 1023, 65537});
  }
  check({Collective::all_reduce, DataType::int64, RedOp::max}, 7, {1000003});
  // Trees over hosts: one host here, so a chain from rank 0 (or the root).
  ::setenv("RINGMASTER_TREE_NODES", "host", 1);
  for (Collective c : {Collective::all_reduce, Collective::broadcast, Collective::reduce})
    check({c, DataType::fp32, RedOp::sum}, 5, {1, 1023, 65537});
  ::unsetenv("RINGMASTER_TREE_NODES");
}

TEST(Collectives, PointToPointLeavesCollectivesInStep) {
  // Only ranks 0 and 2 exchange point-to-point messages; afterwards every
  // rank runs a collective, whose sequence numbers must still agree.
  run_ranks(3, [](Communicator& comm) {
    std::vector<std::int32_t> message(1000);
    if (comm.rank() == 0) {
      for (int i = 0; i < 1000; ++i)
        message[i] = i * 3;
      comm.send(message.data(), message.size(), DataType::int32, 2).wait();
      comm.send(message.data(), 10, DataType::int32, 2).wait();
    } else if (comm.rank() == 2) {
      comm.recv(message.data(), message.size(), DataType::int32, 0).wait();
      for (int i = 0; i < 1000; ++i)
        ASSERT_EQ(message[i], i * 3);
      std::vector<std::int32_t> small(10);
      comm.recv(small.data(), 10, DataType::int32, 0).wait();
      EXPECT_EQ(small[9], 27);
    }
    std::vector<float> data(64, 1.0f);
    comm.all_reduce(data.data(), data.data(), data.size(), DataType::fp32, RedOp::sum).wait();
    EXPECT_EQ(data[63], 3.0f);
    EXPECT_THROW(comm.send(data.data(), 1, DataType::fp32, comm.rank()), Error);  // not another rank
  });
}

// The ranks each rank reaches directly (channel -1), by rank.
std::set<int> direct_peers(const Communicator& comm) {
  std::set<int> peers;
  for (const auto& c : comm.connections()) {
    if (c.channel < 0) peers.insert(c.peer);
  }
  return peers;
}

// What every rank of a run_ranks job reaches directly after init: each
// rank records its own, then waits until all have.
struct DirectPeersAtInit {
  explicit DirectPeersAtInit(int n) : by_rank(static_cast<std::size_t>(n)), ranks(n) {}
  void record(const Communicator& comm) {
    {
      std::lock_guard lock(mutex);
      by_rank[static_cast<std::size_t>(comm.rank())] = direct_peers(comm);
    }
    ++recorded;
    while (recorded.load() < ranks)
      std::this_thread::sleep_for(1ms);
  }
  bool connected(int a, int b) const { return by_rank[static_cast<std::size_t>(a)].count(b) != 0; }
  std::vector<std::set<int>> by_rank;
  const int ranks;
  std::mutex mutex;
  std::atomic<int> recorded{0};
};

// Init connects the rings and all_reduce's tree neighbours; any other
// direct connection is made by the first call that needs it. Every rank
// used to open one to every other at init: 7 a rank at 8 ranks, 56 ends in
// all, most of them never used.
TEST(Collectives, DirectConnectionsAreMadeWhenFirstUsed) {
  constexpr int kRanks = 8;
  DirectPeersAtInit init(kRanks);
  run_ranks(kRanks, [&](Communicator& comm) {
    const int rank = comm.rank();
    init.record(comm);
    std::size_t ends = 0;
    for (const auto& peers : init.by_rank) {
      EXPECT_LE(peers.size(), 6u);  // a parent and two children in each of the two trees
      ends += peers.size();
    }
    EXPECT_LT(ends, static_cast<std::size_t>(kRanks * (kRanks - 1)));
    // A pair with no direct connection yet: a message between them
    // connects them, and only them.
    int a = -1, b = -1;
    for (int x = 0; x < kRanks && a < 0; ++x) {
      for (int y = x + 1; y < kRanks && a < 0; ++y) {
        if (!init.connected(x, y)) {
          a = x;
          b = y;
        }
      }
    }
    ASSERT_GE(a, 0) << "every pair was connected at init";
    std::vector<std::int32_t> message(1000);
    if (rank == b) {
      for (int i = 0; i < 1000; ++i)
        message[static_cast<std::size_t>(i)] = i * 7;
      comm.send(message.data(), message.size(), DataType::int32, a).wait();  // the higher rank first
    } else if (rank == a) {
      std::this_thread::sleep_for(50ms);  // its offer waits for this call
      comm.recv(message.data(), message.size(), DataType::int32, b).wait();
      EXPECT_EQ(message[999], 999 * 7);
    }
    auto now = direct_peers(comm);
    auto expected = init.by_rank[static_cast<std::size_t>(rank)];
    if (rank == a) expected.insert(b);
    if (rank == b) expected.insert(a);
    EXPECT_EQ(now, expected) << "rank " << rank;
    // all_to_all reaches every rank.
    std::vector<std::int32_t> send(kRanks), recv(kRanks, -1);
    for (int p = 0; p < kRanks; ++p)
      send[static_cast<std::size_t>(p)] = rank * 100 + p;
    comm.all_to_all(send.data(), recv.data(), 1, DataType::int32).wait();
    for (int p = 0; p < kRanks; ++p)
      EXPECT_EQ(recv[static_cast<std::size_t>(p)], p * 100 + rank);
    EXPECT_EQ(direct_peers(comm).size(), static_cast<std::size_t>(kRanks - 1)) << "rank " << rank;
    // One connection a peer, over shared memory as the rings' are.
    int direct = 0;
    for (const auto& c : comm.connections()) {
      if (c.channel >= 0) continue;
      ++direct;
      EXPECT_EQ(c.transport, "SHM") << "rank " << rank << " to " << c.peer;
    }
    EXPECT_EQ(direct, kRanks - 1) << "rank " << rank;
  });
}

// A message whose peer never comes fails after the call's timeout, naming
// that peer, whichever of the two opens the connection.
TEST(Collectives, DirectConnectionToAPeerThatNeverComesTimesOut) {
  constexpr int kRanks = 8;
  DirectPeersAtInit init(kRanks);
  std::atomic<int> done{0};
  std::vector<std::string> errors(kRanks);
  CommOptions options;
  options.timeout = 2s;
  run_ranks(
      kRanks,
      [&](Communicator& comm) {
        const int rank = comm.rank();
        init.record(comm);
        // Two unconnected pairs (a, b), (c, d): a sends to b (a opens the
        // connection and waits for an answer), d sends to c (d waits for
        // c's offer); b and c never receive.
        std::vector<std::pair<int, int>> pairs;
        std::set<int> used;
        for (int x = 0; x < kRanks && pairs.size() < 2; ++x) {
          for (int y = x + 1; y < kRanks && pairs.size() < 2; ++y) {
            if (used.count(x) || used.count(y) || init.connected(x, y)) continue;
            pairs.emplace_back(x, y);
            used.insert(x);
            used.insert(y);
          }
        }
        ASSERT_EQ(pairs.size(), 2u);
        const auto [a, b] = pairs[0];
        const auto [c, d] = pairs[1];
        std::vector<float> data(16, 1.0f);
        const auto start = std::chrono::steady_clock::now();
        try {
          if (rank == a) comm.send(data.data(), data.size(), DataType::fp32, b).wait();
          if (rank == d) comm.send(data.data(), data.size(), DataType::fp32, c).wait();
        } catch (const Error& e) {
          errors[static_cast<std::size_t>(rank)] = e.what();
          EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);
        }
        ++done;
        while (done.load() < kRanks)
          std::this_thread::sleep_for(1ms);
        if (rank == a) {
          EXPECT_NE(errors[static_cast<std::size_t>(a)].find(fmt::format("rank {} did not answer", b)),
                    std::string::npos)
              << errors[static_cast<std::size_t>(a)];
        }
        if (rank == d) {
          EXPECT_NE(errors[static_cast<std::size_t>(d)].find(fmt::format("rank {} did not open", c)), std::string::npos)
              << errors[static_cast<std::size_t>(d)];
        }
        if (rank == a || rank == d) {
          EXPECT_NE(errors[static_cast<std::size_t>(rank)].find("RINGMASTER_COLL_TIMEOUT"), std::string::npos);
        }
      },
      options);
}

// RINGMASTER_NSOCKS_PER_CHANNEL: each ring connection over sockets is
// striped across several, the direct ones keep one; every collective still
// delivers every byte in order, at sizes within one stripe and across many.
TEST(Collectives, SeveralSocketsPerConnection) {
  ::setenv("RINGMASTER_NSOCKS_PER_CHANNEL", "3", 1);
  for (Collective c : kCollectives)
    check({c, DataType::fp32, RedOp::sum}, 3, {1, 1023, (1u << 20) + 3}, Links::socket);
  run_ranks(
      2,
      [](Communicator& comm) {
        int ring = 0;
        for (const auto& c : comm.connections()) {
          EXPECT_EQ(c.transport, "SOCKET");
          EXPECT_EQ(c.sockets, c.channel >= 0 ? 3 : 1) << "channel " << c.channel << " peer " << c.peer;
          ring += c.channel >= 0;
        }
        EXPECT_GT(ring, 0);
        std::vector<float> data(3 << 20, 1.0f);
        comm.all_reduce(data.data(), data.data(), data.size(), DataType::fp32, RedOp::sum).wait();
        EXPECT_EQ(data.front(), 2.0f);
        EXPECT_EQ(data.back(), 2.0f);
      },
      {}, Links::socket);
  ::unsetenv("RINGMASTER_NSOCKS_PER_CHANNEL");
}

// libfabric (tcp;ofi_rxm on loopback): every collective over it alone and
// beside shared memory, with sizes that take the provider's eager and
// rendezvous paths and several slots per step.
TEST(Collectives, OverLibfabric) {
  if (!ofi_usable()) GTEST_SKIP() << transport::ofi::availability("lo").why;
  for (Collective c : kCollectives) {
    check({c, DataType::fp32, RedOp::sum}, 2, {0, 1, 7, 1023, (1u << 20) + 3}, Links::ofi);
    check({c, DataType::fp32, RedOp::sum}, 3, {1, 1023, 65537}, Links::mixed_ofi);
  }
  check({Collective::all_reduce, DataType::bf16, RedOp::max}, 3, {1023, 65537}, Links::ofi);
}

// Loading libfabric leaves the process's signal handlers as they were.
// Debian's libfabric loads PSM's libinfinipath, which took SIGINT, SIGTERM,
// SIGSEGV, SIGBUS, SIGILL and SIGABRT with a handler that calls exit(): an
// agent told to stop while inside malloc hung there for good, and a crash
// no longer dumped core.
TEST(Collectives, LoadingLibfabricKeepsTheProcesssSignalHandlers) {
  struct sigaction mine = {};
  mine.sa_handler = [](int) {};
  sigemptyset(&mine.sa_mask);
  struct sigaction before = {};
  ASSERT_EQ(::sigaction(SIGTERM, &mine, &before), 0);
  const auto& a = transport::ofi::availability("lo");
  if (a.why.starts_with("built without")) GTEST_SKIP() << a.why;
  struct sigaction now = {};
  ::sigaction(SIGTERM, nullptr, &now);
  EXPECT_EQ(now.sa_handler, mine.sa_handler) << "SIGTERM's handler was replaced";
  for (const int sig : {SIGINT, SIGSEGV, SIGBUS, SIGILL, SIGABRT}) {
    ::sigaction(sig, nullptr, &now);
    EXPECT_EQ(now.sa_handler, SIG_DFL) << "signal " << sig << " was taken by a library libfabric loaded";
  }
  ::sigaction(SIGTERM, &before, nullptr);
}

// NCCL_NET=OFI where libfabric cannot serve says why and what to change.
// libfabric reads FI_PROVIDER once per process, so this runs as a ctest of
// its own with FI_PROVIDER=no-such-provider (collectives_ofi_unusable); an
// OwnProcess suite is left out of its binary's main ctest test.
TEST(OwnProcess, AskingForAnUnusableLibfabricProviderSaysWhy) {
  const char* forced = std::getenv("FI_PROVIDER");
  if (forced == nullptr || std::string(forced) != "no-such-provider") {
    GTEST_SKIP() << "runs with FI_PROVIDER=no-such-provider (ctest collectives_ofi_unusable)";
  }
  if (transport::ofi::availability("lo").why.starts_with("built without")) {
    GTEST_SKIP() << transport::ofi::availability("lo").why;
  }
  const auto port = free_port();
  std::vector<std::string> errors(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      CommOptions options;
      options.net = "OFI";
      options.shared_memory = false;
      try {
        Communicator::create(rank_config(r, 2, port), options);
      } catch (const StageError& e) {
        errors[r] = e.failure().to_string() + " | " + e.failure().hint;
      }
    });
  }
  for (auto& t : threads)
    t.join();
  for (const auto& e : errors) {
    EXPECT_NE(e.find("TRANSPORT_CONNECT"), std::string::npos) << e;
    EXPECT_NE(e.find("NCCL_NET=OFI"), std::string::npos) << e;
    EXPECT_NE(e.find("FI_PROVIDER=no-such-provider offers no RDM endpoint"), std::string::npos) << e;
    EXPECT_NE(e.find("unset it"), std::string::npos) << e;
  }
}

// Shared memory is offered only where it can work: a rank with it disabled
// keeps its connections on sockets and says why; a segment left by a
// killed process is removed at the next start.
TEST(Collectives, SharedMemoryFallsBackToSocketsWithTheReason) {
  // A stale segment from a process that no longer exists.
  const std::string stale = "/dev/shm/ringmaster-999999999-0to1-0-deadbeef";
  {
    std::FILE* f = std::fopen(stale.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fclose(f);
  }
  run_ranks(
      3,
      [&](Communicator& comm) {
        const auto connections = comm.connections();
        // Per channel the ring's next and prev, and one direct to each other rank.
        EXPECT_EQ(std::count_if(connections.begin(), connections.end(), [](const auto& c) { return c.channel < 0; }),
                  2);
        for (const auto& c : connections) {
          if (comm.rank() == 0 || c.peer == 0) {
            EXPECT_EQ(c.transport, "SOCKET");
            EXPECT_NE(c.fallback.find("rank 0 has NCCL_SHM_DISABLE=1"), std::string::npos) << c.fallback;
          } else {
            EXPECT_EQ(c.transport, "SHM");
            EXPECT_EQ(c.fallback, "");
          }
        }
        std::vector<float> data(100000, 1.0f);
        comm.all_reduce(data.data(), data.data(), data.size(), DataType::fp32, RedOp::sum).wait();
        EXPECT_EQ(data[99999], 3.0f);
      },
      {}, Links::mixed);
  EXPECT_FALSE(std::filesystem::exists(stale)) << "the stale segment was not removed";
  EXPECT_EQ(shm_segments(), 0);
}

// With a topology every rank shares (NCCL_TOPO_FILE), each channel's ring
// follows the topology search: on a p4d.24xlarge node the ranks, as GPUs
// 0.., start each channel at another GPU and go on to the nearest, so
// channel 1's ring is 1 0 2 3, not the rank order; without the file the
// rings are the rank order. The first tree is the search's too (the host's
// ranks chained) where without the file it spans ranks. Every collective
// is checked over the reordered rings, over shared memory and sockets.
TEST(Collectives, RingsFollowTheTopologySearch) {
  const std::string file = std::string(RINGMASTER_TOPOLOGY_DIR) + "/p4d-24xl-topo.xml";
  constexpr int n = 4;
  ::setenv("NCCL_MAX_NCHANNELS", "2", 1);
  ::setenv("NCCL_MIN_NCHANNELS", "2", 1);
  // What the search plans for one such node running 4 ranks.
  const auto topology = topo::Topology::load_file(file, topo::LoadOptions{"/sys"});
  const topo::NodeRanks node{&topology, n};
  const auto plan = topo::search_channels(std::span(&node, 1), 2);
  ASSERT_EQ(plan.rings.size(), 2u);
  for (const bool with_file : {false, true}) {
    if (with_file) ::setenv("NCCL_TOPO_FILE", file.c_str(), 1);
    std::vector<std::vector<std::vector<int>>> rings(n);
    std::vector<std::vector<int>> trees(n);
    run_ranks(n, [&](Communicator& comm) {
      rings[static_cast<std::size_t>(comm.rank())] = comm.rings();
      trees[static_cast<std::size_t>(comm.rank())] = comm.tree_parents(0);
    });
    for (int r = 0; r < n; ++r) {
      // With the topology the tree is the search's first (one host: its
      // ranks chained); without it a binary tree over the ranks.
      const std::vector<int> chain = with_file ? plan.trees[0].parent : topo::binary_tree_parents(n, 0);
      EXPECT_EQ(trees[static_cast<std::size_t>(r)], chain)
          << "rank " << r << (with_file ? " with" : " without") << " the topology";
      const auto& mine = rings[static_cast<std::size_t>(r)];
      ASSERT_EQ(mine.size(), 2u) << "rank " << r;
      for (std::size_t c = 0; c < mine.size(); ++c) {
        const std::vector<int> expected = with_file ? plan.rings[c].ranks : std::vector<int>{0, 1, 2, 3};
        EXPECT_EQ(mine[c], expected) << "rank " << r << " channel " << c << (with_file ? " with" : " without")
                                     << " the topology";
      }
    }
  }
  // The search does reorder: some channel's ring is not a rotation of the rank order.
  bool reordered = false;
  for (const auto& ring : plan.rings) {
    for (int p = 0; p < n; ++p)
      reordered = reordered || ring.ranks[static_cast<std::size_t>((p + 1) % n)] !=
                                   (ring.ranks[static_cast<std::size_t>(p)] + 1) % n;
  }
  EXPECT_TRUE(reordered) << plan.lines.front() << " / " << plan.lines.back();
  for (Links links : {Links::shm, Links::socket}) {
    for (Collective c : kCollectives)
      check({c, DataType::fp32, RedOp::sum}, n, {1, 1023, 65537}, links);
    check({Collective::broadcast, DataType::int32, RedOp::sum}, n, {4097}, links, {Protocol::simple});
  }
  ::unsetenv("NCCL_TOPO_FILE");
  ::unsetenv("NCCL_MAX_NCHANNELS");
  ::unsetenv("NCCL_MIN_NCHANNELS");
}

TEST(Collectives, CountersAndRecordsReportTraffic) {
  std::atomic<int> records{0};
  CommOptions options;
  options.on_collective = [&](const CollectiveRecord& r) {
    if (r.collective == Collective::all_reduce && r.bytes == 4 * 4096 && r.nchannels >= 1) ++records;
  };
  run_ranks(
      2,
      [&](Communicator& comm) {
        std::vector<float> data(4096, 1.0f);
        comm.all_reduce(data.data(), data.data(), data.size(), DataType::fp32, RedOp::sum).wait();
        const auto c = comm.counters(0);
        EXPECT_GT(c.bytes_sent, 0u);
        EXPECT_GT(c.bytes_received, 0u);
        EXPECT_GE(c.steps, 1u);
        comm.barrier().wait();
      },
      options);
  EXPECT_EQ(records.load(), 2);
}

// A channel's busy time is its steps' time, waiting included (read from
// the time-stamp counter where it is invariant): a rank whose peer comes
// 50 ms late has been busy at least that long, and not longer than it took
// (to the counter rate's accuracy, 0.01%: 5 us of 50 ms).
TEST(Collectives, BusyTimeCountsTheStepsTime) {
  constexpr auto kLate = std::chrono::milliseconds(50);
  run_ranks(2, [&](Communicator& comm) {
    float value = 1.0f;
    comm.all_reduce(&value, &value, 1, DataType::fp32, RedOp::sum).wait();
    comm.barrier().wait();
    const auto before = comm.counters(0).busy_ns;
    const auto start = std::chrono::steady_clock::now();
    if (comm.rank() == 1) std::this_thread::sleep_for(kLate);
    comm.all_reduce(&value, &value, 1, DataType::fp32, RedOp::sum).wait();
    const auto took = std::chrono::steady_clock::now() - start;
    EXPECT_EQ(value, 4.0f);
    if (comm.rank() == 0) {
      const auto busy = std::chrono::nanoseconds(comm.counters(0).busy_ns - before);
      EXPECT_GE(busy, kLate * 8 / 10) << busy.count() << " ns busy";
      EXPECT_LE(busy, took + took / 10000) << busy.count() << " ns busy in " << took.count() << " ns";
    }
  });
}

// NCCL_TOPO_FILE is what the communicator uses (declared) and what rank 0
// dumps to NCCL_TOPO_DUMP_FILE; the TOPOLOGY stage says so.
TEST(Collectives, TopologyFileIsUsedAndDumped) {
  const std::string p4d = std::string(RINGMASTER_TOPOLOGY_DIR) + "/p4d-24xl-topo.xml";
  const std::string dump = ::testing::TempDir() + "comm-topology.xml";
  std::remove(dump.c_str());
  ::setenv("NCCL_TOPO_FILE", p4d.c_str(), 1);
  ::setenv("NCCL_TOPO_DUMP_FILE", dump.c_str(), 1);
  std::mutex mutex;
  std::vector<std::string> details;
  CommOptions options;
  options.on_stage = [&](const StageEvent& e) {
    if (e.stage != Stage::topology) return;
    std::lock_guard lock(mutex);
    details.push_back(e.detail);
    EXPECT_TRUE(e.ok) << e.detail;
  };
  run_ranks(
      2, [](Communicator& comm) { comm.barrier().wait(); }, options);
  ::unsetenv("NCCL_TOPO_FILE");
  ::unsetenv("NCCL_TOPO_DUMP_FILE");
  ASSERT_EQ(details.size(), 2u);
  for (const auto& d : details)
    EXPECT_NE(d.find("declared by " + p4d + ": 2 packages, 8 GPUs, 4 NICs"), std::string::npos) << d;
  const auto used = topo::Topology::load_file(dump);
  EXPECT_TRUE(used.same_graph(topo::Topology::load_file(p4d)));
}

TEST(Collectives, UnreadableTopologyFileFailsTheTopologyStage) {
  const std::string missing = ::testing::TempDir() + "missing-topology.xml";
  ::setenv("NCCL_TOPO_FILE", missing.c_str(), 1);
  const auto port = free_port();
  std::vector<std::thread> threads;
  std::mutex mutex;
  std::vector<StageFailure> failures;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      try {
        Communicator::create(rank_config(r, 2, port));
      } catch (const StageError& e) {
        std::lock_guard lock(mutex);
        failures.push_back(e.failure());
      } catch (const std::exception& e) {
        ADD_FAILURE() << "rank " << r << ": not a StageError: " << e.what();
      }
    });
  }
  for (auto& t : threads)
    t.join();
  ::unsetenv("NCCL_TOPO_FILE");
  ASSERT_EQ(failures.size(), 2u);
  for (const auto& f : failures) {
    EXPECT_EQ(f.stage, Stage::topology);
    EXPECT_NE(f.summary.find(missing + ": cannot open"), std::string::npos) << f.summary;
    EXPECT_NE(f.hint.find("topo show --file"), std::string::npos) << f.hint;
  }
}

}  // namespace
}  // namespace ringmaster

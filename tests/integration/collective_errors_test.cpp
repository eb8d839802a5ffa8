// A collective that cannot complete ends in an error naming what and who:
// mismatched calls, arguments, algorithms and protocols, a silent or killed
// peer, an abort, the rank that failed first.
#include "collectives_test_support.h"

namespace ringmaster {
namespace {

using namespace collectives_support;

// A peer that is alive but never joins: the collective fails after the
// configured timeout, naming the silent rank, over shared memory and
// over sockets (the wait's clock runs in time-stamp-counter ticks).
TEST(CollectiveErrors, SilentPeerTimesOutNamingIt) {
  for (const Links links : {Links::shm, Links::socket}) {
    const auto port = free_port();
    std::string error;
    std::chrono::steady_clock::duration failed_after{};
    std::atomic<bool> done{false};
    std::vector<std::thread> threads;
    for (int r = 0; r < 2; ++r) {
      threads.emplace_back([&, r] {
        CommOptions options;
        options.timeout = 1s;
        auto comm = Communicator::create(rank_config(r, 2, port), with_links(options, links, r));
        if (r == 1) {  // alive, connected, and busy elsewhere
          while (!done.load())
            std::this_thread::sleep_for(10ms);
          return;
        }
        std::vector<float> data(1000, 1.0f);
        const auto start = std::chrono::steady_clock::now();
        try {
          comm->all_reduce(data.data(), data.data(), data.size(), DataType::fp32, RedOp::sum).wait();
        } catch (const Error& e) {
          error = e.what();
        }
        failed_after = std::chrono::steady_clock::now() - start;
        done = true;
      });
    }
    for (auto& t : threads)
      t.join();
    EXPECT_NE(error.find("no progress"), std::string::npos) << error;
    EXPECT_NE(error.find("rank 1"), std::string::npos) << error;
    EXPECT_NE(error.find("RINGMASTER_COLL_TIMEOUT"), std::string::npos) << error;
    EXPECT_GE(failed_after, 900ms);
    EXPECT_LT(failed_after, 5s);
  }
}

// Ranks that run one step in different protocols over shared memory write
// different rings: an error naming both protocols and ranks, not a hang.
// Both run the ring: left to the tuner, a rank's protocol can change its
// algorithm too (DifferentAlgorithmsAreAnErrorNotAHang).
TEST(CollectiveErrors, DifferentProtocolsAreAnErrorNotAHang) {
  std::vector<std::string> errors(2);
  const auto port = free_port();
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      CommOptions options;
      options.timeout = 10s;
      options.algorithm = Algorithm::ring;
      auto comm = Communicator::create(rank_config(r, 2, port), options);
      // The ranks agree on their overrides at init; select() changes one
      // rank's afterwards, so the call itself must catch the mismatch.
      comm->select(Algorithm::ring, r == 0 ? Protocol::ll : Protocol::simple);
      std::vector<float> data(1000, 1.0f);
      try {
        comm->all_reduce(data.data(), data.data(), data.size(), DataType::fp32, RedOp::sum).wait();
      } catch (const Error& e) {
        errors[static_cast<std::size_t>(r)] = e.what();
      }
    });
  }
  for (auto& t : threads)
    t.join();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);
  bool named = false;
  for (const auto& e : errors) {
    EXPECT_FALSE(e.empty()) << "a rank finished an all_reduce its peer ran in another protocol";
    if (e.find("collective mismatch") != std::string::npos) {
      named = true;
      EXPECT_NE(e.find("rank 0"), std::string::npos) << e;
      EXPECT_NE(e.find("rank 1"), std::string::npos) << e;
      // LL, not LL128: followed by " but" or ";".
      EXPECT_TRUE(e.find("protocol=LL ") != std::string::npos || e.find("protocol=LL;") != std::string::npos) << e;
      EXPECT_NE(e.find("protocol=Simple"), std::string::npos) << e;
      EXPECT_NE(e.find("NCCL_PROTO"), std::string::npos) << e;
    }
  }
  EXPECT_TRUE(named) << errors[0] << " / " << errors[1];
}

TEST(CollectiveErrors, MismatchedCountsNameBothRanks) {
  std::atomic<int> mismatches{0};
  const auto port = free_port();
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      CommOptions options;
      options.timeout = 5s;
      auto comm = Communicator::create(rank_config(r, 2, port), options);
      std::vector<float> data(r == 0 ? 100 : 200, 1.0f);
      try {
        comm->all_reduce(data.data(), data.data(), data.size(), DataType::fp32, RedOp::sum).wait();
      } catch (const Error& e) {
        const std::string what = e.what();
        if (what.find("collective mismatch") != std::string::npos) {
          ++mismatches;
          EXPECT_NE(what.find("rank 0"), std::string::npos) << what;
          EXPECT_NE(what.find("rank 1"), std::string::npos) << what;
        }
      }
    });
  }
  for (auto& t : threads)
    t.join();
  EXPECT_GE(mismatches.load(), 1);
}

// A tree's steps go over direct connections, a ring's over the ring's: a
// rank running a tree against a peer running the ring (different counts,
// or different NCCL_ALGO) finds the peer's step on the other connection
// and fails naming both, instead of both waiting out the timeout.
TEST(CollectiveErrors, DifferentAlgorithmsAreAnErrorNotAHang) {
  for (const Links links : {Links::socket, Links::shm, Links::ofi}) {
    SCOPED_TRACE(name_of(links));
    if (links == Links::ofi && !ofi_usable()) {
      // Said, not silent: the other cases ran, this one could not.
      const std::string why = transport::ofi::availability("lo").why;
      RecordProperty("libfabric_case", "not run: " + why);
      std::printf("[ SKIPPED  ] the libfabric case: %s\n", why.c_str());
      continue;
    }
    std::vector<std::string> errors(2);
    const auto port = free_port();
    std::vector<std::thread> threads;
    std::atomic<std::int64_t> failed_ms{0};
    const auto start = std::chrono::steady_clock::now();
    for (int r = 0; r < 2; ++r) {
      threads.emplace_back([&, r] {
        CommOptions options;
        options.timeout = 20s;
        auto comm = Communicator::create(rank_config(r, 2, port), with_links(options, links, r));
        // Overrides are agreed at init (OverridesThatDifferFailAtInit);
        // select() changes them on one rank afterwards.
        comm->select(r == 0 ? Algorithm::tree : Algorithm::ring, std::nullopt);
        std::vector<float> data(1000, 1.0f);
        const auto called = std::chrono::steady_clock::now();
        try {
          comm->all_reduce(data.data(), data.data(), data.size(), DataType::fp32, RedOp::sum).wait();
        } catch (const Error& e) {
          errors[static_cast<std::size_t>(r)] = e.what();
          const auto ms =
              std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - called).count();
          failed_ms.store(std::max<std::int64_t>(failed_ms.load(), ms));
        }
      });
    }
    for (auto& t : threads)
      t.join();
    bool named = false;
    for (const auto& e : errors) {
      EXPECT_FALSE(e.empty()) << "a rank finished an all_reduce its peer ran with another algorithm";
      if (e.find("collective mismatch") == std::string::npos) continue;
      named = true;
      EXPECT_NE(e.find("rank 0"), std::string::npos) << e;
      EXPECT_NE(e.find("rank 1"), std::string::npos) << e;
      EXPECT_NE(e.find("different algorithms"), std::string::npos) << e;
      EXPECT_NE(e.find("(Tree)"), std::string::npos) << e;
      EXPECT_NE(e.find("(Ring)"), std::string::npos) << e;
    }
    EXPECT_TRUE(named) << errors[0] << " / " << errors[1];
    // Found within a few looks, far from the 20 s timeout.
    EXPECT_LT(failed_ms.load(), 5000) << errors[0] << " / " << errors[1];
    EXPECT_LT(std::chrono::steady_clock::now() - start, 20s);
  }
}

// NCCL_MAX_NCHANNELS 1 on one rank and 2 on the other (or the options'
// equivalents) used to stall both ranks until the bootstrap timeout: each
// opened its own count of channels. The ranks now take the smaller count,
// as NCCL does, and the smaller buffer size.
TEST(CollectiveErrors, RanksAgreeOnChannelsAndBufferSize) {
  const auto port = free_port();
  std::vector<std::thread> threads;
  std::vector<int> channels(2, -1);
  std::vector<std::string> errors(2);
  const auto start = std::chrono::steady_clock::now();
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      try {
        CommOptions options;
        options.timeout = 20s;
        options.min_channels = 1;
        options.max_channels = r == 0 ? 1 : 2;
        options.buffsize = r == 0 ? std::size_t{1} << 20 : std::size_t{256} << 10;
        auto config = rank_config(r, 2, port);
        config.bootstrap_timeout = 20s;
        auto comm = Communicator::create(config, options);
        channels[static_cast<std::size_t>(r)] = comm->max_channels();
        std::vector<float> data(300000, static_cast<float>(r + 1));
        comm->all_reduce(data.data(), data.data(), data.size(), DataType::fp32, RedOp::sum).wait();
        for (float v : data) {
          if (v != 3.0f) throw std::runtime_error("all_reduce gave " + std::to_string(v) + ", expected 3");
        }
      } catch (const std::exception& e) {
        errors[static_cast<std::size_t>(r)] = e.what();
      }
    });
  }
  for (auto& t : threads)
    t.join();
  EXPECT_EQ(errors[0], "");
  EXPECT_EQ(errors[1], "");
  EXPECT_EQ(channels[0], 1);
  EXPECT_EQ(channels[1], 1);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);
}

// What cannot be reconciled fails on every rank at init, at once, naming
// the variable and the ranks.
TEST(CollectiveErrors, OverridesThatDifferFailAtInit) {
  struct Case {
    std::function<void(CommOptions&, int)> set;
    std::string variable;
    std::string rank0, rank1;
  };
  const std::vector<Case> cases = {
      {[](CommOptions& o, int r) { o.algorithm = r == 0 ? Algorithm::tree : Algorithm::ring; }, "NCCL_ALGO",
       "--algo=Tree", "--algo=Ring"},
      {[](CommOptions& o, int r) {
         if (r == 1) o.protocol = Protocol::simple;
       },
       "NCCL_PROTO", "it unset", "--proto=Simple"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.variable);
    const auto port = free_port();
    std::vector<std::thread> threads;
    std::vector<std::string> errors(2);
    std::vector<std::int64_t> failed_ms(2, -1);
    for (int r = 0; r < 2; ++r) {
      threads.emplace_back([&, r] {
        CommOptions options;
        c.set(options, r);
        const auto begin = std::chrono::steady_clock::now();
        try {
          auto comm = Communicator::create(rank_config(r, 2, port), options);
        } catch (const Error& e) {
          errors[static_cast<std::size_t>(r)] = e.what();
          failed_ms[static_cast<std::size_t>(r)] =
              std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - begin).count();
          EXPECT_EQ(e.category(), ErrorCategory::config) << e.what();
        }
      });
    }
    for (auto& t : threads)
      t.join();
    for (int r = 0; r < 2; ++r) {
      const auto& e = errors[static_cast<std::size_t>(r)];
      ASSERT_FALSE(e.empty()) << "rank " << r << " finished init against a rank with other overrides";
      EXPECT_NE(e.find(c.variable), std::string::npos) << e;
      EXPECT_NE(e.find("rank 0 has " + c.rank0), std::string::npos) << e;
      EXPECT_NE(e.find("rank 1 has " + c.rank1), std::string::npos) << e;
      EXPECT_LT(failed_ms[static_cast<std::size_t>(r)], 1000) << e;
    }
  }
}

// send/recv to -1 used to succeed and move nothing.
TEST(CollectiveErrors, PointToPointRefusesPeersThatAreNotOtherRanks) {
  run_ranks(2, [](Communicator& comm) {
    std::vector<float> data(16, 1.0f);
    for (const int peer : {-1, 2, 100, comm.rank()}) {
      for (const int call : {0, 1, 2}) {
        try {
          if (call == 0) comm.send(data.data(), data.size(), DataType::fp32, peer).wait();
          if (call == 1) comm.recv(data.data(), data.size(), DataType::fp32, peer).wait();
          if (call == 2)
            comm.sendrecv(data.data(), peer, data.data(), 1 - comm.rank(), data.size(), DataType::fp32).wait();
          ADD_FAILURE() << "call " << call << " to peer " << peer << " was accepted";
        } catch (const Error& e) {
          EXPECT_EQ(e.category(), ErrorCategory::config) << e.what();
          EXPECT_NE(std::string(e.what()).find("peer " + std::to_string(peer) + " is not another rank"),
                    std::string::npos)
              << e.what();
        }
      }
    }
    // The communicator still works after the refusals.
    const int other = 1 - comm.rank();
    std::vector<float> in(16, 0.0f);
    comm.sendrecv(data.data(), other, in.data(), other, data.size(), DataType::fp32).wait();
    EXPECT_EQ(in, std::vector<float>(16, 1.0f));
  });
}

// An exception from CommOptions::on_collective used to skip the request's
// completion (or end the process from a progress thread).
TEST(CollectiveErrors, ThrowingCollectiveCallbackDoesNotStopCompletion) {
  std::atomic<int> calls{0};
  CommOptions options;
  options.timeout = 20s;
  options.on_collective = [&](const CollectiveRecord&) {
    ++calls;
    throw std::runtime_error("callback failure");
  };
  run_ranks(
      2,
      [](Communicator& comm) {
        for (const std::size_t count : {std::size_t{4}, std::size_t{1} << 20}) {
          std::vector<float> data(count, 1.0f);
          comm.all_reduce(data.data(), data.data(), count, DataType::fp32, RedOp::sum).wait();
          EXPECT_EQ(data.front(), 2.0f);
          EXPECT_EQ(data.back(), 2.0f);
        }
      },
      options);
  EXPECT_EQ(calls.load(), 4);
}

// After an abort every queued call used to log a WARN of its own: millions
// of lines and a slow exit. Now the first failure is logged, the rest are
// counted in one line when the communicator goes.
TEST(CollectiveErrors, FailuresAfterAnAbortAreCountedNotLoggedOneByOne) {
  const std::string path = "/tmp/ringmaster-abort-log-" + std::to_string(::getpid());
  std::fflush(stderr);
  const int saved = ::dup(2);
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  ASSERT_GE(fd, 0);
  ::dup2(fd, 2);
  constexpr int kCalls = 2000;
  std::atomic<int> failed{0};
  CommOptions options;
  options.timeout = 10s;
  const auto start = std::chrono::steady_clock::now();
  run_ranks(
      2,
      [&](Communicator& comm) {
        std::vector<float> data(4, 1.0f);
        comm.all_reduce(data.data(), data.data(), data.size(), DataType::fp32, RedOp::sum).wait();
        if (comm.rank() == 0) comm.abort();
        std::vector<Request> requests;
        for (int i = 0; i < kCalls; ++i)
          requests.push_back(comm.all_reduce(data.data(), data.data(), data.size(), DataType::fp32, RedOp::sum));
        for (auto& r : requests) {
          try {
            r.wait();
          } catch (const Error&) {
            ++failed;
          }
        }
      },
      options);
  std::fflush(stderr);
  ::dup2(saved, 2);
  ::close(saved);
  ::close(fd);
  std::ifstream in(path);
  std::string line;
  int failure_lines = 0, summary_lines = 0;
  while (std::getline(in, line)) {
    if (line.find("WARN COLL") == std::string::npos) continue;
    if (line.find("more collective part(s) failed") != std::string::npos) {
      ++summary_lines;
    } else if (line.find(" failed: ") != std::string::npos) {
      ++failure_lines;
    }
  }
  std::filesystem::remove(path);
  EXPECT_EQ(failed.load(), 2 * kCalls);
  EXPECT_LE(failure_lines, 2) << "one per communicator";
  EXPECT_GE(failure_lines, 1);
  EXPECT_GE(summary_lines, 1);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);
}

// Connections to a rank's bootstrap port that are not a rank's (a port
// scanner, a health check, a stale rank of an earlier job) used to fail
// init ("unexpected hello") or block it until the deadline. They are
// dropped now: here one stranger sends garbage before the ring forms, and
// before the channels connect another sends garbage and a third nothing.
TEST(CollectiveErrors, StrayConnectionsOnTheBootstrapPortAreDropped) {
  const auto port = free_port();
  std::mutex strays_mutex;
  std::vector<net::Socket> strays;
  std::string rank1_listener;
  auto stray = [&](bool garbage) {
    auto address = net::SocketAddress::parse(rank1_listener);
    ASSERT_TRUE(address.has_value()) << rank1_listener;
    net::Socket s;
    ASSERT_EQ(net::Socket::connect(*address, std::chrono::steady_clock::now() + 2s, s), 0);
    if (garbage) {
      const char junk[] = "GET / HTTP/1.0\r\n\r\n-------------";
      ASSERT_EQ(s.send_all(junk, sizeof(junk), std::chrono::steady_clock::now() + 2s), 0);
    }
    std::lock_guard lock(strays_mutex);
    strays.push_back(std::move(s));
  };
  std::vector<std::string> errors(2);
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      CommOptions options;
      options.on_stage = [&, r](const StageEvent& e) {
        if (r == 1 && e.stage == Stage::bootstrap_listen) {
          rank1_listener = e.detail.substr(0, e.detail.find(' '));
          stray(true);
        }
        if (r == 1 && e.stage == Stage::address_exchange) {
          stray(true);
          stray(false);
        }
        // Rank 0 lets the strangers come first.
        if (r == 0 && (e.stage == Stage::bootstrap_listen || e.stage == Stage::address_exchange)) {
          std::this_thread::sleep_for(300ms);
        }
      };
      try {
        auto comm = Communicator::create(rank_config(r, 2, port), options);
        std::vector<float> data(1000, 1.0f);
        comm->all_reduce(data.data(), data.data(), data.size(), DataType::fp32, RedOp::sum).wait();
        if (data.front() != 2.0f) throw std::runtime_error("all_reduce gave " + std::to_string(data.front()));
      } catch (const std::exception& e) {
        errors[static_cast<std::size_t>(r)] = e.what();
      }
    });
  }
  for (auto& t : threads)
    t.join();
  EXPECT_EQ(errors[0], "");
  EXPECT_EQ(errors[1], "");
  EXPECT_EQ(strays.size(), 3u);
  // The silent stranger costs its hello wait (5 s), not the 30 s deadline.
  EXPECT_LT(std::chrono::steady_clock::now() - start, 15s);
}

TEST(CollectiveErrors, DifferentCollectivesAreAnErrorNotAHang) {
  std::atomic<int> errors{0};
  std::mutex messages_mutex;
  std::vector<std::string> messages;
  const auto port = free_port();
  std::vector<std::thread> threads;
  const auto start = std::chrono::steady_clock::now();
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      CommOptions options;
      options.timeout = 5s;
      auto comm = Communicator::create(rank_config(r, 2, port), options);
      std::vector<float> data(64, 1.0f), out(128);
      try {
        if (r == 0) {
          comm->all_reduce(data.data(), data.data(), 64, DataType::fp32, RedOp::sum).wait();
        } else {
          comm->all_gather(data.data(), out.data(), 64, DataType::fp32).wait();
        }
      } catch (const Error& e) {
        ++errors;
        std::lock_guard lock(messages_mutex);
        messages.emplace_back(e.what());
      }
    });
  }
  for (auto& t : threads)
    t.join();
  EXPECT_EQ(errors.load(), 2);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
  // Not any error: a rank names the mismatch and both calls.
  const bool named = std::any_of(messages.begin(), messages.end(), [](const std::string& m) {
    return m.find("collective mismatch") != std::string::npos && m.find("all_reduce") != std::string::npos &&
           m.find("all_gather") != std::string::npos;
  });
  EXPECT_TRUE(named) << (messages.empty() ? std::string() : messages.front());
}

// Every call carries its signature (collective, datatype, op, root, count,
// algorithm, protocol, channels). Ranks that make the same collective with
// another argument fail at that call, each naming both ranks and the
// field. Before, an op mismatch left the ranks with different results (3
// and 2), a datatype mismatch of equal bytes passed, a broadcast root
// mismatch returned stale data and a reduce root mismatch hung for the
// whole timeout.
// Runs `call` on n ranks (threads, a 20 s collective timeout) and returns
// each rank's error text, empty where the call succeeded.
std::vector<std::string> errors_of(int n, const std::function<void(Communicator&, int r)>& call,
                                   Links links = Links::shm) {
  std::vector<std::string> errors(static_cast<std::size_t>(n));
  const auto port = free_port();
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      CommOptions options;
      options.timeout = 20s;
      auto comm = Communicator::create(rank_config(r, n, port), with_links(options, links, r));
      try {
        call(*comm, r);
      } catch (const Error& e) {
        errors[static_cast<std::size_t>(r)] = e.what();
      }
    });
  }
  for (auto& t : threads)
    t.join();
  return errors;
}

struct Mismatch {
  const char* name;
  // What rank r calls; the ranks differ in exactly one argument.
  std::function<Request(Communicator&, int r, std::vector<std::int32_t>& in, std::vector<std::int32_t>& out)> call;
  const char* field;  // as the error names it, both sides: "op=sum" / "op=max"
  const char* rank0;
  const char* rank1;
  bool call_is_send_recv = false;
};

TEST(CollectiveErrors, MismatchedArgumentsFailOnEveryRankNamingTheField) {
  const std::vector<Mismatch> cases = {
      {"op",
       [](Communicator& c, int r, auto& in, auto& out) {
         return c.all_reduce(in.data(), out.data(), 256, DataType::int32, r == 0 ? RedOp::sum : RedOp::max);
       },
       "op", "op=sum", "op=max"},
      {"datatype of equal bytes",
       [](Communicator& c, int r, auto& in, auto& out) {
         return c.all_reduce(in.data(), out.data(), 256, r == 0 ? DataType::int32 : DataType::fp32, RedOp::sum);
       },
       "datatype", "datatype=int32", "datatype=float"},
      {"broadcast root",
       [](Communicator& c, int r, auto& in, auto& out) {
         return c.broadcast(in.data(), out.data(), 256, DataType::int32, r == 0 ? 0 : 1);
       },
       "root", "root=0", "root=1"},
      {"reduce root",
       [](Communicator& c, int r, auto& in, auto& out) {
         return c.reduce(in.data(), out.data(), 256, DataType::int32, RedOp::sum, r == 0 ? 0 : 1);
       },
       "root", "root=0", "root=1"},
      {"count",
       [](Communicator& c, int r, auto& in, auto& out) {
         return c.all_reduce(in.data(), out.data(), r == 0 ? 256 : 255, DataType::int32, RedOp::sum);
       },
       "count", "count=256", "count=255"},
      {"send and recv types",
       [](Communicator& c, int r, auto& in, auto& out) {
         return r == 0 ? c.send(in.data(), 256, DataType::int32, 1) : c.recv(out.data(), 256, DataType::fp32, 0);
       },
       "datatype", "datatype=int32", "datatype=float", true},
  };
  for (Links links : {Links::shm, Links::socket}) {
    for (const auto& m : cases) {
      SCOPED_TRACE(std::string(m.name) + (links == Links::shm ? " over shared memory" : " over sockets"));
      const auto start = std::chrono::steady_clock::now();
      const auto errors = errors_of(
          2,
          [&](Communicator& comm, int r) {
            std::vector<std::int32_t> in(256, r + 1), out(256, -1);
            m.call(comm, r, in, out).wait();
          },
          links);
      // At that call, far from the 20 s timeout.
      EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);
      for (int r = 0; r < 2; ++r) {
        const std::string& e = errors[static_cast<std::size_t>(r)];
        // A send completes once its data is handed over (as NCCL's does):
        // only the receiving rank hears of the mismatch.
        if (m.call_is_send_recv && r == 0) continue;
        EXPECT_NE(e.find("collective mismatch"), std::string::npos) << "rank " << r << ": " << e;
        EXPECT_NE(e.find("rank 0"), std::string::npos) << e;
        EXPECT_NE(e.find("rank 1"), std::string::npos) << e;
        // Each rank's value beside its rank, as the rank that caught it
        // words it ("rank 1 called it with op=max but rank 0 with op=sum"):
        // this rank's own catch, or the first rank's through the store.
        auto names = [&](int q, const char* value) {
          const std::string rank = "rank " + std::to_string(q);
          return e.find(rank + " with " + value) != std::string::npos ||
                 e.find(rank + " called it with " + value) != std::string::npos;
        };
        EXPECT_TRUE(names(0, m.rank0)) << e;
        EXPECT_TRUE(names(1, m.rank1)) << e;
      }
    }
  }
}

// Of three ranks only rank 1 passes another op: its neighbours catch it in
// their first step; rank 0, whose own neighbour agrees with it, learns it
// from the store (ErrorsNameTheRankThatFailedFirst). Every rank names the
// field and both values.
TEST(CollectiveErrors, AMismatchOnOneRankOfThreeFailsEveryRankNamingIt) {
  const auto start = std::chrono::steady_clock::now();
  const auto errors = errors_of(3, [](Communicator& comm, int r) {
    std::vector<std::int32_t> data(4096, r + 1);
    comm.all_reduce(data.data(), data.data(), data.size(), DataType::int32, r == 1 ? RedOp::max : RedOp::sum).wait();
  });
  EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);
  for (int r = 0; r < 3; ++r) {
    const std::string& e = errors[static_cast<std::size_t>(r)];
    EXPECT_NE(e.find("collective mismatch"), std::string::npos) << "rank " << r << ": " << e;
    // "rank 1 called it with op=max but rank 2 with op=sum", or seen from
    // rank 1: "rank 0 called it with op=sum but rank 1 with op=max".
    const bool named = e.find("rank 1 called it with op=max") != std::string::npos ||
                       e.find("rank 1 with op=max") != std::string::npos;
    EXPECT_TRUE(named) << "rank " << r << ": " << e;
    EXPECT_NE(e.find("op=sum"), std::string::npos) << "rank " << r << ": " << e;
  }
}

TEST(CollectiveErrors, AllToAllAgainstARingCollectiveIsCaughtByName) {
  // all_to_all moves its data over direct connections; its header-only
  // ring step still catches a neighbour that called something else.
  std::atomic<int> mismatches{0};
  const auto port = free_port();
  std::vector<std::thread> threads;
  const auto start = std::chrono::steady_clock::now();
  for (int r = 0; r < 3; ++r) {
    threads.emplace_back([&, r] {
      CommOptions options;
      options.timeout = 10s;
      auto comm = Communicator::create(rank_config(r, 3, port), options);
      std::vector<float> data(3 * 64, 1.0f), out(3 * 64);
      try {
        if (r == 0) {
          comm->all_reduce(data.data(), data.data(), 64, DataType::fp32, RedOp::sum).wait();
        } else {
          comm->all_to_all(data.data(), out.data(), 64, DataType::fp32).wait();
        }
      } catch (const Error& e) {
        if (std::string(e.what()).find("collective mismatch") != std::string::npos) ++mismatches;
      }
    });
  }
  for (auto& t : threads)
    t.join();
  EXPECT_GE(mismatches.load(), 1);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
}

TEST(CollectiveErrors, AbortFromAnotherThreadWakesTheWaiter) {
  // Rank 1 never joins the collective, so rank 0 waits until aborted.
  const auto port = free_port();
  std::thread other([&] {
    auto comm = Communicator::create(rank_config(1, 2, port));
    std::this_thread::sleep_for(1s);
  });
  auto comm = Communicator::create(rank_config(0, 2, port));
  std::vector<float> data(1024, 1.0f);
  auto request = comm->all_reduce(data.data(), data.data(), data.size(), DataType::fp32, RedOp::sum);
  std::this_thread::sleep_for(100ms);
  EXPECT_FALSE(request.test());
  const auto start = std::chrono::steady_clock::now();
  std::thread aborter([&] { comm->abort(); });
  EXPECT_THROW(request.wait(), Error);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 1s);
  EXPECT_FALSE(request.status().ok());
  // Later calls fail at once too.
  EXPECT_THROW(comm->barrier().wait(), Error);
  aborter.join();
  other.join();
}

// Three ranks as processes; rank 2 is SIGKILLed while all three loop on
// all_reduce. The survivors must fail naming a peer, well within the
// collective timeout, and nothing of ours is left in /dev/shm.
void kill_a_peer(Links links) {
  const auto port = free_port();
  std::vector<pid_t> pids;
  int pipes[3][2];
  int running[2];  // each rank writes a byte once its first collective is done
  ASSERT_EQ(pipe(running), 0);
  for (int r = 0; r < 3; ++r) {
    ASSERT_EQ(pipe(pipes[r]), 0);
    const pid_t pid = fork();
    if (pid == 0) {
      close(pipes[r][0]);
      close(running[0]);
      std::string result = "ok";
      try {
        CommOptions options;
        options.timeout = 20s;
        auto comm = Communicator::create(rank_config(r, 3, port), with_links(options, links, r));
        for (const auto& c : comm->connections()) {
          if (c.transport != expected_transport(links, r, c.peer)) throw std::runtime_error("via " + c.transport);
        }
        std::vector<float> data(1 << 18, 1.0f);
        for (int i = 0; i < 100000; ++i) {
          comm->all_reduce(data.data(), data.data(), data.size(), DataType::fp32, RedOp::max).wait();
          if (i == 0) (void)!write(running[1], "r", 1);
        }
      } catch (const std::exception& e) {
        result = e.what();
      }
      (void)!write(pipes[r][1], result.data(), result.size());
      _exit(0);
    }
    close(pipes[r][1]);
    pids.push_back(pid);
  }
  close(running[1]);
  // Killed mid-collective, not while connecting: after every rank has
  // finished its first all_reduce.
  char byte;
  for (int r = 0; r < 3; ++r) {
    ASSERT_EQ(read(running[0], &byte, 1), 1) << "a rank failed before its first collective";
  }
  close(running[0]);
  std::this_thread::sleep_for(200ms);
  const auto killed_at = std::chrono::steady_clock::now();
  ASSERT_EQ(kill(pids[2], SIGKILL), 0);
  for (int r = 0; r < 3; ++r) {
    int status = 0;
    waitpid(pids[r], &status, 0);
    std::string result;
    char buf[4096];
    for (ssize_t got; (got = read(pipes[r][0], buf, sizeof(buf))) > 0;)
      result.append(buf, static_cast<std::size_t>(got));
    close(pipes[r][0]);
    if (r == 2) continue;
    EXPECT_NE(result, "ok") << "rank " << r << " did not notice the dead peer";
    EXPECT_NE(result.find("rank "), std::string::npos) << result;
    EXPECT_EQ(result.find("via "), std::string::npos) << result;
  }
  // A dead peer shows as its socket closing, over shared memory too: far
  // sooner than the 20 s timeout.
  EXPECT_LT(std::chrono::steady_clock::now() - killed_at, 10s);
  EXPECT_EQ(shm_segments(pids), 0) << "segments left in /dev/shm";
}

TEST(CollectiveErrors, KilledPeerFailsSurvivorsOverSharedMemory) {
  kill_a_peer(Links::shm);
}

TEST(CollectiveErrors, KilledPeerFailsSurvivorsOverSockets) {
  kill_a_peer(Links::socket);
}

TEST(CollectiveErrors, KilledPeerFailsSurvivorsOverLibfabric) {
  if (!ofi_usable()) GTEST_SKIP() << transport::ofi::availability("lo").why;
  kill_a_peer(Links::ofi);
}

// When a rank dies, the ranks that lose it abort, and their neighbours then
// lose them: each used to blame the live neighbour it lost ("the peer
// probably died"). The first rank to fail puts its reason in the store
// before it aborts, and every rank reports that. Runs 5 ranks as
// processes; rank `dead` ends after the first all_reduce without a word;
// rank `late` waits 500 ms before its second call. With `leave_at_once`
// every rank ends as soon as it has its error (rank 0's store with it);
// otherwise the ranks stay until every survivor has its answer. Returns
// each survivor's error (or "completed").
static std::vector<std::string> first_failure_reports(int dead, int late, bool leave_at_once) {
  constexpr int n = 5;
  const auto port = free_port();
  const auto dir = std::filesystem::temp_directory_path() / ("ringmaster-first-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::vector<pid_t> children;
  for (int r = 0; r < n; ++r) {
    const pid_t pid = ::fork();
    if (pid == 0) {
      std::string what = "completed";
      std::unique_ptr<Communicator> comm;
      try {
        CommOptions options;
        options.timeout = 20s;
        comm = Communicator::create(rank_config(r, n, port), options);
        std::vector<float> data(16384, 1.0f);
        comm->all_reduce(data.data(), data.data(), data.size(), DataType::fp32, RedOp::sum).wait();
        if (r == dead) ::_exit(0);  // gone without a word
        if (r == late) std::this_thread::sleep_for(500ms);
        comm->all_reduce(data.data(), data.data(), data.size(), DataType::fp32, RedOp::sum).wait();
      } catch (const std::exception& e) {
        what = e.what();
      }
      std::ofstream(dir / (std::to_string(r) + ".tmp")) << what;
      std::filesystem::rename(dir / (std::to_string(r) + ".tmp"), dir / std::to_string(r));
      for (int i = 0; i < 500 && !leave_at_once; ++i) {
        int done = 0;
        for (int q = 0; q < n; ++q)
          done += q != dead && std::filesystem::exists(dir / std::to_string(q)) ? 1 : 0;
        if (done == n - 1) break;
        std::this_thread::sleep_for(10ms);
      }
      comm.reset();  // rank 0's store goes with its communicator
      std::fflush(nullptr);
      ::_exit(0);
    }
    children.push_back(pid);
  }
  for (pid_t pid : children) {
    int status = 0;
    ::waitpid(pid, &status, 0);
  }
  std::vector<std::string> reports(n);
  for (int r = 0; r < n; ++r) {
    if (r == dead) continue;
    std::ifstream in(dir / std::to_string(r));
    reports[static_cast<std::size_t>(r)].assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  std::filesystem::remove_all(dir);
  return reports;
}

// Every survivor's first failure names the dead rank and no live one.
static void expect_first_failure_names(const std::vector<std::string>& reports, int dead) {
  const std::string lost = fmt::format("rank {} at ", dead);
  for (std::size_t r = 0; r < reports.size(); ++r) {
    if (static_cast<int>(r) == dead) continue;
    const std::string& what = reports[r];
    SCOPED_TRACE("rank " + std::to_string(r) + ": " + what);
    ASSERT_NE(what, "completed");
    // The reason first: this rank's own, or the first rank's.
    const std::string first = what.substr(0, what.find(" (on rank "));
    EXPECT_NE(first.find(lost), std::string::npos) << "the first failure does not name rank " << dead;
    for (std::size_t live = 0; live < reports.size(); ++live) {
      if (static_cast<int>(live) == dead) continue;
      EXPECT_EQ(first.find(fmt::format("rank {} at ", live)), std::string::npos) << "blames live rank " << live;
    }
  }
}

TEST(CollectiveErrors, ErrorsNameTheRankThatFailedFirst) {
  expect_first_failure_names(first_failure_reports(3, -1, false), 3);
}

// Rank 0 fails soon after rank 3 dies and its program ends at once; rank 1
// fails 500 ms later, when it next calls. Rank 0's store stays until rank
// 1 has read the first failure: before, it went with rank 0 and rank 1
// blamed rank 0 or 2, the neighbours it lost.
TEST(CollectiveErrors, TheFirstFailureOutlivesTheStoreHostsProgram) {
  const auto started = std::chrono::steady_clock::now();
  expect_first_failure_names(first_failure_reports(3, 1, true), 3);
  EXPECT_LT(std::chrono::steady_clock::now() - started, 10s);
}

}  // namespace
}  // namespace ringmaster

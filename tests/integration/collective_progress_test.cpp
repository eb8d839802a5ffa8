// How calls progress: progress threads that sleep and yield, calls that
// complete while their caller is elsewhere, ranks that outnumber CPUs,
// the flight recorder and the stall report.
#include "collectives_test_support.h"

namespace ringmaster {
namespace {

using namespace collectives_support;

// A rank that spins on a step yields its CPU when asked (the default when
// a host runs more ranks than it has CPUs): every collective still
// completes, over shared memory and sockets; a bad value names itself.
TEST(CollectiveProgress, SpinningRanksYieldTheirCpu) {
  ::setenv("RINGMASTER_SPIN_YIELD", "sometimes", 1);
  try {
    Communicator::create(rank_config(0, 1, free_port()));
    ADD_FAILURE() << "RINGMASTER_SPIN_YIELD=sometimes was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("RINGMASTER_SPIN_YIELD=sometimes: need auto, 0 or 1"), std::string::npos)
        << e.what();
  }
  ::setenv("RINGMASTER_SPIN_YIELD", "1", 1);
  for (Links links : {Links::shm, Links::socket}) {
    for (Collective c : {Collective::all_reduce, Collective::all_to_all, Collective::broadcast})
      check({c, DataType::fp32, RedOp::sum}, 3, {1, 65537}, links);
  }
  ::unsetenv("RINGMASTER_SPIN_YIELD");
}

// A small collective that is not waited for still runs when its caller
// blocks on another communicator whose peers need it first: rank 0 issues
// A on comm1 and waits on a barrier of comm2; rank 1 waits for A, then
// joins the barrier.
TEST(CollectiveProgress, UnwaitedSmallCollectiveProgressesWhileTheCallerBlocksElsewhere) {
  const auto port1 = free_port(), port2 = free_port();
  std::atomic<int> done{0};
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      auto comm1 = Communicator::create(rank_config(r, 2, port1));
      auto comm2 = Communicator::create(rank_config(r, 2, port2));
      std::vector<float> data(16, 1.0f);
      if (r == 0) {
        auto a = comm1->all_reduce(data.data(), data.data(), data.size(), DataType::fp32, RedOp::sum);
        comm2->barrier().wait();
        a.wait();
      } else {
        comm1->all_reduce(data.data(), data.data(), data.size(), DataType::fp32, RedOp::sum).wait();
        comm2->barrier().wait();
      }
      EXPECT_EQ(data[0], 2.0f);
      ++done;
    });
  }
  for (auto& t : threads)
    t.join();
  EXPECT_EQ(done.load(), 2);
}

// A small collective is parked for its caller to run when it waits. A
// caller that blocks outside the engine after submitting (a pipe, another
// library's barrier, here a sleep) used to hold its peers until it came
// back; the parked work is now taken over by the progress thread within
// milliseconds. Ranks are processes here: in one process a waiting rank's
// thread hands every parked collective of the process over, which hid the
// stall.
TEST(CollectiveProgress, SubmittedCollectiveCompletesWhileItsCallerSleepsElsewhere) {
  for (const int n : {2, 3}) {
    for (const std::size_t count : {std::size_t{2}, std::size_t{16384}}) {  // 8 B and 64 KiB of floats
      SCOPED_TRACE(std::to_string(n) + " ranks, " + std::to_string(count * 4) + " bytes");
      const auto port = free_port();
      std::vector<pid_t> children;
      for (int r = 0; r < n; ++r) {
        const pid_t pid = ::fork();
        if (pid == 0) {
          // Exit codes: 0 done in time, 1 a wrong result, 2 waited for rank
          // 0's caller, 3 an error.
          int code = 0;
          try {
            auto comm = Communicator::create(rank_config(r, n, port));
            std::vector<float> data(count, 1.0f);
            comm->barrier().wait();
            const auto start = std::chrono::steady_clock::now();
            auto request = comm->all_reduce(data.data(), data.data(), count, DataType::fp32, RedOp::sum);
            if (r == 0) std::this_thread::sleep_for(1500ms);  // busy elsewhere, not in the engine
            request.wait();
            if (r != 0 && std::chrono::steady_clock::now() - start > 750ms) code = 2;
            if (data[count - 1] != static_cast<float>(n)) code = 1;
            comm->barrier().wait();
          } catch (const std::exception& e) {
            std::fprintf(stderr, "rank %d: %s\n", r, e.what());
            code = 3;
          }
          std::fflush(nullptr);
          ::_exit(code);
        }
        children.push_back(pid);
      }
      for (int r = 0; r < n; ++r) {
        int status = 0;
        ::waitpid(children[static_cast<std::size_t>(r)], &status, 0);
        ASSERT_TRUE(WIFEXITED(status)) << "rank " << r;
        EXPECT_EQ(WEXITSTATUS(status), 0) << "rank " << r << " (2: it waited for rank 0's caller)";
      }
    }
  }
}

// Voluntary context switches of this process's channel progress threads;
// `threads` counts the threads found.
std::uint64_t progress_thread_switches(int* threads) {
  std::uint64_t total = 0;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
    std::string name;
    std::ifstream(task.path() / "comm") >> name;
    if (name.rfind("rm-channel-", 0) != 0) continue;
    ++*threads;
    std::ifstream status(task.path() / "status");
    for (std::string line; std::getline(status, line);) {
      if (line.rfind("voluntary_ctxt_switches:", 0) == 0) total += std::stoull(line.substr(24));
    }
  }
  return total;
}

// A step that sleeps first hands the collectives waiting for their callers
// to the progress threads, but one that runs on its caller's thread (the
// sleeping one) needs no progress thread: it is not woken for it.
TEST(CollectiveProgress, SleepingStepsDoNotWakeIdleProgressThreads) {
  ::setenv("RINGMASTER_SOCKET_SPIN_US", "0", 1);  // every wait sleeps
  std::atomic<std::uint64_t> before{0}, after{0};
  int threads_before = 0, threads_after = 0;
  run_ranks(2, [&](Communicator& comm) {
    float value = 1.0f;
    comm.all_reduce(&value, &value, 1, DataType::fp32, RedOp::sum).wait();
    comm.barrier().wait();
    if (comm.rank() == 0) {
      // Small collectives run on their callers, so on a loaded machine a
      // progress thread may not have run (and named itself) yet: wait for
      // both before counting.
      for (int tries = 0; tries < 200; ++tries) {
        threads_before = 0;
        before = progress_thread_switches(&threads_before);
        if (threads_before >= 2) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
    }
    comm.barrier().wait();
    for (int i = 0; i < 200; ++i) {
      if (comm.rank() == i % 2) std::this_thread::sleep_for(std::chrono::microseconds(200));  // the other waits
      comm.all_reduce(&value, &value, 1, DataType::fp32, RedOp::sum).wait();
    }
    comm.barrier().wait();
    if (comm.rank() == 0) after = progress_thread_switches(&threads_after);
    comm.barrier().wait();
  });
  ::unsetenv("RINGMASTER_SOCKET_SPIN_US");
  // Both ranks' progress threads were there to count (none found would
  // count zero switches and pass).
  EXPECT_GE(threads_before, 2);
  EXPECT_EQ(threads_after, threads_before);
  EXPECT_LT(after - before, 40u) << "progress threads woke " << after - before << " times for 200 calls run by callers";
}

// With more ranks on a host than CPUs, a collective of any size on one
// channel runs on the thread that waits for it (no progress thread has a
// CPU of its own there); RINGMASTER_INLINE_BYTES given keeps the larger
// ones on the progress thread. The telemetry record comes from the thread
// that finished the collective.
TEST(CollectiveProgress, RanksOutnumberingCpusRunCollectivesOnTheWaitingThread) {
  // The engine's count: CPUs online bounded by the cgroup quota, so a
  // container limited to a few CPUs on a big host runs this too.
  const int n = base::host_cpus() + 1;
  if (n > 17) GTEST_SKIP() << "more ranks than CPUs would take " << n << " ranks here";
  ::setenv("NCCL_MAX_NCHANNELS", "1", 1);
  constexpr std::size_t kCount = 1 << 18;  // 1 MiB of floats, above the 64 KiB default
  for (const bool given : {false, true}) {
    if (given) ::setenv("RINGMASTER_INLINE_BYTES", "65536", 1);
    std::mutex mutex;
    std::set<std::thread::id> callers, finishers;
    CommOptions options;
    options.on_collective = [&](const CollectiveRecord& r) {
      if (r.collective != Collective::all_reduce || r.bytes != kCount * 4) return;
      std::lock_guard lock(mutex);
      finishers.insert(std::this_thread::get_id());
    };
    run_ranks(
        n,
        [&](Communicator& comm) {
          {
            std::lock_guard lock(mutex);
            callers.insert(std::this_thread::get_id());
          }
          std::vector<float> data(kCount, 1.0f);
          for (int i = 0; i < 3; ++i)
            comm.all_reduce(data.data(), data.data(), kCount, DataType::fp32, RedOp::sum).wait();
          EXPECT_EQ(data[kCount - 1], static_cast<float>(n * n * n));
        },
        options);
    ::unsetenv("RINGMASTER_INLINE_BYTES");
    ASSERT_EQ(callers.size(), static_cast<std::size_t>(n));
    ASSERT_FALSE(finishers.empty());
    for (const auto& id : finishers)
      EXPECT_EQ(callers.count(id), given ? 0u : 1u) << (given ? "INLINE_BYTES=65536" : "default");
  }
  ::unsetenv("NCCL_MAX_NCHANNELS");
}

// The flight recorder keeps the last 256 collectives in order (sends and
// receives take no number and are not kept) and shows the one in progress
// with the peer it waits on.
TEST(FlightRecorder, KeepsTheLastCallsAndTheOneInProgress) {
  std::atomic<bool> rank0_waits{false};
  run_ranks(2, [&](Communicator& comm) {
    std::vector<float> data(16, 1.0f);
    for (int i = 0; i < 300; ++i)
      comm.all_reduce(data.data(), data.data(), data.size(), DataType::fp32, RedOp::sum).wait();
    const int peer = 1 - comm.rank();
    comm.sendrecv(data.data(), peer, data.data(), peer, data.size(), DataType::fp32).wait();
    auto calls = comm.recent_calls();
    ASSERT_EQ(calls.size(), 256u);
    for (std::size_t i = 0; i < calls.size(); ++i) {
      EXPECT_EQ(calls[i].seq, 44 + i);
      EXPECT_EQ(calls[i].state, CallState::done);
      EXPECT_EQ(calls[i].collective, Collective::all_reduce);
      EXPECT_EQ(calls[i].bytes, 64u);
      EXPECT_EQ(calls[i].waits_on, -1);
    }
    EXPECT_LE(calls.back().duration, calls.back().age);

    // Rank 0 alone calls #300: it waits on rank 1 until rank 1 calls too.
    std::vector<float> big(1 << 18, 1.0f);
    if (comm.rank() == 0) {
      auto request = comm.all_reduce(big.data(), big.data(), big.size(), DataType::fp32, RedOp::sum);
      const auto deadline = std::chrono::steady_clock::now() + 10s;
      CallRecord last;
      while (std::chrono::steady_clock::now() < deadline) {
        last = comm.recent_calls().back();
        if (last.waits_on >= 0) break;
        std::this_thread::sleep_for(10ms);
      }
      EXPECT_EQ(last.seq, 300u);
      EXPECT_EQ(last.state, CallState::running);
      EXPECT_EQ(last.waits_on, 1);
      EXPECT_GE(last.step, 0);
      EXPECT_EQ(last.bytes, big.size() * sizeof(float));
      rank0_waits = true;
      request.wait();
    } else {
      while (!rank0_waits.load())
        std::this_thread::sleep_for(5ms);
      comm.all_reduce(big.data(), big.data(), big.size(), DataType::fp32, RedOp::sum).wait();
    }
    EXPECT_EQ(big.front(), 2.0f);
    const auto last = comm.recent_calls().back();
    EXPECT_EQ(last.seq, 300u);
    EXPECT_EQ(last.state, CallState::done);
    EXPECT_EQ(last.waits_on, -1);
  });
}

// A caller that submits many calls before it waits (nccl-tests' loop):
// the call that is stuck keeps its place in the recorder, however many
// are queued behind it.
TEST(FlightRecorder, KeepsTheStuckCallBehindHundredsQueued) {
  std::atomic<bool> rank0_submitted{false};
  run_ranks(2, [&](Communicator& comm) {
    std::vector<std::vector<float>> data(600, std::vector<float>(16, 1.0f));
    if (comm.rank() == 1) {
      while (!rank0_submitted.load())
        std::this_thread::sleep_for(5ms);
    }
    std::vector<Request> requests;
    for (auto& d : data)
      requests.push_back(comm.all_reduce(d.data(), d.data(), d.size(), DataType::fp32, RedOp::sum));
    if (comm.rank() == 0) {
      const auto calls = comm.recent_calls();
      ASSERT_FALSE(calls.empty());
      EXPECT_EQ(calls.front().seq, 0u) << "the first call, still waiting for rank 1, was pushed out";
      EXPECT_NE(calls.front().state, CallState::done);
      EXPECT_LE(calls.size(), comm::FlightRecorder::kSlots);
      EXPECT_TRUE(std::is_sorted(calls.begin(), calls.end(),
                                 [](const CallRecord& a, const CallRecord& b) { return a.seq < b.seq; }));
      rank0_submitted = true;
    }
    for (auto& r : requests)
      r.wait();
    EXPECT_EQ(data.back().front(), 2.0f);
    EXPECT_EQ(comm.call_counts().started, 600u);
    EXPECT_EQ(comm.call_counts().ended, 600u);
  });
}

// Three ranks; ranks 0 and 1 call all_reduce #5 while rank 2 stays away
// (busy elsewhere, or without Ringmaster's watcher when `rank2_watches` is
// false). Returns the stall reports and how long after the first call of
// #5 the first came; rank 2 joins once a report is in (or after 8 s).
struct StallRun {
  std::vector<StallReport> reports;
  std::chrono::steady_clock::duration after{};
};
StallRun run_with_rank2_away(bool rank2_watches) {
  StallRun run;
  std::mutex mutex;
  std::condition_variable reported;
  std::atomic<std::int64_t> first_call_ns{0};
  const auto port = free_port();
  std::vector<std::thread> threads;
  for (int r = 0; r < 3; ++r) {
    threads.emplace_back([&, r] {
      CommOptions options;
      options.timeout = 30s;
      options.stall_after = (r == 2 && !rank2_watches) ? 0ms : 1000ms;
      options.on_stall = [&](const StallReport& report) {
        const auto now = std::chrono::steady_clock::now().time_since_epoch().count();
        std::lock_guard lock(mutex);
        if (run.reports.empty()) run.after = std::chrono::steady_clock::duration(now - first_call_ns.load());
        run.reports.push_back(report);
        reported.notify_all();
      };
      try {
        auto comm = Communicator::create(rank_config(r, 3, port), options);
        std::vector<float> data(1024, 1.0f);
        for (int i = 0; i < 5; ++i)
          comm->all_reduce(data.data(), data.data(), data.size(), DataType::fp32, RedOp::sum).wait();
        if (r == 2) {
          std::unique_lock lock(mutex);
          reported.wait_for(lock, 8s, [&] { return !run.reports.empty(); });
        } else {
          std::int64_t none = 0;
          first_call_ns.compare_exchange_strong(none, std::chrono::steady_clock::now().time_since_epoch().count());
        }
        std::fill(data.begin(), data.end(), 1.0f);
        comm->all_reduce(data.data(), data.data(), data.size(), DataType::fp32, RedOp::sum).wait();
        EXPECT_EQ(data.front(), 3.0f) << "rank " << r;
      } catch (const std::exception& e) {
        ADD_FAILURE() << "rank " << r << ": " << e.what();
      }
    });
  }
  for (auto& t : threads)
    t.join();
  return run;
}

// The application's ranks out of step: within the stall time + 2 s the
// rank that saw the stall reports every rank's recent calls and names the
// rank that has not called.
TEST(StallReport, NamesTheRankThatHasNotCalled) {
  const StallRun run = run_with_rank2_away(/*rank2_watches=*/true);
  ASSERT_EQ(run.reports.size(), 1u) << "one report per stall, from the rank that saw it first";
  const StallReport& r = run.reports.front();
  std::printf("stall reported %.2f s after the first call of #5 (stall time 1 s)\n",
              std::chrono::duration<double>(run.after).count());
  // The figure (stall time + 2 s at most) is measured and written down
  // (docs/performance.md); a timing on a shared machine gates nothing
  // here beyond "long before the collective timeout".
  EXPECT_LE(run.after, 10s);
  EXPECT_GE(run.after, 1s);
  EXPECT_EQ(r.seq, 5u);
  EXPECT_EQ(r.collective, Collective::all_reduce);
  EXPECT_NE(r.reporter, 2);
  EXPECT_GE(r.stalled_for, 1s);
  ASSERT_EQ(r.ranks.size(), 3u);
  for (int rank = 0; rank < 3; ++rank) {
    EXPECT_EQ(r.ranks[static_cast<std::size_t>(rank)].rank, rank);
    EXPECT_TRUE(r.ranks[static_cast<std::size_t>(rank)].answered) << "rank " << rank;
  }
  EXPECT_EQ(r.ranks[2].last_called, 4);
  EXPECT_EQ(r.ranks[0].last_called, 5);
  EXPECT_EQ(r.ranks[0].calls.back().state, CallState::running);
  EXPECT_EQ(r.ranks[0].calls.back().waits_on, 2) << "rank 0 receives from rank 2 on the ring";
  EXPECT_NE(r.diagnosis.find("rank 2 is at #4 and has not called #5"), std::string::npos) << r.diagnosis;
  EXPECT_NE(r.diagnosis.find("rank 0 waits on rank 2 at all_reduce #5 step"), std::string::npos) << r.diagnosis;
}

// A rank that does not answer (stopped, dead, or here without a watcher)
// is named as such.
TEST(StallReport, NamesARankThatDoesNotAnswer) {
  const StallRun run = run_with_rank2_away(/*rank2_watches=*/false);
  ASSERT_EQ(run.reports.size(), 1u);
  const StallReport& r = run.reports.front();
  std::printf("stall reported %.2f s after the first call of #5 (stall time 1 s)\n",
              std::chrono::duration<double>(run.after).count());
  EXPECT_LE(run.after, 10s);
  ASSERT_EQ(r.ranks.size(), 3u);
  EXPECT_TRUE(r.ranks[0].answered);
  EXPECT_TRUE(r.ranks[1].answered);
  EXPECT_FALSE(r.ranks[2].answered);
  EXPECT_NE(r.diagnosis.find("rank 0 waits on rank 2 at all_reduce #5"), std::string::npos) << r.diagnosis;
  EXPECT_NE(r.diagnosis.find("rank 2 did not answer"), std::string::npos) << r.diagnosis;
}

// The rank whose call times out first is seldom the one that lags (here
// rank 1 times out waiting on rank 0, which waits on rank 2): a timeout
// after a stall report carries the report's diagnosis, on every rank.
TEST(StallReport, TimeoutsCarryTheStallReport) {
  std::mutex mutex;
  std::vector<std::string> errors;
  std::atomic<int> failed{0};
  const auto port = free_port();
  std::vector<std::thread> threads;
  for (int r = 0; r < 3; ++r) {
    threads.emplace_back([&, r] {
      CommOptions options;
      options.timeout = 6s;  // the report (at about 1.7 s) comes first even on a loaded machine
      options.stall_after = 1s;
      auto comm = Communicator::create(rank_config(r, 3, port), options);
      std::vector<float> data(1024, 1.0f);
      for (int i = 0; i < 5; ++i)
        comm->all_reduce(data.data(), data.data(), data.size(), DataType::fp32, RedOp::sum).wait();
      if (r == 2) {  // never calls #5; stays until the others have failed
        while (failed.load() < 2)
          std::this_thread::sleep_for(10ms);
        return;
      }
      try {
        comm->all_reduce(data.data(), data.data(), data.size(), DataType::fp32, RedOp::sum).wait();
        ADD_FAILURE() << "rank " << r << ": #5 completed without rank 2";
      } catch (const Error& e) {
        std::lock_guard lock(mutex);
        errors.push_back(e.what());
      }
      ++failed;
    });
  }
  for (auto& t : threads)
    t.join();
  ASSERT_EQ(errors.size(), 2u);
  for (const auto& e : errors) {
    EXPECT_NE(e.find("RINGMASTER_COLL_TIMEOUT"), std::string::npos) << e;
    EXPECT_NE(e.find("the stall report said: rank 0 waits on rank 2 at all_reduce #5 step 0; rank 2 is at #4 and "
                     "has not called #5"),
              std::string::npos)
        << e;
  }
}

CallRecord call(std::uint64_t seq, CallState state, int waits_on = -1, int step = -1) {
  CallRecord c;
  c.seq = seq;
  c.state = state;
  c.bytes = 4096;
  c.waits_on = waits_on;
  c.step = step;
  c.age = 12s;
  c.duration = 11s;
  return c;
}

// Answers cross the store as text: what goes in comes out, a rank that
// answered twice keeps its last answer, and lines that do not parse are
// dropped, not trusted.
TEST(StallReport, AnswersSurviveTheStoreAndJunkIsDropped) {
  RankWavefront a{3, true, 8, {call(7, CallState::done), call(8, CallState::running, 4, 2)}, {}};
  a.calls[1].waits_to_send = true;
  a.calls[1].collective = Collective::reduce_scatter;
  a.calls[1].algorithm = Algorithm::tree;
  a.calls[1].protocol = Protocol::ll128;
  a.calls[1].channels = 3;
  const RankWavefront b{0, true, -1, {}, {}};
  const std::string text = comm::encode_wavefront(RankWavefront{3, true, 1, {call(1, CallState::done)}, {}}) +
                           comm::encode_wavefront(b) + "R x 2\n1 2 3\ngarbage\n" + comm::encode_wavefront(a) +
                           "R 9 1 1\n1 0 64 0 0 1 9 0 0 -1 -1 0\n";  // state 9 does not exist
  const auto got = comm::decode_wavefronts(text);
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[0].rank, 0);
  EXPECT_TRUE(got[0].calls.empty());
  EXPECT_EQ(got[0].last_called, -1);
  EXPECT_EQ(got[1].rank, 3);
  EXPECT_EQ(got[1].last_called, 8);
  ASSERT_EQ(got[1].calls.size(), 2u);
  const CallRecord& c = got[1].calls[1];
  EXPECT_EQ(c.seq, 8u);
  EXPECT_EQ(c.collective, Collective::reduce_scatter);
  EXPECT_EQ(c.algorithm, Algorithm::tree);
  EXPECT_EQ(c.protocol, Protocol::ll128);
  EXPECT_EQ(c.channels, 3);
  EXPECT_EQ(c.state, CallState::running);
  EXPECT_EQ(c.waits_on, 4);
  EXPECT_EQ(c.step, 2);
  EXPECT_TRUE(c.waits_to_send);
  EXPECT_EQ(c.age, 12s);
  EXPECT_EQ(c.duration, 11s);
  EXPECT_EQ(got[2].rank, 9);
  EXPECT_TRUE(got[2].calls.empty());
}

// A caller that submits many calls before it waits (nccl-tests' loop) has
// dozens queued behind the stuck one: a rank answers with its frontier,
// its last calls done and its first ones not, not with its newest.
TEST(StallReport, AnswersCarryTheFrontierNotTheNewestCalls) {
  std::vector<CallRecord> calls;
  for (std::uint64_t seq = 0; seq < 25; ++seq)
    calls.push_back(call(seq, seq < 5 ? CallState::done : CallState::queued));
  auto kept = comm::around_frontier(calls);
  ASSERT_EQ(kept.size(), comm::kWavefrontCalls);
  EXPECT_EQ(kept.front().seq, 1u);
  EXPECT_EQ(kept[4].seq, 5u);
  EXPECT_EQ(kept.back().seq, 8u);
  for (auto& c : calls)
    c.state = CallState::done;
  kept = comm::around_frontier(calls);
  ASSERT_EQ(kept.size(), comm::kWavefrontCalls);
  EXPECT_EQ(kept.front().seq, 17u);
  EXPECT_EQ(kept.back().seq, 24u);
  calls[1].state = CallState::running;
  kept = comm::around_frontier(calls);
  EXPECT_EQ(kept.front().seq, 0u);
  EXPECT_EQ(kept.back().seq, 7u);
  EXPECT_TRUE(comm::around_frontier({}).empty());
}

// Every rank in the call and none moving is the network's doing, not a
// rank's: the diagnosis says so and names who waits on whom.
TEST(StallReport, EveryRankInTheCallIsANetworkStall) {
  StallReport r;
  r.seq = 1234;
  r.collective = Collective::all_reduce;
  r.ranks = {RankWavefront{0, true, 1234, {call(1233, CallState::done), call(1234, CallState::running, 1, 3)}, {}},
             RankWavefront{1, true, 1234, {call(1233, CallState::done), call(1234, CallState::running, 0, 3)}, {}}};
  const std::string d = comm::diagnose(r);
  EXPECT_NE(d.find("every rank has called all_reduce #1234"), std::string::npos) << d;
  EXPECT_NE(d.find("network or transport stall"), std::string::npos) << d;
  EXPECT_NE(d.find("rank 1 waits on rank 0 (step 3)"), std::string::npos) << d;

  // The example: rank 6 behind, rank 5 waiting on it.
  r.ranks.clear();
  for (int rank = 0; rank < 8; ++rank) {
    const bool behind = rank == 6;
    r.ranks.push_back(RankWavefront{rank, true, behind ? 1233 : 1234, {call(1233, CallState::done)}, {}});
    if (!behind) r.ranks.back().calls.push_back(call(1234, CallState::running, rank == 5 ? 6 : -1, 3));
  }
  EXPECT_EQ(comm::diagnose(r),
            "rank 5 waits on rank 6 at all_reduce #1234 step 3; rank 6 is at #1233 and has not "
            "called #1234");

  // A rank stopped in #50: rank 2 waits on it there, rank 0 has ended its
  // part of #50 and waits on rank 2 in #51. Seen from rank 0 (its stalled
  // call is #51), the wait that names the silent rank is still rank 2's at
  // #50 (it was left out when only waits in the report's call counted).
  r.seq = 51;
  r.ranks = {RankWavefront{0, true, 51, {call(50, CallState::done), call(51, CallState::running, 2, 0)}, {}},
             RankWavefront{1, false, -1, {}, {}},
             RankWavefront{2, true, 51, {call(50, CallState::running, 1, 3), call(51, CallState::queued)}, {}}};
  const std::string frozen = comm::diagnose(r);
  EXPECT_NE(frozen.find("rank 2 waits on rank 1 at all_reduce #50 step 3; rank 1 did not answer"), std::string::npos)
      << frozen;
  EXPECT_NE(frozen.find("its process is stopped"), std::string::npos) << frozen;
  // The reporter's probe of the silent rank's host found nothing there:
  // the path, not the process.
  r.ranks[1].silence = "10.0.0.2 answers nothing, not even a new connection's handshake: the path to that host is down";
  const std::string cut_off = comm::diagnose(r);
  EXPECT_NE(cut_off.find("rank 1 did not answer: 10.0.0.2 answers nothing"), std::string::npos) << cut_off;
  EXPECT_EQ(cut_off.find("its process is stopped"), std::string::npos) << cut_off;
}

}  // namespace
}  // namespace ringmaster

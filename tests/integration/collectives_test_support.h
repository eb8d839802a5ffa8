// What the collectives' integration tests share: ranks as threads of this
// process (each with its own communicator, connections and progress
// threads) over shared memory, sockets, libfabric or a mix, and a check of
// every element against a reference built from every rank's input
// (run_perf's #wrong). Each collective*_test.cpp is a program of its own,
// so ctest runs them side by side.
#pragma once

#include <fcntl.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "base/cpus.h"
#include "base/log.h"
#include "comm/flight_recorder.h"
#include "comm/stall_watch.h"
#include "kernels/half.h"
#include "net/socket.h"
#include "process.h"
#include "ringmaster/comm.h"
#include "ringmaster/tools/perf.h"
#include "ringmaster/tools/topology.h"
#include "ringmaster/tools/topology_search.h"
#include "ringmaster/tools/tuner.h"
#include "transport/ofi/ofi.h"

namespace ringmaster::collectives_support {

using namespace std::chrono_literals;

using testing_support::free_port;
using testing_support::rank_config;

// What carries the connections between the ranks of a test: mixed keeps
// rank 0 on sockets, mixed_ofi on libfabric, the others share memory.
enum class Links { shm, socket, mixed, ofi, mixed_ofi };

inline const char* name_of(Links l) {
  switch (l) {
    case Links::shm:
      return "shm";
    case Links::socket:
      return "socket";
    case Links::mixed:
      return "mixed";
    case Links::ofi:
      return "ofi";
    case Links::mixed_ofi:
      return "mixed shm/ofi";
  }
  return "?";
}

// The transport expected between ranks r and peer.
inline std::string expected_transport(Links links, int r, int peer) {
  switch (links) {
    case Links::shm:
      return "SHM";
    case Links::socket:
      return "SOCKET";
    case Links::ofi:
      return "OFI";
    case Links::mixed:
      return r == 0 || peer == 0 ? "SOCKET" : "SHM";
    case Links::mixed_ofi:
      return r == 0 || peer == 0 ? "OFI" : "SHM";
  }
  return "?";
}

inline CommOptions with_links(CommOptions options, Links links, int r) {
  const bool ofi = links == Links::ofi || links == Links::mixed_ofi;
  options.shared_memory = links == Links::shm || ((links == Links::mixed || links == Links::mixed_ofi) && r != 0);
  options.net = ofi ? "OFI" : "Socket";
  return options;
}

// libfabric over loopback (tcp;ofi_rxm here); tests of it skip without.
inline bool ofi_usable() {
  return transport::ofi::availability("lo").usable;
}

// Our segments in /dev/shm right now.
// Our segments in /dev/shm created by these processes (default: this one):
// other tests running beside this one have theirs.
inline int shm_segments(std::vector<pid_t> creators = {::getpid()}) {
  int n = 0;
  for (const auto& e : std::filesystem::directory_iterator("/dev/shm")) {
    for (pid_t pid : creators) {
      if (e.path().filename().string().starts_with("ringmaster-" + std::to_string(pid) + "-")) ++n;
    }
  }
  return n;
}

// Runs body(comm) on n ranks at once; collects the first failure.
inline void run_ranks(int n, const std::function<void(Communicator&)>& body, const CommOptions& options = {},
                      Links links = Links::shm) {
  const auto port = free_port();
  std::vector<std::thread> threads;
  std::mutex mutex;
  std::vector<std::string> failures;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      try {
        auto comm = Communicator::create(rank_config(r, n, port), with_links(options, links, r));
        // Every connection is carried as asked.
        for (const auto& c : comm->connections()) {
          const std::string expected = expected_transport(links, r, c.peer);
          if (c.transport != expected) {
            throw std::runtime_error("rank " + std::to_string(r) + " reaches rank " + std::to_string(c.peer) + " via " +
                                     c.transport + ", expected " + expected + " (" + c.fallback + ")");
          }
        }
        body(*comm);
      } catch (const std::exception& e) {
        std::lock_guard lock(mutex);
        failures.push_back("rank " + std::to_string(r) + ": " + e.what());
      }
    });
  }
  for (auto& t : threads)
    t.join();
  for (const auto& f : failures)
    ADD_FAILURE() << f;
}

struct MatrixCase {
  Collective collective;
  DataType type;
  RedOp op;
};

inline bool has_tree(Collective c) {
  return c == Collective::all_reduce || c == Collective::broadcast || c == Collective::reduce;
}

// Checks one collective at `counts` (elements per rank) on n ranks, out of
// place and in place, through both protocols and, where it has one, the
// tree as well as the ring.
inline void check(const MatrixCase& c, int n, const std::vector<std::size_t>& counts, Links links = Links::shm,
                  const std::vector<Protocol>& protocols = {Protocol::ll, Protocol::simple}) {
  // LL is the small-message protocol: above 1 Mi elements only Simple runs,
  // and over shared memory (where LL moves 8 bytes per 16-byte line) from
  // 1 Mi elements; LineProtocolsOverSharedMemory wraps the line rings.
  const std::size_t largest = *std::max_element(counts.begin(), counts.end());
  const bool large = largest > (1u << 20) + 3 || (links == Links::shm && largest >= (1u << 20));
  // The pair exchange: 2-rank all_reduce up to RINGMASTER_PAIR_BYTES
  // (16 KiB by default), its sizes only.
  std::vector<std::size_t> pair_counts;
  for (std::size_t count : counts) {
    if (count * size_of(c.type) <= 16384) pair_counts.push_back(count);
  }
  const bool pair = c.collective == Collective::all_reduce && n == 2 && !pair_counts.empty();
  for (Algorithm algorithm : {Algorithm::ring, Algorithm::tree, Algorithm::pair}) {
    for (Protocol protocol : protocols) {
      if (large && protocol == Protocol::ll && algorithm != Algorithm::pair) continue;
      if (algorithm == Algorithm::tree && !has_tree(c.collective)) continue;
      if (algorithm == Algorithm::pair && !pair) continue;
      const auto& sizes = algorithm == Algorithm::pair ? pair_counts : counts;
      CommOptions options;
      if (has_tree(c.collective)) options.algorithm = algorithm;
      options.protocol = protocol;
      options.buffsize = 64 * 1024;  // small slots, so large sizes take many pipelined steps
      // Several channels whatever the size (some get empty ranges at tiny
      // counts), so the split across channels is always exercised.
      options.min_channels = 2;
      options.max_channels = 3;
      run_ranks(
          n,
          [&](Communicator& comm) {
            for (std::size_t count : sizes) {
              PerfSpec spec;
              spec.collective = c.collective;
              spec.type = c.type;
              spec.op = c.op;
              spec.root = n > 1 ? 1 : 0;
              const bool per_rank = c.collective == Collective::all_gather ||
                                    c.collective == Collective::reduce_scatter ||
                                    c.collective == Collective::all_to_all || c.collective == Collective::gather ||
                                    c.collective == Collective::scatter;
              spec.min_bytes = spec.max_bytes = count * size_of(c.type) * (per_rank ? static_cast<std::size_t>(n) : 1);
              spec.iters = 1;
              spec.warmup = 0;
              const auto rows = run_perf(comm, spec);
              ASSERT_EQ(rows.size(), 1u);
              EXPECT_EQ(rows[0].count, count);
              EXPECT_EQ(rows[0].out_of_place.wrong, 0)
                  << name_of(c.collective) << " " << name_of(c.type) << " " << name_of(c.op) << " count " << count
                  << " ranks " << n << " " << name_of(algorithm) << "/" << name_of(protocol) << " over "
                  << name_of(links) << " out of place, rank " << comm.rank();
              EXPECT_EQ(rows[0].in_place.wrong, 0)
                  << name_of(c.collective) << " " << name_of(c.type) << " " << name_of(c.op) << " count " << count
                  << " ranks " << n << " " << name_of(algorithm) << "/" << name_of(protocol) << " over "
                  << name_of(links) << " in place, rank " << comm.rank();
            }
          },
          options, links);
    }
  }
}

inline const std::vector<Collective> kCollectives = {
    Collective::all_reduce, Collective::all_gather, Collective::reduce_scatter,
    Collective::broadcast,  Collective::reduce,     Collective::all_to_all,
    Collective::gather,     Collective::scatter,    Collective::send_recv};

}  // namespace ringmaster::collectives_support

// Calibration: the links of a communicator measured at init for the tuner
// (docs/tuner.md). Every rank runs it at once on its channels' rings,
// before the progress threads start: small all_reduces give each
// protocol's hop latency on rings and trees, larger ones the bandwidth by
// size, the tree's share of it and each protocol's share; all channels at
// once give the bandwidth of several. The ranks then take the median of
// every rank's figures, so they all build the same model and pick alike.
// Rank 0 keeps a calibration in the cache (tune/cache.h) and offers it to
// the others on the next communicator of the same shape.
#pragma once

#include <array>
#include <cstddef>
#include <string>
#include <vector>

#include "algo/ring.h"
#include "algo/tree.h"
#include "ringmaster/tools/tuner.h"
#include "tune/cache.h"

namespace ringmaster::tune {

// What calibration runs on and how its shape is named in the cache.
struct CalibrationRun {
  int rank = 0;
  int nranks = 1;
  std::vector<algo::Context> rings;        // per channel; the small calls go on the first
  const algo::DoubleTree* tree = nullptr;  // the all_reduce tree (rank 0 first)
  // What carries this rank's links: "shm", "ofi", "socket" or a mix such
  // as "shm+socket"; empty without links (one rank).
  std::string transport;
  // Which host each rank runs on, as one key (Bootstrap::placement):
  // a cached calibration is taken only for the same hosts.
  std::string placement;
  std::size_t buffsize = 0;
  std::string tree_nodes;  // RINGMASTER_TREE_NODES
};

// Measures (or takes from the cache) the figures of `shape`'s links and
// returns them as a LinkModel; fills in shape's tree shares and source.
// With RINGMASTER_CALIBRATE=0 or one rank: shape's figures, unmeasured.
// Throws Error when a rank fails on the way.
LinkModel calibrate(const CalibrationRun& run, Shape& shape);

// A calibration as the ranks pass it to each other: its figures as
// doubles in a fixed order.
inline constexpr std::size_t kPackedFigures = 3 * 3 + 3 + 2 * kCalibrationPoints + 2;
using Packed = std::array<double, kPackedFigures>;
Packed pack(const Calibration& c);
Calibration unpack(const Packed& figures);

}  // namespace ringmaster::tune

// Topology figures: hwloc discovery of this machine (against hwloc's own
// default load, as lstopo does it, measured in the same run), and loading 128 declared p4d nodes plus
// the ring/tree search over their 1,024 ranks.
//
//   topo_bench [TOPOLOGY_FILE] [NODES] [CHANNELS]
#include <hwloc.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "ringmaster/tools/topology.h"
#include "ringmaster/tools/topology_search.h"

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const std::string file = argc > 1 ? argv[1] : RINGMASTER_TOPOLOGY_DIR "/p4d-24xl-topo.xml";
  const int nodes = argc > 2 ? std::atoi(argv[2]) : 128;
  const int channels = argc > 3 ? std::atoi(argv[3]) : 8;
  constexpr int kRounds = 15;

  // Discovery, interleaved with hwloc's load as lstopo configures it by
  // default (every discovery component, the important I/O devices): the
  // peer is hwloc's own default, not our configuration of it, so the
  // ratio says what our choices (no libpciaccess or GL component, the
  // sysfs reading of NICs and GPUs) and our own work cost or save.
  std::vector<double> ours, hwloc_only;
  for (int i = 0; i < kRounds; ++i) {
    auto start = Clock::now();
    hwloc_topology_t t;
    hwloc_topology_init(&t);
    hwloc_topology_set_io_types_filter(t, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
    hwloc_topology_load(t);
    hwloc_topology_destroy(t);
    hwloc_only.push_back(ms_since(start));
    start = Clock::now();
    const auto topo = ringmaster::topo::Topology::discover();
    ours.push_back(ms_since(start));
  }
  std::printf("discovery of this machine (median of %d): ringmaster %.2f ms, hwloc as lstopo loads it %.2f ms, ratio %.2f\n",
              kRounds, median(ours), median(hwloc_only), median(ours) / median(hwloc_only));

  // 128 declared nodes: every node read from its file, then the search.
  std::vector<double> load_ms, search_ms;
  int nranks = 0;
  for (int round = 0; round < 5; ++round) {
    auto start = Clock::now();
    std::vector<ringmaster::topo::Topology> topologies;
    topologies.reserve(static_cast<std::size_t>(nodes));
    for (int n = 0; n < nodes; ++n)
      topologies.push_back(ringmaster::topo::Topology::load_file(file));
    load_ms.push_back(ms_since(start));
    start = Clock::now();
    std::vector<ringmaster::topo::NodeRanks> ranks;
    for (const auto& t : topologies)
      ranks.push_back({&t, -1});
    const auto plan = ringmaster::topo::search_channels(ranks, channels);
    search_ms.push_back(ms_since(start));
    nranks = plan.nranks;
  }
  const double total = median(load_ms) + median(search_ms);
  std::printf(
      "%d declared nodes (%d ranks), %d channels (median of 5): load %.2f ms + rings/trees %.2f ms = %.2f ms "
      "(aim < 200 ms: %s)\n",
      nodes, nranks, channels, median(load_ms), median(search_ms), total, total < 200 ? "met" : "NOT met");
  return 0;
}

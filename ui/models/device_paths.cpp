#include "models/device_paths.h"

namespace ringmaster::ui {

namespace {

int node_of(const RunState& run, int rank) {
  const auto& placement = run.placement();
  return rank >= 0 && rank < static_cast<int>(placement.size()) ? placement[static_cast<std::size_t>(rank)] : -1;
}

int gpu_of(const RunState& run, int rank) {
  const auto& gpus = run.gpus();
  return rank >= 0 && rank < static_cast<int>(gpus.size()) ? gpus[static_cast<std::size_t>(rank)] : -1;
}

DevicePath::End gpu(int index) {
  return {DevicePath::End::Kind::gpu, index, {}};
}

DevicePath::End away(const RunState& run, int rank) {
  const int node = node_of(run, rank);
  return {DevicePath::End::Kind::away, node,
          node < 0 ? QString("rank %1").arg(rank) : QString("agent %1 · rank %2").arg(node).arg(rank)};
}

}  // namespace

DevicePath ring_path(const RunState& run, int agent, int channel) {
  DevicePath out;
  out.title = QString("channel %1's ring on agent %2").arg(channel).arg(agent);
  if (channel < 0 || channel >= static_cast<int>(run.rings().size())) {
    out.why_empty = "no such channel in this run";
    return out;
  }
  if (run.gpus().empty()) {
    out.why_empty =
        "the engine placed this run's ranks on no GPU (its agents declared no topology with GPUs, or the run set "
        "none): the Rings tab shows the rings by rank";
    return out;
  }
  const auto& ring = run.rings()[static_cast<std::size_t>(channel)];
  const auto& nics = channel < static_cast<int>(run.ring_nics().size())
                         ? run.ring_nics()[static_cast<std::size_t>(channel)]
                         : RunState::RingNics{};
  const int n = static_cast<int>(ring.size());
  auto nic_at = [&](int p) {
    return p < static_cast<int>(nics.nics.size()) ? nics.nics[static_cast<std::size_t>(p)] : -1;
  };
  auto device_at = [&](int p) {
    return p < static_cast<int>(nics.devices.size()) ? nics.devices[static_cast<std::size_t>(p)] : QString();
  };
  for (int p = 0; p < n; ++p) {
    const int rank = ring[static_cast<std::size_t>(p)];
    if (node_of(run, rank) != agent) continue;
    const int prev = ring[static_cast<std::size_t>((p + n - 1) % n)];
    const int next = ring[static_cast<std::size_t>((p + 1) % n)];
    const DevicePath::End here = gpu(gpu_of(run, rank));
    const DevicePath::End nic{DevicePath::End::Kind::nic, nic_at(p), device_at(p)};
    if (node_of(run, prev) != agent) {
      const QString via = run.transport(prev, rank);
      if (nic.index >= 0) {
        out.hops.push_back({away(run, prev), nic, via.isEmpty() ? QString("in") : via});
        out.hops.push_back({nic, here, QString("rank %1").arg(rank)});
      } else {
        out.hops.push_back({away(run, prev), here, via});
      }
    }
    const QString via = run.transport(rank, next);
    if (node_of(run, next) == agent) {
      out.hops.push_back({here, gpu(gpu_of(run, next)), via});
    } else if (nic.index >= 0) {
      out.hops.push_back({here, nic, QString("rank %1").arg(rank)});
      out.hops.push_back({nic, away(run, next), via.isEmpty() ? QString("out") : via});
    } else {
      out.hops.push_back({here, away(run, next), via});
    }
  }
  if (out.hops.empty()) out.why_empty = QString("no rank of this run is on agent %1").arg(agent);
  return out;
}

DevicePath tree_path(const RunState& run, int agent, int tree) {
  DevicePath out;
  out.title = QString("all_reduce tree %1 on agent %2").arg(tree).arg(agent);
  if (tree < 0 || tree >= static_cast<int>(run.trees().size())) {
    out.why_empty = "no such tree in this run";
    return out;
  }
  if (run.gpus().empty()) {
    out.why_empty = "the engine placed this run's ranks on no GPU: the Rings tab shows the trees by rank";
    return out;
  }
  const auto& parents = run.trees()[static_cast<std::size_t>(tree)];
  for (int rank = 0; rank < static_cast<int>(parents.size()); ++rank) {
    const int parent = parents[static_cast<std::size_t>(rank)];
    if (parent < 0) continue;
    const bool child_here = node_of(run, rank) == agent;
    const bool parent_here = node_of(run, parent) == agent;
    if (child_here && parent_here) {
      out.hops.push_back({gpu(gpu_of(run, parent)), gpu(gpu_of(run, rank)), QString("rank %1").arg(rank)});
    } else if (child_here) {
      out.hops.push_back({away(run, parent), gpu(gpu_of(run, rank)), QString("rank %1").arg(rank)});
    } else if (parent_here) {
      out.hops.push_back({gpu(gpu_of(run, parent)), away(run, rank), QString("rank %1").arg(rank)});
    }
  }
  if (out.hops.empty()) out.why_empty = QString("no rank of this run is on agent %1").arg(agent);
  return out;
}

}  // namespace ringmaster::ui

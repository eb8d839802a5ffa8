// The tuner's cost model (tools/tuner.h); NCCL_ALGO / NCCL_PROTO are read in
// selection.cpp.
#include "ringmaster/tools/tuner.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "base/params.h"
#include "ringmaster/status.h"
#include "ringmaster/tools/topology.h"
#include "ringmaster/tools/topology_search.h"

namespace ringmaster::tune {
namespace {

constexpr std::size_t kP2pLlBytes = 16384;

// What a tree level costs on link l under protocol pi: measured, or the
// shape's factor times a hop.
double tree_level_us(const Shape& s, const LinkModel& l, int pi) {
  return l.tree_hop_latency_us[pi] > 0 ? l.tree_hop_latency_us[pi] : s.tree_hop_factor * l.hop_latency_us[pi];
}

// What leaves one node through its NICs when a tree moves `whole` bytes:
// once on two nodes (each is the root of one tree and a leaf of the
// other), twice beyond.
double tree_leaving(const Shape& s, double whole) {
  return s.nnodes == 2 ? whole : 2 * whole;
}

bool has_tree(Collective c) {
  return c == Collective::all_reduce || c == Collective::broadcast || c == Collective::reduce;
}

bool tunable(Collective c) {
  return c == Collective::all_reduce || c == Collective::all_gather || c == Collective::reduce_scatter ||
         c == Collective::broadcast || c == Collective::reduce;
}

std::string size_text(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (bytes >= 1024 && u < 4) {
    bytes /= 1024;
    ++u;
  }
  return bytes == std::floor(bytes) ? fmt::format("{:.0f} {}", bytes, units[u])
                                    : fmt::format("{:.1f} {}", bytes, units[u]);
}

}  // namespace

std::string_view algorithm_name(const Candidate& c) noexcept {
  if (c.in_switch) return c.algorithm == Algorithm::tree ? "NVLSTree" : "NVLS";
  return name_of(c.algorithm);
}

// ---- the model ----

double at_size(const std::vector<SizePoint>& points, double bytes, double otherwise) {
  if (points.empty()) return otherwise;
  if (bytes <= points.front().bytes) return points.front().value;
  for (std::size_t i = 1; i < points.size(); ++i) {
    const auto& lo = points[i - 1];
    const auto& hi = points[i];
    if (bytes > hi.bytes) continue;
    const double t = std::log(bytes / lo.bytes) / std::log(hi.bytes / lo.bytes);
    return lo.value + t * (hi.value - lo.value);
  }
  return points.back().value;
}

Tuner::Tuner(Shape shape, Selection algorithms, Selection protocols)
    : shape_(std::move(shape)), algorithms_(std::move(algorithms)), protocols_(std::move(protocols)) {
  shape_.max_channels = std::max(shape_.max_channels, 1);
  shape_.min_channels = std::clamp(shape_.min_channels, 1, shape_.max_channels);
  // Overrides that leave nothing for every collective are an error now;
  // for some collectives only, when one of them is called (as NCCL does).
  int usable = 0;
  for (const auto c : {Collective::all_reduce, Collective::all_gather, Collective::reduce_scatter,
                       Collective::broadcast, Collective::reduce}) {
    if (decide_or_null(c, 1024).chosen >= 0) ++usable;
  }
  if (usable == 0) (void)decide(Collective::all_reduce, 1024);
}

Tuner Tuner::from_env(Shape shape) {
  return Tuner(std::move(shape), Selection::from_env(Selection::Kind::algorithm),
               Selection::from_env(Selection::Kind::protocol));
}

std::string Tuner::why_excluded(Collective c, std::size_t bytes, Algorithm a, Protocol p) const {
  const bool crosses = shape_.nnodes > 1;
  if (a == Algorithm::tree && !has_tree(c)) {
    return fmt::format("no tree schedule for {} (ring only, as in NCCL)", name_of(c));
  } else if (a == Algorithm::pair && (shape_.pair_bytes == 0 || bytes > shape_.pair_bytes)) {
    return fmt::format("whole inputs are exchanged up to {} (RINGMASTER_PAIR_BYTES), unpipelined",
                       size_text(shape_.pair_bytes));
  } else if (p == Protocol::ll128 && !(shape_.intra.ll128 && (!crosses || shape_.inter.ll128))) {
    return fmt::format(
        "LL128 needs 128-byte lines written in order (NVLink, shared memory); {} carries a byte "
        "stream here",
        crosses && shape_.intra.ll128 ? shape_.inter.transport : shape_.intra.transport);
  } else if (auto why = algorithms_.why_not(c, static_cast<int>(a)); !why.empty()) {
    return "removed by " + why;
  } else if (auto why_p = protocols_.why_not(c, static_cast<int>(p)); !why_p.empty()) {
    return "removed by " + why_p;
  }
  return {};
}

Candidate Tuner::evaluate(Collective c, std::size_t bytes, Algorithm a, Protocol p, int channels) const {
  Candidate out;
  out.algorithm = a;
  out.protocol = p;
  out.channels = channels;
  const int ai = static_cast<int>(a), pi = static_cast<int>(p);
  const int n = shape_.nranks;
  const bool crosses = shape_.nnodes > 1;

  out.excluded = why_excluded(c, bytes, a, p);

  // Bandwidth: per channel the narrowest link the schedule crosses, all
  // channels together capped by what the links carry at most, times the
  // protocol's share of the line.
  const double b = static_cast<double>(bytes);
  const double intra_scale = at_size(shape_.intra.bandwidth_by_size, b, 1.0);
  double per_channel = shape_.intra.bandwidth_gbs * intra_scale;
  double most = shape_.intra.max_bandwidth_gbs * intra_scale;
  if (crosses) {
    const double inter_scale = at_size(shape_.inter.bandwidth_by_size, b, 1.0);
    per_channel = std::min(per_channel, shape_.inter.bandwidth_gbs * inter_scale);
    most = std::min(most, shape_.inter.max_bandwidth_gbs * inter_scale);
  }
  double efficiency = shape_.intra.protocol_efficiency[pi];
  if (crosses) efficiency = std::min(efficiency, shape_.inter.protocol_efficiency[pi]);
  double bandwidth = std::min(per_channel * channels, most) * efficiency;
  if (a == Algorithm::tree) bandwidth *= at_size(shape_.tree_efficiency_by_size, b, shape_.tree_efficiency);
  // Steps that reduce are slower where the reduction costs (CPU ranks).
  auto reducing = [](const LinkModel& l) {
    return l.reduce_bandwidth_gbs > 0 ? l.reduce_bandwidth_gbs : l.bandwidth_gbs;
  };
  double reduce_ratio = reducing(shape_.intra) / shape_.intra.bandwidth_gbs;
  if (crosses) reduce_ratio = std::min(reduce_ratio, reducing(shape_.inter) / shape_.inter.bandwidth_gbs);
  const double reduce_bandwidth = bandwidth * reduce_ratio;

  // Latency: hops along the schedule; traffic: the bytes the busiest rank
  // sends, plus the pipeline's fill for chains under Simple and for trees.
  const double slot = std::min(b / channels, static_cast<double>(shape_.slot_bytes));
  // LL moves a ring's or chain's step in one piece; trees go in slots
  // under every protocol (see Impl::start).
  const bool pieces = p != Protocol::ll;
  double hops = 0, hop_latency = shape_.intra.hop_latency_us[pi], traffic = 0;
  double reduced = 0;  // the share of traffic that is reduced on arrival
  if (a == Algorithm::pair) {
    // One step: each rank's whole input to the other; the traffic and its
    // reduced share of a ring of two, in one hop instead of two.
    hops = 1;
    traffic = b;
    reduced = 0.5;
  } else if (a == Algorithm::ring) {
    switch (c) {
      case Collective::all_reduce:
        hops = 2.0 * (n - 1);
        traffic = n == 1 ? 0 : b * 2.0 * (n - 1) / n;
        reduced = 0.5;
        break;
      case Collective::all_gather:
      case Collective::reduce_scatter:
        hops = n - 1;
        traffic = b * (n - 1) / n;
        reduced = c == Collective::reduce_scatter ? 1.0 : 0.0;
        break;
      case Collective::broadcast:
      case Collective::reduce:
        // A chain: pipelined by slots under Simple, whole under LL.
        hops = n - 1;
        traffic = n == 1 ? 0 : (pieces ? b + (n - 2) * slot : b * (n - 1));
        reduced = c == Collective::reduce ? 1.0 : 0.0;
        break;
      default:
        hops = 2.0 * (n - 1);
        traffic = 0;
        break;
    }
  } else {
    const double up_down = c == Collective::all_reduce ? 2.0 : 1.0;
    const double depth = shape_.tree_depth_intra + shape_.tree_depth_inter;
    hops = up_down * depth;
    auto level = [&](const LinkModel& l) { return tree_level_us(shape_, l, pi); };
    hop_latency =
        depth > 0
            ? (shape_.tree_depth_intra * level(shape_.intra) + shape_.tree_depth_inter * level(shape_.inter)) / depth
            : 0;
    // An inner rank sends to two children (all_reduce: each tree carries
    // half the data, and every rank is inner in one of them). The fill is
    // one piece per level and pass; a piece is a slot of a tree's half.
    const double piece = std::min(b / channels / 2, static_cast<double>(shape_.slot_bytes));
    traffic = n == 1 ? 0 : 2.0 * b + up_down * depth * piece;
    reduced = c == Collective::all_reduce ? 0.5 : (c == Collective::reduce ? 1.0 : 0.0);
  }
  // A ring crosses between nodes on (nnodes - 1) of its n - 1 hops per
  // pass; the other hops stay inside a node.
  // The pair exchange's one hop counts as a ring's (it is a ring of two).
  const bool ring_like = a == Algorithm::ring || a == Algorithm::pair;
  if (ring_like && crosses && hops > 0) {
    const double passes = c == Collective::all_reduce ? 2.0 : 1.0;
    const double inter_hops = std::min(hops, passes * (shape_.nnodes - 1));
    hop_latency =
        (inter_hops * shape_.inter.hop_latency_us[pi] + (hops - inter_hops) * shape_.intra.hop_latency_us[pi]) / hops;
  }
  const int base = ring_like ? static_cast<int>(Algorithm::ring) : ai;
  out.latency_us = shape_.base_latency_us[base][pi] + hops * hop_latency + (channels - 1) * shape_.channel_latency_us;
  out.bandwidth_gbs = bandwidth;
  out.predicted_us = out.latency_us;
  if (crosses && shape_.ranks_per_node > 0 && traffic > 0) {
    out.predicted_us += split_links_us(c, b, ring_like ? Algorithm::ring : a, p, channels, traffic, &out.bandwidth_gbs);
  } else if (bandwidth > 0) {
    out.predicted_us += traffic * (1 - reduced) / (bandwidth * 1e3) + traffic * reduced / (reduce_bandwidth * 1e3);
  }
  return out;
}

double Tuner::split_links_us(Collective c, double bytes, Algorithm a, Protocol p, int channels, double traffic,
                             double* bandwidth_gbs) const {
  const int pi = static_cast<int>(p);
  const double tree_share =
      a == Algorithm::tree ? at_size(shape_.tree_efficiency_by_size, bytes, shape_.tree_efficiency) : 1.0;
  auto carried = [&](const LinkModel& l) {
    return std::min(l.bandwidth_gbs * channels, l.max_bandwidth_gbs) * l.protocol_efficiency[pi] * tree_share;
  };
  const double inside = carried(shape_.intra);
  const double across = carried(shape_.inter);
  // What leaves one node through its NICs in one call.
  double leaving = 0;
  if (a == Algorithm::ring) {
    const bool chain = c == Collective::broadcast || c == Collective::reduce;
    leaving = chain ? bytes : traffic;
  } else {
    const double whole = c == Collective::all_reduce ? bytes : bytes / 2;
    leaving = tree_leaving(shape_, whole);
  }
  const double inside_us = inside > 0 ? traffic / (inside * 1e3) : 0;
  const double across_us = across > 0 ? leaving / (across * 1e3) : 0;
  const double us = std::max(inside_us, across_us);
  if (bandwidth_gbs != nullptr && us > 0) *bandwidth_gbs = traffic / (us * 1e3);
  return us;
}

Candidate Tuner::evaluate_in_switch(Collective c, std::size_t bytes) const {
  Candidate out;
  const bool across = shape_.nnodes > 1;
  out.algorithm = across ? Algorithm::tree : Algorithm::ring;
  out.protocol = Protocol::simple;  // NVLS runs Simple only
  out.channels = shape_.max_channels;
  out.in_switch = true;
  if (auto why = algorithms_.why_not_in_switch(c, across); !why.empty()) {
    out.excluded = "removed by " + why;
  } else if (auto why_p = protocols_.why_not(c, static_cast<int>(Protocol::simple)); !why_p.empty()) {
    out.excluded = "removed by " + why_p + " (NVLS runs Simple only)";
  }
  const int pi = static_cast<int>(Protocol::simple);
  const double b = static_cast<double>(bytes);
  // The switch adds what a node's ranks send and multicasts the sum back:
  // a step up and one down inside the node; across nodes, the tree's
  // levels between them, up and down.
  auto level = [&](const LinkModel& l) { return tree_level_us(shape_, l, pi); };
  const int ai = static_cast<int>(out.algorithm);
  out.latency_us =
      shape_.base_latency_us[ai][pi] +
      2.0 * (shape_.intra.hop_latency_us[pi] + (across ? shape_.tree_depth_inter * level(shape_.inter) : 0)) +
      (out.channels - 1) * shape_.channel_latency_us;
  // Inside a node the switch's own rate; across nodes the NICs carry the
  // node's buffer once on two nodes (each is the other's root in one tree)
  // and twice beyond, plus a piece per level and pass to fill the tree.
  double us = b / (shape_.switch_algbw_gbs * 1e3);
  if (across) {
    const double nics = std::min(shape_.inter.bandwidth_gbs * out.channels, shape_.inter.max_bandwidth_gbs) *
                        shape_.inter.protocol_efficiency[pi];
    const double piece = std::min(b / out.channels / 2, static_cast<double>(shape_.slot_bytes));
    const double leaving = tree_leaving(shape_, b) + 2.0 * shape_.tree_depth_inter * piece;
    if (nics > 0) us = std::max(us, leaving / (nics * 1e3));
  }
  out.bandwidth_gbs = us > 0 ? b / (us * 1e3) : 0;  // the node's buffer over its time
  out.predicted_us = out.latency_us + us;
  return out;
}

Decision Tuner::decide(Collective c, std::size_t bytes) const {
  Decision d = decide_or_null(c, bytes);
  if (d.chosen >= 0) return d;
  std::vector<std::string> removed;
  for (const auto& cand : d.candidates) {
    if (cand.channels != shape_.min_channels && !cand.in_switch && cand.algorithm != Algorithm::pair) continue;
    removed.push_back(fmt::format("{}/{}: {}", algorithm_name(cand), name_of(cand.protocol), cand.excluded));
  }
  throw Error(ErrorCategory::config,
              fmt::format("no algorithm and protocol left for {}: {}", name_of(c), fmt::join(removed, "; ")));
}

Decision Tuner::decide_or_null(Collective c, std::size_t bytes) const {
  Decision d;
  d.collective = c;
  d.bytes = bytes;
  d.nranks = shape_.nranks;
  if (!tunable(c)) {
    // Point-to-point steps: LL up to kP2pLlBytes, as NCCL's
    // NCCL_P2P_LL_THRESHOLD, unless NCCL_PROTO removed it; Simple above.
    const bool ll = bytes <= kP2pLlBytes && protocols_.why_not(c, static_cast<int>(Protocol::ll)).empty();
    Candidate only = evaluate(Collective::all_reduce, 0, Algorithm::ring, ll ? Protocol::ll : Protocol::simple, 1);
    only.excluded.clear();
    d.candidates.push_back(only);
    d.chosen = 0;
    return d;
  }
  // Channel counts: powers of two between the bounds, and the bounds.
  std::vector<int> counts;
  for (int ch = shape_.min_channels; ch <= shape_.max_channels; ch *= 2)
    counts.push_back(ch);
  if (counts.back() != shape_.max_channels) counts.push_back(shape_.max_channels);
  // Trees run on at most tree_channels (whatever the bounds say).
  std::vector<int> tree_counts;
  for (int ch : counts) {
    const int t = std::min(ch, shape_.tree_channels);
    if (std::find(tree_counts.begin(), tree_counts.end(), t) == tree_counts.end()) tree_counts.push_back(t);
  }
  // The pair exchange is a candidate of 2-rank all_reduce only, on one
  // channel (its one connection).
  const bool pair = c == Collective::all_reduce && shape_.nranks == 2;
  const std::vector<int> one = {1};
  for (int a = 0; a < kAlgorithms; ++a) {
    const auto algorithm = static_cast<Algorithm>(a);
    if (algorithm == Algorithm::pair && !pair) continue;
    const auto& channel_counts = algorithm == Algorithm::tree   ? tree_counts
                                 : algorithm == Algorithm::pair ? one
                                                                : counts;
    for (int p = 0; p < kProtocols; ++p) {
      for (int ch : channel_counts)
        d.candidates.push_back(evaluate(c, bytes, algorithm, static_cast<Protocol>(p), ch));
    }
  }
  // A node whose switch reduces (a simulated H100 or later): all_reduce
  // through it as well.
  const int per_node = shape_.nnodes > 1 ? shape_.ranks_per_node : shape_.nranks;
  if (c == Collective::all_reduce && shape_.switch_algbw_gbs > 0 && per_node >= 2)
    d.candidates.push_back(evaluate_in_switch(c, bytes));
  for (std::size_t i = 0; i < d.candidates.size(); ++i) {
    const auto& cand = d.candidates[i];
    if (!cand.excluded.empty()) continue;
    if (d.chosen < 0 || cand.predicted_us < d.candidates[static_cast<std::size_t>(d.chosen)].predicted_us) {
      d.chosen = static_cast<int>(i);
    }
  }
  return d;
}

std::string Tuner::describe() const {
  // "1.10 at 1 MiB, 1 at 4 MiB, 0.85 at 16 MiB"
  auto along = [](const std::vector<SizePoint>& points) {
    std::vector<std::string> parts;
    for (const auto& p : points)
      parts.push_back(fmt::format("{:.2f} at {}", p.value, size_text(p.bytes)));
    return fmt::format("{}", fmt::join(parts, ", "));
  };
  auto link = [&](const LinkModel& l) {
    std::string out = fmt::format(
        "{} hop {:.1f}/{:.1f}/{:.1f} us (LL/LL128/Simple), {:.2f} GB/s per channel (LL {:.2f}, LL128 {:.2f} of it), "
        "{:.2f} GB/s at most",
        l.transport, l.hop_latency_us[0], l.hop_latency_us[1], l.hop_latency_us[2], l.bandwidth_gbs,
        l.protocol_efficiency[0], l.protocol_efficiency[1], l.max_bandwidth_gbs);
    if (!l.bandwidth_by_size.empty()) out += ", by size x" + along(l.bandwidth_by_size);
    if (l.reduce_bandwidth_gbs > 0) out += fmt::format(", {:.2f} GB/s reducing", l.reduce_bandwidth_gbs);
    if (l.tree_hop_latency_us[0] > 0) {
      out += fmt::format(", tree level {:.1f}/{:.1f}/{:.1f} us", l.tree_hop_latency_us[0], l.tree_hop_latency_us[1],
                         l.tree_hop_latency_us[2]);
    }
    return out;
  };
  std::string out = fmt::format(
      "{} ranks on {} node{}, channels {}..{} ({:.1f} us each beyond the first); trees on at most {} channel(s), "
      "depth {}+{}, {:.1f}x a hop per level, {} of the line; within a node: {}",
      shape_.nranks, shape_.nnodes, shape_.nnodes == 1 ? "" : "s", shape_.min_channels, shape_.max_channels,
      shape_.channel_latency_us, std::min(shape_.tree_channels, shape_.max_channels), shape_.tree_depth_intra,
      shape_.tree_depth_inter, shape_.tree_hop_factor,
      shape_.tree_efficiency_by_size.empty() ? fmt::format("{:.2f}", shape_.tree_efficiency)
                                             : along(shape_.tree_efficiency_by_size),
      link(shape_.intra));
  if (shape_.switch_algbw_gbs > 0) {
    out += fmt::format("; the NVSwitch reduces: {:.0f} GB/s a node's all_reduce (NVLS)", shape_.switch_algbw_gbs);
  }
  if (shape_.nnodes > 1) out += "; across nodes: " + link(shape_.inter);
  if (!algorithms_.empty() || !protocols_.empty()) out += "; overrides apply";
  if (!shape_.source.empty()) out += "; " + shape_.source;
  return out;
}

int binary_tree_depth(int n) {
  int deepest = 0;
  for (int tree = 0; tree < 2; ++tree) {
    const auto parent = topo::binary_tree_parents(n, tree);
    for (int r = 0; r < n; ++r) {
      int depth = 0;
      for (int at = r; parent[static_cast<std::size_t>(at)] >= 0; at = parent[static_cast<std::size_t>(at)])
        ++depth;
      deepest = std::max(deepest, depth);
    }
  }
  return deepest;
}

double bus_factor(Collective c, int n) {
  switch (c) {
    case Collective::all_reduce:
      return n > 1 ? 2.0 * (n - 1) / n : 0.0;
    case Collective::all_gather:
    case Collective::reduce_scatter:
    case Collective::all_to_all:
    case Collective::gather:
    case Collective::scatter:
      return n > 1 ? static_cast<double>(n - 1) / n : 0.0;
    default:
      return 1.0;
  }
}

Shape socket_shape(int nranks, double hop_us, double gbs, int max_channels) {
  Shape s;
  s.nranks = nranks;
  s.nnodes = nranks;
  s.max_channels = std::max(max_channels, 1);
  s.tree_depth_inter = binary_tree_depth(nranks);
  s.tree_channels = 1;
  s.tree_hop_factor = 1.15;
  s.channel_latency_us = 5;
  s.pair_bytes = 16384;
  s.intra.transport = "socket";
  for (double& l : s.intra.hop_latency_us)
    l = hop_us;
  s.intra.protocol_efficiency[0] = 0.9;
  s.intra.bandwidth_gbs = gbs;
  s.intra.max_bandwidth_gbs = gbs * s.max_channels;
  s.inter = s.intra;
  return s;
}

void set_gpu_link(LinkModel& link, bool nvlink) {
  link.transport = nvlink ? "nvlink" : "pci";
  const double hop[3] = {nvlink ? 0.6 : 1.0, nvlink ? 1.25 : 1.9, nvlink ? 4.0 : 5.7};
  std::copy(hop, hop + 3, link.hop_latency_us);
  link.ll128 = nvlink;
}

Shape gpu_cluster(int gpus_per_node, int nodes, int ranks_per_node, int max_channels) {
  Shape s;
  const int rpn = ranks_per_node < 0 ? std::max(gpus_per_node, 1) : ranks_per_node;
  s.nranks = rpn * nodes;
  s.nnodes = nodes;
  s.ranks_per_node = rpn;
  s.max_channels = max_channels;
  s.tree_depth_intra = rpn - 1;
  s.tree_depth_inter = binary_tree_depth(nodes);
  // NCCL-like constants for GPU links (µs): base cost per algorithm and
  // protocol, and per hop per link class.
  s.base_latency_us[0][0] = 6.6, s.base_latency_us[0][1] = 14.0, s.base_latency_us[0][2] = 8.4;
  s.base_latency_us[1][0] = 6.8, s.base_latency_us[1][1] = 14.0, s.base_latency_us[1][2] = 8.4;
  s.tree_efficiency = 0.92;
  s.tree_channels = max_channels;
  s.channel_latency_us = 0.5;
  return s;
}

Shape declared_shape(const topo::Topology& node, int nodes, int ranks_per_node, int max_channels) {
  const auto gpus = node.gpus();
  const auto nics = node.nics();
  Shape s = gpu_cluster(static_cast<int>(gpus.size()), nodes, ranks_per_node, max_channels);
  if (gpus.size() >= 2) {
    const auto path = node.path(gpus[0], gpus[1]);
    const bool nvlink = path.cls == topo::PathClass::nvlink;
    set_gpu_link(s.intra, nvlink);
    const double bw = path.bandwidth > 0 ? path.bandwidth : (nvlink ? 20.0 : 12.0);
    s.intra.bandwidth_gbs = std::min(bw, 20.0);
    s.intra.max_bandwidth_gbs = bw;
  } else {
    s.intra.transport = "shm";
    s.intra.bandwidth_gbs = s.intra.max_bandwidth_gbs = 5.0;
  }
  // Across nodes: one NIC per channel, all NICs together at most.
  double nic_bw = 0;
  for (int nic : nics) {
    for (const auto& l : node.links()) {
      if (l.type == topo::LinkType::network && (l.a == nic || l.b == nic)) nic_bw += l.bandwidth;
    }
  }
  const int nic_count = std::max<int>(static_cast<int>(nics.size()), 1);
  if (nic_bw <= 0) nic_bw = 12.5 * nic_count;
  s.inter.transport = "net";
  const double net_hop[3] = {5.0, 8.5, 14.0};
  std::copy(net_hop, net_hop + 3, s.inter.hop_latency_us);
  s.inter.bandwidth_gbs = nic_bw / nic_count;
  s.inter.max_bandwidth_gbs = nic_bw;
  s.inter.ll128 = s.intra.ll128;
  s.source = fmt::format("declared by {} x {}", nodes, node.source());
  return s;
}

std::vector<std::string> crossovers(const std::vector<Decision>& decisions) {
  std::vector<std::string> out;
  for (std::size_t i = 1; i < decisions.size(); ++i) {
    const auto& a = decisions[i - 1];
    const auto& b = decisions[i];
    if (a.chosen < 0 || b.chosen < 0) continue;
    if (algorithm_name(a.pick()) == algorithm_name(b.pick()) && a.pick().protocol == b.pick().protocol) continue;
    out.push_back(fmt::format("{}: {}/{} -> {}/{}", size_text(static_cast<double>(b.bytes)), algorithm_name(a.pick()),
                              name_of(a.pick().protocol), algorithm_name(b.pick()), name_of(b.pick().protocol)));
  }
  return out;
}

std::string render(const Decision& d) {
  std::string out =
      fmt::format("# {} {} on {} ranks\n", name_of(d.collective), size_text(static_cast<double>(d.bytes)), d.nranks);
  out += fmt::format("#   {:<8} {:<7} {:>8} {:>12} {:>10} {:>13}\n", "algo", "proto", "channels", "latency(us)",
                     "bw(GB/s)", "predicted(us)");
  for (std::size_t i = 0; i < d.candidates.size(); ++i) {
    const auto& c = d.candidates[i];
    const char* mark = static_cast<int>(i) == d.chosen ? "=>" : "  ";
    if (!c.excluded.empty()) {
      out += fmt::format("# {} {:<8} {:<7} {:>8} {}\n", mark, algorithm_name(c), name_of(c.protocol), c.channels,
                         "excluded: " + c.excluded);
      continue;
    }
    out += fmt::format("# {} {:<8} {:<7} {:>8} {:>12.1f} {:>10.2f} {:>13.1f}\n", mark, algorithm_name(c),
                       name_of(c.protocol), c.channels, c.latency_us, c.bandwidth_gbs, c.predicted_us);
  }
  return out;
}

}  // namespace ringmaster::tune

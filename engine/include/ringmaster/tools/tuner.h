// The tuner: which algorithm, protocol and channel count a collective uses,
// and why.
//
// An alpha-beta model in the manner of NCCL's: each candidate costs a base
// latency for its algorithm and protocol, a latency per hop on the links it
// crosses, and its bytes over the bandwidth the protocol gets out of the
// link: `time = latency + bytes / bandwidth`; the cheapest allowed candidate
// wins. Candidates a transport cannot run, or that NCCL_ALGO / NCCL_PROTO
// remove, stay in the table with the reason, so the explanation is complete.
//
// Link parameters come from a short calibration (the communicator measures
// its own links once at init) or from a declared topology (NVLink and NIC
// bandwidths of the nodes' files). Every rank of a communicator must reach
// the same decision, so the inputs are agreed on before any collective.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ringmaster/types.h"

namespace ringmaster::topo {
class Topology;
}

namespace ringmaster::tune {

inline constexpr int kAlgorithms = 3;  // ring, tree, pair
inline constexpr int kProtocols = 3;   // ll, ll128, simple

// A figure measured at one collective size (bytes of the buffer).
struct SizePoint {
  double bytes = 0;
  double value = 0;
};

// A figure along a few measured sizes: between two points it follows
// log(bytes), beyond the first or last it stays at that point's value;
// `otherwise` when there are no points.
double at_size(const std::vector<SizePoint>& points, double bytes, double otherwise);

// What one link class costs: within a node, or across nodes.
struct LinkModel {
  std::string transport = "socket";  // socket, nvlink, pci, net
  // One step between neighbours, small message, per protocol (LL, LL128,
  // Simple).
  double hop_latency_us[kProtocols] = {30, 30, 30};
  // A tree level, per protocol, where measured (a rank waits on two
  // children, then its parent); 0: the shape's tree_hop_factor times a hop.
  double tree_hop_latency_us[kProtocols] = {0, 0, 0};
  double bandwidth_gbs = 1.0;      // GB/s one channel moves between neighbours
  double max_bandwidth_gbs = 1.0;  // GB/s all channels together
  // Where measured, both bandwidths above scaled by size (value: the
  // factor; 1 at the size they were measured at): CPU ranks copy and add
  // faster per byte while a collective's buffers stay in cache. Empty: the
  // same at every size.
  std::vector<SizePoint> bandwidth_by_size;
  // GB/s per channel of steps that reduce what they receive (the CPU adds
  // as it copies); 0: the same as bandwidth_gbs.
  double reduce_bandwidth_gbs = 0;
  // The share of the line each protocol carries as data: NCCL's LL sends
  // 8 bytes of flag with every 8 of data, LL128 8 in 128.
  double protocol_efficiency[kProtocols] = {0.5, 0.9375, 1.0};
  bool ll128 = false;  // can carry LL128 (128-byte lines written in order)
};

// The communicator as the model sees it.
struct Shape {
  int nranks = 1;
  int nnodes = 1;
  int max_channels = 1;
  // Hops from a tree's root to its deepest leaf: along the chain inside a
  // node, and across nodes. The deeper of the two trees counts.
  int tree_depth_intra = 0;
  int tree_depth_inter = 0;
  int min_channels = 1;
  LinkModel intra;  // between ranks of one node
  LinkModel inter;  // between nodes (unused when nnodes == 1)
  // Fixed cost of launching a collective, per algorithm (Ring, Tree; the
  // pair exchange takes Ring's) and protocol.
  double base_latency_us[2][kProtocols] = {{0, 0, 0}, {0, 0, 0}};
  double channel_latency_us = 2;  // each channel beyond the first
  // Simple pipelines in slots of this many bytes (NCCL_BUFFSIZE / 8).
  std::size_t slot_bytes = 512 * 1024;
  // The tree's share of the line (NCCL discounts its trees to 92%), what
  // a tree level costs in hops (an inner rank serves two children), and
  // the most channels a tree runs on.
  double tree_efficiency = 1.0;
  double tree_hop_factor = 1.0;
  // Where measured, the tree's share by size (tree_efficiency otherwise).
  std::vector<SizePoint> tree_efficiency_by_size;
  int tree_channels = 64;
  // Two ranks exchange whole inputs up to this many bytes (all_reduce).
  std::size_t pair_bytes = 0;
  // Ranks on each node of a declared cluster (0: not declared). With it
  // and more than one node, the links inside a node and a node's NICs are
  // timed apart, the slower deciding: what leaves a node per call is what
  // the schedule sends across (a ring's 2(n-1)/n of an all_reduce's
  // buffer; a tree's whole buffer on 2 nodes, where each node is the other's
  // root in one tree and its leaf in the other, twice it beyond), which is
  // why NCCL's trees report a bus bandwidth above the NICs' on 2 nodes.
  int ranks_per_node = 0;
  // A node whose NVSwitch adds what its GPUs send and multicasts the sum
  // back (NVLink SHARP, H100 and later): the algorithm bandwidth one
  // node's all_reduce reaches that way, GB/s; 0 where the switch does not
  // reduce. With it, all_reduce gets NCCL's NVLS candidate on one node
  // and NVLSTree (the switch inside each node, a tree between nodes)
  // across several. Only a declared instance sets it.
  double switch_algbw_gbs = 0;
  // Where the numbers come from: "calibrated at ... : ..." or "declared by ...".
  std::string source;
};

// NCCL_ALGO / NCCL_PROTO: which algorithms (protocols) each collective may
// use. Syntax: sections separated by ';', each `list` (every collective) or
// `function:list` (one collective: allreduce, allgather, reducescatter,
// broadcast, reduce; underscores allowed), a list being names separated by
// ',' with a leading '^' to exclude them instead. Case-insensitive. A later
// section for the same collective replaces an earlier one.
class Selection {
 public:
  enum class Kind { algorithm, protocol };
  Selection() = default;
  // Throws Error(config) naming the variable for unknown names, functions
  // or empty sections.
  static Selection parse(Kind kind, std::string_view variable, std::string_view spec);
  // NCCL_ALGO (algorithm) or NCCL_PROTO (protocol) as the environment
  // sets it, empty when unset: the one reader of those variables.
  static Selection from_env(Kind kind);
  bool allows(Collective c, int index) const;
  // What removed `index` for `c`, e.g. "NCCL_ALGO=^tree"; empty when allowed.
  std::string why_not(Collective c, int index) const;
  bool empty() const { return spec_.empty(); }
  // What it allows, one hex digit per collective, "" when it allows
  // everything: equal for selections that choose alike, however spelled.
  std::string allowed_key() const;
  // "NCCL_ALGO=ring;allreduce:tree" as given; "" when empty.
  std::string text() const;
  // NCCL's names that do not apply to a communicator here (NVLS, NVLSTree,
  // CollNetDirect, CollNetChain, PAT: they need NVLink SHARP, in-network
  // reduction or GPUs), dropped from what allows Ring and Tree; a section
  // left with neither allows both.
  const std::vector<std::string>& ignored() const { return ignored_; }
  // What it says of NVLS (`tree` false) or NVLSTree (true), which only a
  // simulated cluster whose switch reduces offers: as for Ring and Tree,
  // except that a section naming only NVLS algorithms leaves Ring and Tree
  // allowed (above); "" when allowed, else what removed it.
  std::string why_not_in_switch(Collective c, bool tree) const;

 private:
  std::string variable_, spec_;
  std::vector<std::string> ignored_;
  std::uint8_t all_ = 0;  // the mask that allows every entry
  // Per collective (Collective enum order) a bit mask of allowed entries
  // and the section that set it.
  std::vector<std::uint8_t> allowed_;
  std::vector<std::string> origin_;
  // Per collective: bit 0 NVLS, bit 1 NVLSTree; empty when all allowed.
  std::vector<std::uint8_t> in_switch_;
  // "NCCL_ALGO=..." and, when not the whole value, the section that set c.
  std::string removed_by(Collective c) const;
};

struct Candidate {
  Algorithm algorithm = Algorithm::ring;
  Protocol protocol = Protocol::simple;
  int channels = 1;
  double latency_us = 0;  // the model's terms, for the explanation
  double bandwidth_gbs = 0;
  double predicted_us = 0;
  std::string excluded;  // why it cannot be chosen; empty when it can
  // Reduced in the NVSwitch (Shape::switch_algbw_gbs): NCCL's NVLS on one
  // node (algorithm ring), NVLSTree across nodes (algorithm tree).
  bool in_switch = false;
};

// "Ring", "Tree", "NVLS" or "NVLSTree".
std::string_view algorithm_name(const Candidate& c) noexcept;

struct Decision {
  Collective collective = Collective::all_reduce;
  std::size_t bytes = 0;
  int nranks = 1;
  std::vector<Candidate> candidates;  // every combination, excluded ones too
  int chosen = -1;                    // index into candidates

  const Candidate& pick() const { return candidates.at(static_cast<std::size_t>(chosen)); }
};

class Tuner {
 public:
  // Throws Error(config) when the selections leave no collective a
  // candidate, naming the variables and what they removed.
  Tuner(Shape shape, Selection algorithms = {}, Selection protocols = {});
  // Reads NCCL_ALGO and NCCL_PROTO from the environment.
  static Tuner from_env(Shape shape);

  // Collectives without a choice (barrier, all_to_all, send/recv) get a
  // single ring/Simple candidate. Throws Error(config) when the overrides
  // leave `c` no candidate, listing what removed each.
  Decision decide(Collective c, std::size_t bytes) const;
  // The same, with chosen == -1 instead of the error.
  Decision decide_or_null(Collective c, std::size_t bytes) const;
  // The model and its inputs in a few lines (logged at INFO on rank 0).
  std::string describe() const;
  const Shape& shape() const noexcept { return shape_; }

 private:
  Candidate evaluate(Collective c, std::size_t bytes, Algorithm a, Protocol p, int channels) const;
  // Why a candidate cannot run (no such schedule, outside the pair
  // exchange's sizes, LL128 on a byte stream, removed by an override);
  // empty when it can.
  std::string why_excluded(Collective c, std::size_t bytes, Algorithm a, Protocol p) const;
  // all_reduce reduced in the NVSwitch: NVLS, or NVLSTree across nodes.
  Candidate evaluate_in_switch(Collective c, std::size_t bytes) const;
  // The time the bytes take on a declared cluster of several nodes: inside
  // a node and through its NICs timed apart, the slower; sets the
  // bandwidth the candidate shows (the busiest rank's bytes over it).
  double split_links_us(Collective c, double bytes, Algorithm a, Protocol p, int channels, double traffic,
                        double* bandwidth_gbs) const;

  Shape shape_;
  Selection algorithms_, protocols_;
};

// What a declared cluster of `nodes` nodes of `gpus_per_node` GPUs has
// whatever its links: ranks (`ranks_per_node`, -1: one per GPU), tree
// depths, NCCL's base latencies and tree discount. The links are the
// caller's to fill in.
Shape gpu_cluster(int gpus_per_node, int nodes, int ranks_per_node, int max_channels);

// A link between GPUs of one node, NVLink or PCIe: its transport, NCCL's
// hop latencies for that link class, and whether it carries LL128. The
// bandwidths are the caller's.
void set_gpu_link(LinkModel& link, bool nvlink);

// The shape of `nodes` identical declared nodes with `ranks_per_node` ranks
// each (-1: one per GPU): NVLink (or PCI) paths inside, the NICs across.
Shape declared_shape(const topo::Topology& node, int nodes, int ranks_per_node = -1, int max_channels = 16);

// n ranks over sockets, every rank its own tree node, with these link
// figures (hop latency, GB/s per channel): the model `ringmaster-cli tune`
// shows without a file, and where a communicator starts before it
// calibrates. Trees run on one channel; a tree level costs 1.15 hops (an
// inner rank serves two children in turn, but fewer ranks wait on each
// other than around a ring); LL carries 0.9 of the line (no flags, but its
// reduction cannot overlap the transfer).
Shape socket_shape(int nranks, double hop_us, double gbs, int max_channels = 1);

// The hops from root to deepest leaf of the deeper of the double binary
// trees over n positions.
int binary_tree_depth(int n);

// nccl-tests' bus-bandwidth factor (busbw = algbw x this): all_reduce
// 2(n-1)/n; all_gather, reduce_scatter, all_to_all, gather and scatter
// (n-1)/n; broadcast, reduce and sendrecv 1.
double bus_factor(Collective c, int nranks);

// Sizes where the pick changes algorithm or protocol, as "8 KiB: ring/LL ->
// tree/Simple" lines, for decisions ordered by size.
std::vector<std::string> crossovers(const std::vector<Decision>& decisions);

// One decision as a table: a line per candidate, the chosen one marked.
std::string render(const Decision& d);

}  // namespace ringmaster::tune

// Bisection inside one job: when a sweep over every node falls short, the
// job's own ranks form new communicators over halves of the nodes (then
// over pairs with a node already cleared), in the same processes and
// through the same store, until the node or link that holds the rest back
// is named. Groups of a round that share no node run side by side (they
// share no link either); the ranks meet between rounds through the job's
// TCP store, so a slow group holds no collective of the whole job past its
// timeout. A group is slow when its all_reduce busbw falls under
// `slow_ratio` of the best group of its round. Rounds: halves down to two
// or three suspects, then each suspect with a cleared node (and, for
// three that are each fine, their pairs), at most log2(nodes) + 2.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "ringmaster/config.h"

namespace ringmaster {

class Communicator;

struct BisectSpec {
  std::size_t bytes = 16u << 20;  // each group's all_reduce size
  int iters = 5, warmup = 1;
  int warmup_ms = 300;      // each group warms up at least this long before it is timed
  double slow_ratio = 0.7;  // a group under this share of its round's best is slow
  // The whole job's busbw at that size (the sweep's): halves both far
  // above it (the whole under `between_ratio` of the slower half) point at
  // a link between them. Far, since groups of different sizes differ on
  // their own (a pair runs the 2-rank exchange; ranks sharing cores).
  double whole_busbw = 0;
  double between_ratio = 0.3;
  std::chrono::milliseconds bootstrap_timeout{std::chrono::seconds(60)};  // each group's communicator
  std::chrono::milliseconds round_timeout{std::chrono::minutes(10)};      // the slowest group of a round
};

struct BisectGroup {
  std::vector<int> nodes;  // node indices (GROUP_RANK) in the job
  double busbw = 0;        // GB/s at spec.bytes; 0 when it could not run
  bool slow = false;
  std::string error;  // why it could not run
};

struct BisectRound {
  int round = 0;  // from 1
  std::vector<BisectGroup> groups;
};

struct BisectVerdict {
  enum class Kind { node, link, between, none };
  Kind kind = Kind::none;
  int node = -1;                    // kind node
  int from = -1, to = -1;           // kind link: the two nodes
  std::vector<int> side_a, side_b;  // kind between: the two halves
  std::string text;                 // one sentence saying what was found and how
};
const char* name_of(BisectVerdict::Kind k) noexcept;  // "node", "link", "between", "none"

struct BisectReport {
  std::vector<BisectRound> rounds;
  BisectVerdict verdict;
};

// Every rank of `comm` (created from `config`) calls it together; `node`
// is this rank's node index (its GROUP_RANK). Each round's measurements
// reach `on_round` on every rank as the round ends; all ranks return the
// same report. Throws what `comm`'s own collectives throw.
BisectReport bisect_nodes(Communicator& comm, const Config& config, int node, const BisectSpec& spec,
                          const std::function<void(const BisectRound&)>& on_round = {});

// The decision alone, from the rounds measured so far (their groups'
// busbw; `slow` is worked out again from spec.slow_ratio): the groups the
// next round measures, or none when the verdict is reached (then
// `verdict` says it).
std::vector<std::vector<int>> next_bisect_groups(const std::vector<int>& nodes, const std::vector<BisectRound>& rounds,
                                                 const BisectSpec& spec, BisectVerdict& verdict);

}  // namespace ringmaster

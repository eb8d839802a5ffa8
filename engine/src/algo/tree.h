// Double binary tree schedules (NCCL's tree algorithm) over a channel's
// direct connections (ChannelLink::mesh).
//
// Two complementary binary trees span the nodes; within a node the ranks
// form a chain from the node's first rank. Each tree carries half of the
// data. all_reduce reduces up each tree and broadcasts down, pipelined by
// pieces (a Simple slot, or the whole half under LL): every rank takes the
// pieces in the same order (up piece k of both trees, then down piece k-1),
// so the blocking transfers can never wait on each other in a cycle.
#pragma once

#include <array>
#include <cstddef>
#include <vector>

#include "algo/ring.h"

namespace ringmaster::algo {

struct DoubleTree {
  std::array<int, 2> root{0, 0};      // per tree
  std::array<int, 2> parent{-1, -1};  // this rank's, per tree; -1 at the root
  std::array<std::vector<int>, 2> children;
  int depth_intra = 0;  // hops along the deepest chain inside a node
  int depth_inter = 0;  // hops across nodes of the deeper tree
};

// node_of[r]: the node (host) of rank r; give every rank its own node for
// trees over ranks. chain_key[r]: where rank r stands in its node's chain
// (the topology search's: from the GPU nearest the NIC); empty for rank
// order. `first`: the rank that heads its node's chain and the first tree
// (broadcast and reduce roots); -1 for the head of rank 0's node.
DoubleTree build_double_tree(int rank, const std::vector<int>& node_of, int first = -1,
                             const std::vector<int>& chain_key = {});

void tree_all_reduce(Context& ctx, const DoubleTree& tree, const Task& task, const std::byte* send, std::byte* recv,
                     std::size_t count);
// task.root's buf goes to every rank.
void tree_broadcast(Context& ctx, const DoubleTree& tree, const Task& task, std::byte* buf, std::size_t count);
// buf holds this rank's input (overwritten); task.root's buf receives the result.
void tree_reduce(Context& ctx, const DoubleTree& tree, const Task& task, std::byte* buf, std::size_t count);

}  // namespace ringmaster::algo

// Channel search: rings and double binary trees over many nodes.
//
// Given each node's topology and how many ranks it runs (one per GPU, or a
// count for CPU-only nodes), builds N channels. A channel's ring visits
// every rank on a node before moving on, and leaves and enters each node
// through one NIC, with the GPUs it leaves from and enters at as close to
// that NIC as the node allows (PIX on a p4d). Channels take the NICs in
// turn. The trees are NCCL's double binary trees across nodes (channel c
// uses tree c % 2), each node a chain from the GPU nearest its NIC. The
// result is deterministic and every channel explains itself in a line.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "ringmaster/tools/topology.h"

namespace ringmaster::topo {

struct NodeRanks {
  const Topology* topology = nullptr;
  int ranks = -1;  // -1: one rank per GPU (one rank when there is none)
};

struct RingChannel {
  int channel = 0;
  std::vector<int> ranks;  // ring order, global ranks
  // Per node: the NIC (its number on that node) the ring leaves and
  // enters by; -1 when the ring never leaves the node.
  std::vector<int> nic;
};

struct TreeChannel {
  int channel = 0;
  int tree = 0;                            // 0 or 1 of the double binary tree
  int root = 0;                            // global rank
  std::vector<int> parent;                 // per rank; -1 at the root
  std::vector<std::vector<int>> children;  // per rank
};

struct ChannelPlan {
  int nranks = 0;
  std::vector<int> node_of;   // per rank
  std::vector<int> local_of;  // per rank: index on its node (its GPU number when it has GPUs)
  std::vector<RingChannel> rings;
  std::vector<TreeChannel> trees;
  std::vector<std::string> lines;  // "Channel 00 : 0 1 3 2 ...", one per ring and tree
};

// Throws Error(config) when a node has no topology or asks for more ranks
// than it has GPUs.
ChannelPlan search_channels(std::span<const NodeRanks> nodes, int nchannels);

// The two binary trees over n positions as parent arrays (-1 at the
// root), tree 0 and tree 1; a position is interior in at most one of them
// when n is even.
std::vector<int> binary_tree_parents(int n, int tree);

}  // namespace ringmaster::topo

// A ring's or a tree's way through one node, as the engine placed it: hops
// between the node's GPUs and NICs, and where it leaves for or comes from
// another node, for the topology drawing to draw over the node.
#pragma once

#include <QString>
#include <vector>

#include "models/run_state.h"

namespace ringmaster::ui {

struct DevicePath {
  struct End {
    enum class Kind { gpu, nic, away };
    Kind kind = Kind::gpu;
    int index = -1;  // GPU or NIC number on the node; for `away`, the other agent (-1: none)
    QString text;    // for `away`: "agent 1 · rank 2"
    bool operator==(const End&) const = default;
  };
  struct Hop {
    End from, to;
    QString label;  // what carries it ("SHM", "SOCKET") or who it is ("rank 3")
  };
  QString title;  // "channel 0's ring on agent 0"
  std::vector<Hop> hops;
  QString why_empty;  // when there are no hops: why
};

// Channel `channel`'s ring through the node of the run's agent `agent`.
DevicePath ring_path(const RunState& run, int agent, int channel);
// Tree `tree` of all_reduce on that node: parent to child.
DevicePath tree_path(const RunState& run, int agent, int tree);

}  // namespace ringmaster::ui

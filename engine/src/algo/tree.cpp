#include "algo/tree.h"

#include <algorithm>

#include "base/bytes.h"
#include "kernels/reduce.h"
#include "ringmaster/topology_search.h"

namespace ringmaster::algo {
namespace {

// A half's pieces: element ranges of at most `piece_elems`.
struct Half {
  std::size_t begin = 0, count = 0;
  std::size_t piece_elems = 0;
  std::size_t pieces() const { return count == 0 ? 1 : (count + piece_elems - 1) / piece_elems; }
  std::size_t piece_begin(std::size_t k) const { return begin + std::min(count, k * piece_elems); }
  std::size_t piece_size(std::size_t k) const {
    const std::size_t b = std::min(count, k * piece_elems);
    return std::min(count, b + piece_elems) - b;
  }
};

std::array<Half, 2> halves(const RingOp& op, std::size_t count) {
  const std::size_t es = size_of(op.type);
  const std::size_t h = count / 2;
  std::array<Half, 2> out{Half{0, h, 0}, Half{h, count - h, 0}};
  for (auto& half : out) {
    half.piece_elems =
        op.slot_bytes == 0 ? std::max<std::size_t>(half.count, 1) : std::max<std::size_t>(op.slot_bytes / es, 1);
  }
  return out;
}

transport::StepHeader header(const RingOp& op, std::size_t piece, int tree, int phase) {
  return step_header(
      op, std::uint64_t{piece} * 8 + static_cast<std::uint64_t>(tree) * 4 + static_cast<std::uint64_t>(phase));
}

enum Phase { kUp = 0, kDown = 1, kHandOff = 2 };

void send_to(RingContext& ctx, const transport::StepHeader& h, int peer, const std::byte* data, std::size_t bytes) {
  ctx.link.exchange_mesh(h, peer, data, bytes, h, -1, nullptr, 0);
}

void recv_from(RingContext& ctx, const transport::StepHeader& h, int peer, std::byte* data, std::size_t bytes) {
  ctx.link.exchange_mesh(h, -1, nullptr, 0, h, peer, data, bytes);
}

// Reduce piece k of tree t into acc (which holds this rank's input) from
// the children, then pass it to the parent.
void up(RingContext& ctx, const DoubleTree& tree, const RingOp& op, int t, std::size_t k, std::byte* acc,
        std::size_t elems) {
  const std::size_t es = size_of(op.type);
  const std::size_t bytes = elems * es;
  const auto h = header(op, k, t, kUp);
  for (int child : tree.children[static_cast<std::size_t>(t)]) {
    std::byte* tmp = scratch_of(ctx, bytes, acc);
    // Reduced as it arrives, from the FIFO itself over shared memory.
    ctx.link.recv_mesh_reading(h, child, tmp, bytes, es, acc,
                               [&](std::size_t offset, const std::byte* data, std::size_t length) {
                                 kernels::reduce(acc + offset, acc + offset, data, length / es, op.type, op.op);
                               });
  }
  const int parent = tree.parent[static_cast<std::size_t>(t)];
  if (parent >= 0) send_to(ctx, h, parent, acc, bytes);
}

// Receive piece k of tree t from the parent (unless at the root) and pass
// it to the children.
void down(RingContext& ctx, const DoubleTree& tree, const RingOp& op, int t, std::size_t k, std::byte* data,
          std::size_t bytes) {
  const auto h = header(op, k, t, kDown);
  const int parent = tree.parent[static_cast<std::size_t>(t)];
  if (parent >= 0) recv_from(ctx, h, parent, data, bytes);
  for (int child : tree.children[static_cast<std::size_t>(t)])
    send_to(ctx, h, child, data, bytes);
}

}  // namespace

DoubleTree build_double_tree(int rank, const std::vector<int>& node_of, int first) {
  const int n = static_cast<int>(node_of.size());
  if (first < 0) first = 0;
  // Nodes in order of first appearance, starting from `first`'s node; the
  // ranks of each node in rank order starting from `first` on its node.
  std::vector<int> nodes;
  std::vector<std::vector<int>> members;
  for (int i = 0; i < n; ++i) {
    const int r = (first + i) % n;
    const int id = node_of[static_cast<std::size_t>(r)];
    auto it = std::find(nodes.begin(), nodes.end(), id);
    if (it == nodes.end()) {
      nodes.push_back(id);
      members.emplace_back();
      it = nodes.end() - 1;
    }
    members[static_cast<std::size_t>(it - nodes.begin())].push_back(r);
  }
  for (std::size_t i = 0; i < members.size(); ++i) {
    auto& m = members[i];
    // Rank order within a node, rotated so the chain starts at `first` on its node.
    std::sort(m.begin(), m.end());
    if (i == 0) std::rotate(m.begin(), std::find(m.begin(), m.end(), first), m.end());
  }
  DoubleTree out;
  const int nnodes = static_cast<int>(nodes.size());
  for (const auto& m : members)
    out.depth_intra = std::max(out.depth_intra, static_cast<int>(m.size()) - 1);
  for (int t = 0; t < 2; ++t) {
    const auto node_parent = topo::binary_tree_parents(nnodes, t);
    int deepest = 0;
    for (int v = 0; v < nnodes; ++v) {
      int depth = 0;
      for (int at = v; node_parent[static_cast<std::size_t>(at)] >= 0; at = node_parent[static_cast<std::size_t>(at)])
        ++depth;
      deepest = std::max(deepest, depth);
      if (node_parent[static_cast<std::size_t>(v)] < 0) out.root[static_cast<std::size_t>(t)] = members[v].front();
    }
    out.depth_inter = std::max(out.depth_inter, deepest);
    auto& parent = out.parent[static_cast<std::size_t>(t)];
    auto& children = out.children[static_cast<std::size_t>(t)];
    for (int v = 0; v < nnodes; ++v) {
      const auto& m = members[static_cast<std::size_t>(v)];
      // The chain: each rank's parent is the one before it; the head's is
      // the head of the parent node.
      for (std::size_t i = 0; i < m.size(); ++i) {
        int up = -1;
        if (i > 0) {
          up = m[i - 1];
        } else if (node_parent[static_cast<std::size_t>(v)] >= 0) {
          up = members[static_cast<std::size_t>(node_parent[static_cast<std::size_t>(v)])].front();
        }
        if (m[i] == rank) parent = up;
        if (up == rank) children.push_back(m[i]);
      }
    }
  }
  return out;
}

void tree_all_reduce(RingContext& ctx, const DoubleTree& tree, const RingOp& op, const std::byte* send, std::byte* recv,
                     std::size_t count) {
  const std::size_t es = size_of(op.type);
  if (ctx.nranks == 1) {
    copy_bytes(recv, send, count * es);
    return;
  }
  const auto half = halves(op, count);
  const std::size_t pieces = std::max(half[0].pieces(), half[1].pieces());
  auto up_piece = [&](int t, std::size_t k) {
    const Half& h = half[static_cast<std::size_t>(t)];
    if (k >= h.pieces()) return;
    const std::size_t b = h.piece_begin(k), elems = h.piece_size(k);
    copy_bytes(recv + b * es, send + b * es, elems * es);
    up(ctx, tree, op, t, k, recv + b * es, elems);
  };
  auto down_piece = [&](int t, std::size_t k) {
    const Half& h = half[static_cast<std::size_t>(t)];
    if (k >= h.pieces()) return;
    down(ctx, tree, op, t, k, recv + h.piece_begin(k) * es, h.piece_size(k) * es);
  };
  // Up piece k of both trees, then down piece k-1: every rank in the same
  // order, and the broadcast of a piece overlaps the reduction of the next.
  for (std::size_t k = 0; k <= pieces; ++k) {
    if (k < pieces) {
      up_piece(0, k);
      up_piece(1, k);
    }
    if (k > 0) {
      down_piece(0, k - 1);
      down_piece(1, k - 1);
    }
  }
}

namespace {

// Piece k of tree 0, then of tree 1, for every k: each(t, k, data, elems).
template <class Each>
void each_piece(const RingOp& op, std::byte* buf, std::size_t count, const Each& each) {
  const std::size_t es = size_of(op.type);
  const auto half = halves(op, count);
  const std::size_t pieces = std::max(half[0].pieces(), half[1].pieces());
  for (std::size_t k = 0; k < pieces; ++k) {
    for (int t = 0; t < 2; ++t) {
      const Half& h = half[static_cast<std::size_t>(t)];
      if (k < h.pieces()) each(t, k, buf + h.piece_begin(k) * es, h.piece_size(k));
    }
  }
}

}  // namespace

void tree_broadcast(RingContext& ctx, const DoubleTree& tree, const RingOp& op, std::byte* buf, std::size_t count) {
  if (ctx.nranks == 1) return;
  const std::size_t es = size_of(op.type);
  each_piece(op, buf, count, [&](int t, std::size_t k, std::byte* data, std::size_t elems) {
    // A tree rooted elsewhere first gets the piece from the root.
    const int top = tree.root[static_cast<std::size_t>(t)];
    if (top != op.root) {
      const auto h = header(op, k, t, kHandOff);
      if (ctx.rank == op.root) send_to(ctx, h, top, data, elems * es);
      if (ctx.rank == top) recv_from(ctx, h, op.root, data, elems * es);
    }
    down(ctx, tree, op, t, k, data, elems * es);
  });
}

void tree_reduce(RingContext& ctx, const DoubleTree& tree, const RingOp& op, std::byte* buf, std::size_t count) {
  if (ctx.nranks == 1) return;
  const std::size_t es = size_of(op.type);
  each_piece(op, buf, count, [&](int t, std::size_t k, std::byte* data, std::size_t elems) {
    up(ctx, tree, op, t, k, data, elems);
    // A tree rooted elsewhere hands its result to the root.
    const int top = tree.root[static_cast<std::size_t>(t)];
    if (top != op.root) {
      const auto h = header(op, k, t, kHandOff);
      if (ctx.rank == top) send_to(ctx, h, op.root, data, elems * es);
      if (ctx.rank == op.root) recv_from(ctx, h, top, data, elems * es);
    }
  });
}

}  // namespace ringmaster::algo

// Tree all_reduce: up both trees and down again, piece by piece.
#include "algo/ring.h"
#include "algo/tree.h"
#include "algo/tree_pieces.h"
#include "base/bytes.h"

namespace ringmaster::algo {

void tree_all_reduce(Context& ctx, const DoubleTree& tree, const Task& task, const std::byte* send, std::byte* recv,
                     std::size_t count) {
  const std::size_t es = size_of(task.type);
  if (ctx.nranks == 1) {
    copy_bytes(recv, send, count * es);
    return;
  }
  const auto half = halves(task, count);
  const std::size_t pieces = std::max(half[0].pieces(), half[1].pieces());
  auto up_piece = [&](int t, std::size_t k) {
    const Half& h = half[static_cast<std::size_t>(t)];
    if (k >= h.pieces()) return;
    const std::size_t b = h.piece_begin(k), elems = h.piece_size(k);
    copy_bytes(recv + b * es, send + b * es, elems * es);
    up(ctx, tree, task, t, k, recv + b * es, elems);
  };
  auto down_piece = [&](int t, std::size_t k) {
    const Half& h = half[static_cast<std::size_t>(t)];
    if (k >= h.pieces()) return;
    down(ctx, tree, task, t, k, recv + h.piece_begin(k) * es, h.piece_size(k) * es);
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

}  // namespace ringmaster::algo

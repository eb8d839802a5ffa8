// Tree reduce: up both trees to the root, piece by piece.
#include "algo/ring.h"
#include "algo/tree.h"
#include "algo/tree_pieces.h"
#include "base/bytes.h"

namespace ringmaster::algo {

void tree_reduce(Context& ctx, const DoubleTree& tree, const Task& task, std::byte* buf, std::size_t count) {
  if (ctx.nranks == 1) return;
  const std::size_t es = size_of(task.type);
  close_ring_start(ctx, task, ctx.position_of(task.root));
  each_piece(task, buf, count, [&](int t, std::size_t k, std::byte* data, std::size_t elems) {
    up(ctx, tree, task, t, k, data, elems);
    // A tree rooted elsewhere hands its result to the root.
    const int top = tree.root[static_cast<std::size_t>(t)];
    if (top != task.root) {
      const auto h = tree_header(task, k, t, kHandOff);
      if (ctx.rank == top) send_to(ctx, h, task.root, data, elems * es);
      if (ctx.rank == task.root) recv_from(ctx, h, top, data, elems * es);
    }
  });
  close_ring_end(ctx, task, ctx.position_of(task.root));
}

}  // namespace ringmaster::algo

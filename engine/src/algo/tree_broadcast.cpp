// Tree broadcast: down both trees from the root, piece by piece.
#include "algo/ring.h"
#include "algo/tree.h"
#include "algo/tree_pieces.h"
#include "base/bytes.h"

namespace ringmaster::algo {

void tree_broadcast(Context& ctx, const DoubleTree& tree, const Task& task, std::byte* buf, std::size_t count) {
  if (ctx.nranks == 1) return;
  const std::size_t es = size_of(task.type);
  const int before_root = mod(ctx.position_of(task.root) - 1, ctx.nranks);  // a ring position
  close_ring_start(ctx, task, before_root);
  each_piece(task, buf, count, [&](int t, std::size_t k, std::byte* data, std::size_t elems) {
    // A tree rooted elsewhere first gets the piece from the root.
    const int top = tree.root[static_cast<std::size_t>(t)];
    if (top != task.root) {
      const auto h = tree_header(task, k, t, kHandOff);
      if (ctx.rank == task.root) send_to(ctx, h, top, data, elems * es);
      if (ctx.rank == top) recv_from(ctx, h, task.root, data, elems * es);
    }
    down(ctx, tree, task, t, k, data, elems * es);
  });
  close_ring_end(ctx, task, before_root);
}

}  // namespace ringmaster::algo

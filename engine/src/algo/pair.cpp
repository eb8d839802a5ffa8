#include "algo/pair.h"
#include "core/bytes.h"

#include <algorithm>
#include <cstring>

#include "kernels/reduce.h"

namespace ringmaster::algo {

void pair_all_reduce(RingContext& ctx, const RingOp& op, const std::byte* send, std::byte* recv, std::size_t count) {
  const std::size_t bytes = count * size_of(op.type);
  ctx.scratch.resize(std::max<std::size_t>(2 * bytes + kApartSlack, 1));
  std::byte* both = ctx.scratch.data() + offset_apart(ctx.scratch.data(), recv);
  std::byte* mine = both + static_cast<std::size_t>(ctx.rank) * bytes;
  std::byte* theirs = both + static_cast<std::size_t>(1 - ctx.rank) * bytes;
  copy_bytes(mine, send, bytes);  // send may be recv: keep our input apart
  ctx.link.exchange(step_header(op, 0), mine, bytes, theirs, bytes);
  // Rank 0's input first on both ranks: the same order, the same bits.
  kernels::reduce(recv, both, both + bytes, count, op.type, op.op);
  if (op.op == RedOp::avg) kernels::finish_avg(recv, count, op.type, 2);
}

}  // namespace ringmaster::algo

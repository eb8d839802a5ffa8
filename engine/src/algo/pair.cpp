#include "algo/pair.h"
#include "base/bytes.h"

#include <algorithm>
#include <cstring>

#include "kernels/reduce.h"

namespace ringmaster::algo {

void pair_all_reduce(RingContext& ctx, const RingOp& op, const std::byte* send, std::byte* recv, std::size_t count) {
  const std::size_t es = size_of(op.type);
  const std::size_t bytes = count * es;
  if (send != recv) {
    // Out of place: send the input as it is and reduce the peer's bytes
    // as they arrive (in place where the connection lends them), rank 0's
    // input first on both ranks: the same order, the same bits.
    std::byte* tmp = scratch_of(ctx, bytes, recv);
    ctx.link.exchange_reading(step_header(op, 0), send, bytes, tmp, bytes, op.slot_bytes, es, recv,
                              [&](std::size_t offset, const std::byte* theirs, std::size_t length) {
                                const std::byte* mine = send + offset;
                                if (ctx.rank == 0) {
                                  kernels::reduce(recv + offset, mine, theirs, length / es, op.type, op.op);
                                } else {
                                  kernels::reduce(recv + offset, theirs, mine, length / es, op.type, op.op);
                                }
                              });
  } else {
    // In place the reduction would overwrite what is still to be sent.
    ctx.scratch.resize(std::max<std::size_t>(2 * bytes + kApartSlack, 1));
    std::byte* both = ctx.scratch.data() + offset_apart(ctx.scratch.data(), recv);
    std::byte* mine = both + static_cast<std::size_t>(ctx.rank) * bytes;
    std::byte* theirs = both + static_cast<std::size_t>(1 - ctx.rank) * bytes;
    copy_bytes(mine, send, bytes);
    ctx.link.exchange(step_header(op, 0), mine, bytes, theirs, bytes);
    kernels::reduce(recv, both, both + bytes, count, op.type, op.op);
  }
  if (op.op == RedOp::avg) kernels::finish_avg(recv, count, op.type, 2);
}

}  // namespace ringmaster::algo

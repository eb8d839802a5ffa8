#include "algo/pair.h"
#include "base/bytes.h"

#include <algorithm>
#include <cstring>

#include "kernels/reduce.h"

namespace ringmaster::algo {

void pair_all_reduce(Context& ctx, const Task& task, const std::byte* send, std::byte* recv, std::size_t count) {
  const std::size_t es = size_of(task.type);
  const std::size_t bytes = count * es;
  // A floating avg scales this rank's input by 1/2 first (kernels/reduce.h):
  // into the scratch copy the in-place path makes anyway.
  const bool scale = task.op == RedOp::avg && kernels::avg_premultiplies(task.type);
  if (send != recv && !scale) {
    // Out of place: send the input as it is and reduce the peer's bytes
    // as they arrive (in place where the connection lends them), rank 0's
    // input first on both ranks: the same order, the same bits.
    std::byte* tmp = scratch_of(ctx, bytes, recv);
    ctx.link.exchange_reading(step_header(task, 0), send, bytes, tmp, bytes, task.slot_bytes, es, recv,
                              [&](std::size_t offset, const std::byte* theirs, std::size_t length) {
                                const std::byte* mine = send + offset;
                                if (ctx.rank == 0) {
                                  kernels::reduce(recv + offset, mine, theirs, length / es, task.type, task.op);
                                } else {
                                  kernels::reduce(recv + offset, theirs, mine, length / es, task.type, task.op);
                                }
                              });
  } else {
    // In place the reduction would overwrite what is still to be sent.
    ctx.scratch.resize(std::max<std::size_t>(2 * bytes + kApartSlack, 1));
    std::byte* both = ctx.scratch.data() + offset_apart(ctx.scratch.data(), recv);
    std::byte* mine = both + static_cast<std::size_t>(ctx.rank) * bytes;
    std::byte* theirs = both + static_cast<std::size_t>(1 - ctx.rank) * bytes;
    if (scale) {
      kernels::premultiply_avg(mine, send, count, task.type, 2);
    } else {
      copy_bytes(mine, send, bytes);
    }
    ctx.link.exchange(step_header(task, 0), mine, bytes, theirs, bytes);
    kernels::reduce(recv, both, both + bytes, count, task.type, task.op);
  }
  if (task.op == RedOp::avg && !scale) kernels::finish_avg(recv, count, task.type, 2);
}

}  // namespace ringmaster::algo

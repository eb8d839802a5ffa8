// Ring reduce: the chain root+1 -> ... -> root, pipelined by pieces.
#include "algo/ring.h"
#include "algo/ring_steps.h"
#include "base/bytes.h"
#include "kernels/reduce.h"

namespace ringmaster::algo {

void reduce(Context& ctx, const Task& task, std::byte* buf, std::size_t count) {
  const int n = ctx.nranks;
  const int root = ctx.position_of(task.root);
  close_ring_start(ctx, task, root);
  const int position = mod(ctx.position() - root - 1, n);  // chain root+1 -> ... -> root (n-1)
  const std::size_t es = size_of(task.type);
  const std::size_t bytes = count * es;
  const std::size_t piece = task.slot_bytes == 0 ? std::max<std::size_t>(bytes, 1) : task.slot_bytes;
  std::uint64_t step = 0;
  for (std::size_t offset = 0; offset < bytes || step == 0; offset += piece, ++step) {
    const std::size_t length = std::min(piece, bytes - offset);
    std::byte* p = buf + offset;
    if (position > 0) {
      std::byte* tmp = scratch_of(ctx, length, p);
      ctx.link.recv_only(step_header(task, step), tmp, length);
      kernels::reduce(p, p, tmp, length / es, task.type, task.op);
    }
    if (position < n - 1) ctx.link.send_only(step_header(task, step), p, length);
    if (bytes == 0) break;
  }
  close_ring_end(ctx, task, root);
}

}  // namespace ringmaster::algo

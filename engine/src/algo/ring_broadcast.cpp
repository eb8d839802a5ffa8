// Ring broadcast: the chain root -> root+1 -> ..., pipelined by pieces.
#include "algo/ring.h"
#include "algo/ring_steps.h"
#include "base/bytes.h"

namespace ringmaster::algo {

void broadcast(Context& ctx, const Task& task, std::byte* buf, std::size_t count) {
  const int n = ctx.nranks;
  const int before_root = mod(ctx.position_of(task.root) - 1, n);  // a position
  close_ring_start(ctx, task, before_root);
  const int position = mod(ctx.position() - ctx.position_of(task.root), n);  // 0 = root, n-1 = end of the chain
  const std::size_t bytes = count * size_of(task.type);
  const std::size_t piece = task.slot_bytes == 0 ? std::max<std::size_t>(bytes, 1) : task.slot_bytes;
  // The chain root -> root+1 -> ... is pipelined by pieces: a rank forwards
  // piece k while its predecessor already sends piece k+1.
  std::uint64_t step = 0;
  for (std::size_t offset = 0; offset < bytes || step == 0; offset += piece, ++step) {
    const std::size_t length = std::min(piece, bytes - offset);
    std::byte* p = buf + offset;
    if (position > 0) ctx.link.recv_only(step_header(task, step), p, length);
    if (position < n - 1) ctx.link.send_only(step_header(task, step), p, length);
    if (bytes == 0) break;
  }
  close_ring_end(ctx, task, before_root);
}

}  // namespace ringmaster::algo

// Ring reduce_scatter: n-1 steps of partial sums, read from the input where it is.
#include "algo/ring.h"
#include "algo/ring_steps.h"
#include "base/bytes.h"
#include "kernels/reduce.h"

namespace ringmaster::algo {

void reduce_scatter(Context& ctx, const Task& task, const std::byte* send, std::size_t stride, std::byte* recv,
                    std::size_t count) {
  const int n = ctx.nranks, r = ctx.position();
  auto block = [&](int position) { return static_cast<std::size_t>(ctx.rank_at(mod(position, n))); };
  const std::size_t es = size_of(task.type);
  const std::size_t bytes = count * es;
  if (n == 1) {
    if (send != recv) copy_bytes(recv, send, bytes);
    return;
  }
  // Positions on the ring: step s sends the partial sums of the block of
  // the rank at r-s-1 (at step 0 this rank's own input of it), receives
  // those of the rank at r-s-2 and adds this rank's input of it. A partial
  // sum is received at one step and sent at the next: two buffers take
  // turns, and the last step, this rank's block, adds into recv.
  const std::size_t area = bytes + kApartSlack;
  if (ctx.scratch.size() < 3 * area) ctx.scratch.resize(3 * area);
  std::byte* const base = ctx.scratch.data();
  std::byte* const partial[2] = {base + area, base + 2 * area};
  const std::byte* outgoing = send + block(r - 1) * stride;
  for (int s = 0; s < n - 1; ++s) {
    const std::byte* mine = send + block(r - s - 2) * stride;
    std::byte* dst = s == n - 2 ? recv : partial[s % 2];
    std::byte* tmp = base + offset_apart(base, dst);
    ctx.link.exchange_reading(step_header(task, static_cast<std::uint64_t>(s)), outgoing, bytes, tmp, bytes,
                              task.slot_bytes, es, dst,
                              [&](std::size_t offset, const std::byte* data, std::size_t length) {
                                kernels::reduce(dst + offset, mine + offset, data, length / es, task.type, task.op);
                              });
    outgoing = dst;
  }
}

}  // namespace ringmaster::algo

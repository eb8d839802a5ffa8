// Ring all_gather: n-1 steps, each forwarding the block received last.
#include "algo/ring.h"
#include "algo/ring_steps.h"
#include "base/bytes.h"

namespace ringmaster::algo {

void all_gather(Context& ctx, const Task& task, std::byte* out, std::size_t count, std::size_t stride) {
  const int n = ctx.nranks, p = ctx.position();
  const std::size_t bytes = count * size_of(task.type);
  // Step s: forward the block of the rank s positions back (ours first),
  // receive the block of the rank s+1 positions back.
  for (int s = 0; s < n - 1; ++s) {
    const auto send_block = static_cast<std::size_t>(ctx.rank_at(mod(p - s, n)));
    const auto recv_block = static_cast<std::size_t>(ctx.rank_at(mod(p - s - 1, n)));
    ctx.link.exchange(step_header(task, s), out + send_block * stride, bytes, out + recv_block * stride, bytes);
  }
}

}  // namespace ringmaster::algo

// Ring all_reduce: a reduce-scatter, then an all-gather, 2(n-1) steps.
#include "algo/ring.h"
#include "algo/ring_steps.h"
#include "base/bytes.h"

namespace ringmaster::algo {

void all_reduce(Context& ctx, const Task& task, const std::byte* send, std::byte* recv, std::size_t count) {
  // Chunks are numbered by ring position: every rank reduces and gathers
  // them in the same order whatever the ring's order of ranks.
  const int n = ctx.nranks, r = ctx.position();
  const std::size_t es = size_of(task.type);
  if (n == 1) {
    if (send != recv) copy_bytes(recv, send, count * es);
    return;
  }
  // Reduce-scatter: at step s send chunk r-s, receive chunk r-s-1 and
  // reduce it with our input into recv. Each chunk is reduced exactly once
  // here, always from `send`, so out of place needs no copy first; chunk r
  // goes out straight from `send` and comes back in the all-gather. After
  // n-1 steps recv holds the full sum of chunk r+1.
  for (int s = 0; s < n - 1; ++s) {
    const Chunk out = chunk(count, n, mod(r - s, n));
    const Chunk in = chunk(count, n, mod(r - s - 1, n));
    const std::byte* from = (s == 0 ? send : recv) + out.begin * es;
    reduce_step(ctx, task, s, from, out.size() * es, send + in.begin * es, recv + in.begin * es, in.size() * es);
  }
  // All-gather: at step s send chunk r+1-s (complete), receive chunk r-s.
  for (int s = 0; s < n - 1; ++s) {
    const Chunk out = chunk(count, n, mod(r + 1 - s, n));
    const Chunk in = chunk(count, n, mod(r - s, n));
    ctx.link.exchange(step_header(task, n - 1 + s), recv + out.begin * es, out.size() * es, recv + in.begin * es,
                      in.size() * es);
  }
}

}  // namespace ringmaster::algo

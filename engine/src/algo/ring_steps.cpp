#include <cstring>

#include "algo/ring_steps.h"
#include "kernels/reduce.h"

namespace ringmaster::algo {

void reduce_step(Context& ctx, const Task& task, std::uint64_t step, const std::byte* send, std::size_t send_bytes,
                 const std::byte* src, std::byte* dst, std::size_t bytes) {
  std::byte* tmp = scratch_of(ctx, bytes, dst);
  const std::size_t es = size_of(task.type);
  ctx.link.exchange_reading(step_header(task, step), send, send_bytes, tmp, bytes, task.slot_bytes, es, dst,
                            [&](std::size_t offset, const std::byte* data, std::size_t length) {
                              kernels::reduce(dst + offset, src + offset, data, length / es, task.type, task.op);
                            });
}

}  // namespace ringmaster::algo

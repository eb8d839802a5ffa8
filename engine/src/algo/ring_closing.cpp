// The closing step of rooted collectives (algo/ring.h, close_ring_start).
#include "algo/ring.h"
#include "algo/ring_steps.h"
#include "base/bytes.h"

namespace ringmaster::algo {

namespace {
constexpr std::uint64_t kClosingStep = 0xFFFF;  // a step number no data step of these calls sends on that connection
}  // namespace

void close_ring_start(Context& ctx, const Task& task, int sender) {
  if (ctx.nranks > 1 && ctx.position() == sender) ctx.link.send_only(step_header(task, kClosingStep), nullptr, 0);
}

void close_ring_end(Context& ctx, const Task& task, int sender) {
  if (ctx.nranks > 1 && ctx.position() == mod(sender + 1, ctx.nranks)) {
    ctx.link.recv_only(step_header(task, kClosingStep), nullptr, 0);
  }
}

}  // namespace ringmaster::algo

// Point-to-point transfers over direct connections (algo/direct.h).
#include "algo/direct.h"

namespace ringmaster::algo {

void point_to_point(Context& ctx, const Task& task, const PointToPoint& p2p, const void* send, void* recv) {
  const std::size_t bytes = task.count * size_of(task.type);
  transport::StepHeader out, in;
  out.collective = in.collective = static_cast<std::uint8_t>(Collective::send_recv);
  out.protocol = in.protocol = static_cast<std::uint8_t>(task.protocol);
  out.type = in.type = static_cast<std::uint8_t>(task.type);
  out.count = in.count = task.count;
  out.seq = p2p.sent_seq;
  in.seq = p2p.received_seq;
  ctx.link.exchange_mesh(out, p2p.to, send, bytes, in, p2p.from, recv, bytes);
}

}  // namespace ringmaster::algo

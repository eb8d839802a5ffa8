#include "algo/tree_pieces.h"

#include <algorithm>

#include "base/bytes.h"
#include "kernels/reduce.h"

namespace ringmaster::algo {

std::array<Half, 2> halves(const Task& task, std::size_t count) {
  const std::size_t es = size_of(task.type);
  const std::size_t h = count / 2;
  std::array<Half, 2> out{Half{0, h, 0}, Half{h, count - h, 0}};
  for (auto& half : out) {
    half.piece_elems =
        task.slot_bytes == 0 ? std::max<std::size_t>(half.count, 1) : std::max<std::size_t>(task.slot_bytes / es, 1);
  }
  return out;
}

transport::StepHeader tree_header(const Task& task, std::size_t piece, int tree, int phase) {
  return step_header(
      task, std::uint64_t{piece} * 8 + static_cast<std::uint64_t>(tree) * 4 + static_cast<std::uint64_t>(phase));
}

void send_to(Context& ctx, const transport::StepHeader& h, int peer, const std::byte* data, std::size_t bytes) {
  ctx.link.exchange_mesh(h, peer, data, bytes, h, -1, nullptr, 0);
}

void recv_from(Context& ctx, const transport::StepHeader& h, int peer, std::byte* data, std::size_t bytes) {
  ctx.link.exchange_mesh(h, -1, nullptr, 0, h, peer, data, bytes);
}

void up(Context& ctx, const DoubleTree& tree, const Task& task, int t, std::size_t k, std::byte* acc,
        std::size_t elems) {
  const std::size_t es = size_of(task.type);
  const std::size_t bytes = elems * es;
  const auto h = tree_header(task, k, t, kUp);
  for (int child : tree.children[static_cast<std::size_t>(t)]) {
    std::byte* tmp = scratch_of(ctx, bytes, acc);
    // Reduced as it arrives, from the FIFO itself over shared memory.
    ctx.link.recv_mesh_reading(h, child, tmp, bytes, es, acc,
                               [&](std::size_t offset, const std::byte* data, std::size_t length) {
                                 kernels::reduce(acc + offset, acc + offset, data, length / es, task.type, task.op);
                               });
  }
  const int parent = tree.parent[static_cast<std::size_t>(t)];
  if (parent >= 0) send_to(ctx, h, parent, acc, bytes);
}

void down(Context& ctx, const DoubleTree& tree, const Task& task, int t, std::size_t k, std::byte* data,
          std::size_t bytes) {
  const auto h = tree_header(task, k, t, kDown);
  const int parent = tree.parent[static_cast<std::size_t>(t)];
  if (parent >= 0) recv_from(ctx, h, parent, data, bytes);
  for (int child : tree.children[static_cast<std::size_t>(t)])
    send_to(ctx, h, child, data, bytes);
}

}  // namespace ringmaster::algo

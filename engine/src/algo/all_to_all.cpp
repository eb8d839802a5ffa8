// Pairwise all_to_all over direct connections (algo/direct.h).
#include "algo/direct.h"
#include "base/bytes.h"

namespace ringmaster::algo {

void all_to_all(Context& ctx, const Task& task, const std::byte* send, std::byte* recv, std::size_t block) {
  const int n = ctx.nranks, r = ctx.rank;
  copy_bytes(recv + static_cast<std::size_t>(r) * block, send + static_cast<std::size_t>(r) * block, block);
  if (n == 1) return;
  std::byte none{};
  ctx.link.exchange(step_header(task, 0), &none, 0, &none, 0);
  for (int s = 1; s < n; ++s) {
    const int to = mod(r + s, n), from = mod(r - s, n);
    const transport::StepHeader h = step_header(task, static_cast<std::uint64_t>(s));
    ctx.link.exchange_mesh(h, to, send + static_cast<std::size_t>(to) * block, block, h, from,
                           recv + static_cast<std::size_t>(from) * block, block);
  }
}

namespace {

// Gather (to_root) or scatter: the root's blocks are its buffer `blocks`,
// the other ranks' one block is `own`.
void rooted(Context& ctx, const Task& task, std::byte* blocks, std::byte* own, std::size_t block, int root,
            bool to_root) {
  const int n = ctx.nranks, r = ctx.rank;
  std::byte* mine = blocks + static_cast<std::size_t>(r) * block;
  if (r == root && mine != own) {
    if (to_root) {
      copy_bytes(mine, own, block);
    } else {
      copy_bytes(own, mine, block);
    }
  }
  if (n == 1) return;
  std::byte none{};
  ctx.link.exchange(step_header(task, 0), &none, 0, &none, 0);
  if (r == root) {
    for (int s = 1; s < n; ++s) {
      const int peer = mod(root + s, n);
      const transport::StepHeader h = step_header(task, static_cast<std::uint64_t>(s));
      std::byte* at = blocks + static_cast<std::size_t>(peer) * block;
      if (to_root) {
        ctx.link.exchange_mesh(h, -1, nullptr, 0, h, peer, at, block);
      } else {
        ctx.link.exchange_mesh(h, peer, at, block, h, -1, nullptr, 0);
      }
    }
  } else {
    const transport::StepHeader h = step_header(task, static_cast<std::uint64_t>(mod(r - root, n)));
    if (to_root) {
      ctx.link.exchange_mesh(h, root, own, block, h, -1, nullptr, 0);
    } else {
      ctx.link.exchange_mesh(h, -1, nullptr, 0, h, root, own, block);
    }
  }
}

}  // namespace

void gather(Context& ctx, const Task& task, const std::byte* send, std::byte* recv, std::size_t block, int root) {
  rooted(ctx, task, recv, const_cast<std::byte*>(send), block, root, true);
}

void scatter(Context& ctx, const Task& task, const std::byte* send, std::byte* recv, std::size_t block, int root) {
  rooted(ctx, task, const_cast<std::byte*>(send), recv, block, root, false);
}

}  // namespace ringmaster::algo

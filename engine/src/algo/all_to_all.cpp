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

}  // namespace ringmaster::algo

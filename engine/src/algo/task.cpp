#include "algo/task.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "base/bytes.h"
#include "ringmaster/status.h"

namespace ringmaster::algo {

RingOrder RingOrder::identity(int nranks) {
  std::vector<int> ranks(static_cast<std::size_t>(nranks));
  for (int r = 0; r < nranks; ++r)
    ranks[static_cast<std::size_t>(r)] = r;
  return of(std::move(ranks));
}

RingOrder RingOrder::of(std::vector<int> ranks) {
  RingOrder o;
  const int n = static_cast<int>(ranks.size());
  o.position_of.assign(ranks.size(), -1);
  for (int p = 0; p < n; ++p) {
    const int r = ranks[static_cast<std::size_t>(p)];
    if (r < 0 || r >= n || o.position_of[static_cast<std::size_t>(r)] >= 0) {
      throw Error(ErrorCategory::internal,
                  fmt::format("ring order {} is not a permutation of the ranks", fmt::join(ranks, " ")));
    }
    o.position_of[static_cast<std::size_t>(r)] = p;
  }
  o.rank_at = std::move(ranks);
  return o;
}

std::byte* scratch_of(Context& ctx, std::size_t bytes, const std::byte* toward) {
  if (ctx.scratch.size() < bytes + kApartSlack) ctx.scratch.resize(bytes + kApartSlack);
  return ctx.scratch.data() + offset_apart(ctx.scratch.data(), toward);
}

transport::StepHeader step_header(const Task& task, std::uint64_t step) {
  transport::StepHeader h;
  h.collective = static_cast<std::uint8_t>(task.collective);
  h.protocol = static_cast<std::uint8_t>(task.protocol);
  h.seq = task.seq;
  h.step = static_cast<std::uint16_t>(step & 0xFFFF);
  h.type = static_cast<std::uint8_t>(task.type);
  h.op = static_cast<std::uint8_t>(task.op);
  h.algorithm = static_cast<std::uint8_t>(task.algorithm);
  h.channels = static_cast<std::uint8_t>(task.channels);
  h.root = task.root;
  h.count = task.count;
  return h;
}

}  // namespace ringmaster::algo

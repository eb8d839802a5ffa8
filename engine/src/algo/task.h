// What every schedule works with: a Task (one channel's part of a call,
// with the call's signature) and the Context it runs in (the channel's
// connections, this rank, the ranks, the channel's scratch buffer). Rings,
// trees, the 2-rank exchange, all_to_all and point-to-point alike.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "ringmaster/types.h"
#include "transport/link.h"

namespace ringmaster::algo {

struct Task {
  Collective collective = Collective::all_reduce;
  std::uint64_t seq = 0;
  DataType type = DataType::fp32;
  RedOp op = RedOp::sum;
  int root = 0;
  std::size_t slot_bytes = 0;            // Simple: BUFFSIZE/8; LL: 0 (whole step)
  Protocol protocol = Protocol::simple;  // how the bytes are laid out (shared memory)
  Algorithm algorithm = Algorithm::ring;
  std::uint64_t count = 0;  // the call's count, for its signature (StepHeader)
  int channels = 1;         // the call's parts, for its signature
};

// The order of a channel's ring: rank order, or the topology search's
// (ranks leave and enter a node by the GPUs nearest its NIC). Ring
// schedules work in positions; whose block a position holds is rank_at.
struct RingOrder {
  std::vector<int> rank_at;      // per position: the rank there
  std::vector<int> position_of;  // per rank: its position
  static RingOrder identity(int nranks);
  // From the ranks in ring order; throws Error(internal) unless it is a
  // permutation of 0..n-1.
  static RingOrder of(std::vector<int> ranks);
};

struct Context {
  transport::ChannelLink& link;
  int rank;  // this rank; trees and direct connections work in ranks
  int nranks;
  std::vector<std::byte>& scratch;
  const RingOrder* ring = nullptr;  // the channel's ring; null: rank order

  // This rank's position on the ring, and the rank at a position.
  int position() const { return ring ? ring->position_of[static_cast<std::size_t>(rank)] : rank; }
  int rank_at(int position) const { return ring ? ring->rank_at[static_cast<std::size_t>(position)] : position; }
  int position_of(int r) const { return ring ? ring->position_of[static_cast<std::size_t>(r)] : r; }
};

// The header of step `step` of `task`, with the call's signature. Steps
// count in 64 bits (a broadcast of many slots has more than 2^31); the
// header carries the low 16 bits, enough to tell consecutive steps apart.
transport::StepHeader step_header(const Task& task, std::uint64_t step);

// `bytes` of the context's scratch for a step whose bytes are reduced into
// `toward`: placed half a page from it (base/bytes.h, offset_apart), as
// the reduction reads one while writing the other.
std::byte* scratch_of(Context& ctx, std::size_t bytes, const std::byte* toward);

// a mod n in [0, n).
constexpr int mod(int a, int n) noexcept {
  return ((a % n) + n) % n;
}

}  // namespace ringmaster::algo

// Ring schedules on one channel, over a RingLink. Each works on the
// channel's share of the buffers (byte offsets already applied) and keeps
// the schedule in plain sight: which chunk goes to the next rank and which
// comes from the previous one at every step.
#pragma once

#include <cstddef>
#include <vector>

#include "ringmaster/types.h"
#include "transport/link.h"

namespace ringmaster::algo {

struct RingOp {
  Collective collective = Collective::all_reduce;
  std::uint64_t seq = 0;
  DataType type = DataType::fp32;
  RedOp op = RedOp::sum;
  int root = 0;
  std::size_t slot_bytes = 0;            // Simple: BUFFSIZE/8; LL: 0 (whole step)
  Protocol protocol = Protocol::simple;  // how the bytes are laid out (shared memory)
  Algorithm algorithm = Algorithm::ring;
};

struct RingContext {
  transport::RingLink& link;
  int rank;
  int nranks;
  std::vector<std::byte>& scratch;
};

// The header of step `step` of op: what the peer's must match.
// The header of step `step` of `op`. Steps count in 64 bits (a broadcast
// of many slots has more than 2^31); the header carries the low 16 bits,
// enough to tell consecutive steps apart.
transport::StepHeader step_header(const RingOp& op, std::uint64_t step);

// `bytes` of the context's scratch for a step whose bytes are reduced into
// `toward`: placed half a page from it (core/bytes.h, offset_apart), as
// the reduction reads one while writing the other.
std::byte* scratch_of(RingContext& ctx, std::size_t bytes, const std::byte* toward);

// recv receives the sum of every rank's send (count elements); in place
// when send == recv.
void all_reduce(RingContext& ctx, const RingOp& op, const std::byte* send, std::byte* recv, std::size_t count);
// out holds nranks blocks of `count` elements, `stride` bytes apart; this
// rank's block is filled, the others are received.
void all_gather(RingContext& ctx, const RingOp& op, std::byte* out, std::size_t count, std::size_t stride);
// work holds nranks blocks of `count` elements, `stride` bytes apart (a
// copy of the input; it is overwritten); this rank's reduced block ends in
// work at block `rank`.
void reduce_scatter(RingContext& ctx, const RingOp& op, std::byte* work, std::size_t count, std::size_t stride);
// buf: the root's data, received by everyone else; pipelined down the ring.
void broadcast(RingContext& ctx, const RingOp& op, std::byte* buf, std::size_t count);
// buf holds this rank's input; the root's buf receives the result.
void reduce(RingContext& ctx, const RingOp& op, std::byte* buf, std::size_t count);

}  // namespace ringmaster::algo

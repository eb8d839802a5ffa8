// Ring schedules on one channel, over a ChannelLink. Each works on the
// channel's share of the buffers (byte offsets already applied) and keeps
// the schedule in plain sight: which chunk goes to the next rank and which
// comes from the previous one at every step.
#pragma once

#include <cstddef>
#include <vector>

#include "algo/task.h"
#include "ringmaster/types.h"

namespace ringmaster::algo {

// Rooted collectives move data one way round: a broadcast never reads
// from the rank before its root, a reduce never writes to the rank after
// it. With roots that differ between ranks, every rank of a broadcast only
// sent (returning stale data, blamed on the next call) and every rank of
// a reduce only waited (until the timeout). A header-only step closes the
// ring: the rank at position `sender` sends it to its next rank at the
// start, which reads it at its end, so a rank that made another call is named at this one. Sent
// long before it is read, it costs no wait. Trees close the channel's
// ring the same way.
void close_ring_start(Context& ctx, const Task& task, int sender);
void close_ring_end(Context& ctx, const Task& task, int sender);

// recv receives the sum of every rank's send (count elements); in place
// when send == recv.
void all_reduce(Context& ctx, const Task& task, const std::byte* send, std::byte* recv, std::size_t count);
// out holds nranks blocks of `count` elements, `stride` bytes apart; this
// rank's block is filled, the others are received.
void all_gather(Context& ctx, const Task& task, std::byte* out, std::size_t count, std::size_t stride);
// send holds nranks blocks of `count` elements, `stride` bytes apart (read
// only); recv receives the reduction of every rank's block `rank`. The
// partial sums live in the channel's scratch for one step each, so the
// input is read where it is, once (recv may be send's block `rank`).
void reduce_scatter(Context& ctx, const Task& task, const std::byte* send, std::size_t stride, std::byte* recv,
                    std::size_t count);
// buf: the root's data, received by everyone else; pipelined down the ring.
void broadcast(Context& ctx, const Task& task, std::byte* buf, std::size_t count);
// buf holds this rank's input; the root's buf receives the result.
void reduce(Context& ctx, const Task& task, std::byte* buf, std::size_t count);

}  // namespace ringmaster::algo

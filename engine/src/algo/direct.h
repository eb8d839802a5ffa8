// Schedules over a channel's direct connections (ChannelLink::mesh): the
// pairwise all_to_all and point-to-point transfers.
#pragma once

#include <cstddef>
#include <cstdint>

#include "algo/task.h"

namespace ringmaster::algo {

// send holds nranks blocks of `block` bytes, block p for rank p; recv gets
// block q from rank q. A header-only ring step first, so a neighbour that
// called another collective is named instead of both sides waiting on
// different connections; then at step s block r+s goes to rank r+s while
// block r-s comes from rank r-s.
void all_to_all(Context& ctx, const Task& task, const std::byte* send, std::byte* recv, std::size_t block);

// The same header-only ring step, then every other rank's block straight
// to the root (gather) or from it (scatter), one step per peer: step s
// joins the root and rank root+s.
void gather(Context& ctx, const Task& task, const std::byte* send, std::byte* recv, std::size_t block, int root);
void scatter(Context& ctx, const Task& task, const std::byte* send, std::byte* recv, std::size_t block, int root);

// One point-to-point transfer: to or from is -1 when that direction is not
// used. Messages are numbered per pair and direction (sent_seq,
// received_seq), so other ranks need not take part; the header carries
// the datatype and count, so a receive of another type or count than was
// sent fails naming it.
struct PointToPoint {
  int to = -1;
  int from = -1;
  std::uint64_t sent_seq = 0;
  std::uint64_t received_seq = 0;
};
void point_to_point(Context& ctx, const Task& task, const PointToPoint& p2p, const void* send, void* recv);

}  // namespace ringmaster::algo

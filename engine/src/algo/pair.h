// all_reduce of small messages between two ranks: each sends its whole
// input to the other in one step (the ring takes two: reduce-scatter, then
// all-gather), then both reduce the two inputs in rank order, so both
// compute bitwise the same result. For a few bytes the number of steps, not
// the bytes, is the cost. It runs on the ring connection, like every other
// collective, so a rank calling something else is still caught by the step
// header.
#pragma once

#include <cstddef>
#include <vector>

#include "algo/ring.h"

namespace ringmaster::algo {

void pair_all_reduce(Context& ctx, const Task& task, const std::byte* send, std::byte* recv, std::size_t count);

}  // namespace ringmaster::algo

// How many file descriptors this process holds and may hold, and room
// made for more (and for memory locked in RAM): a rank whose connections
// would not fit under its limit fails before it opens them, with the
// count and the limit, rather than one connection at a time with "Too
// many open files" (or a registration that cannot pin its buffer) on one
// side and a refusal or silence on the other.
#pragma once

#include <cstdint>

namespace ringmaster::base {

// Descriptors open in this process now (the entries of /proc/self/fd);
// -1 when that cannot be read.
int open_descriptors();

struct LimitRoom {
  bool enough = false;
  bool raised = false;     // the soft limit was raised to make room
  std::uint64_t soft = 0;  // the limit after, UINT64_MAX for none
  std::uint64_t hard = 0;
  std::uint64_t advised = 0;  // the limit to ask for: `needed` and a margin
};

// Makes room for `needed` descriptors in all (RLIMIT_NOFILE): a soft
// limit below it is raised, as far as the hard limit allows (to
// `advised`, with a margin for what opens briefly). `enough` is false when
// even the hard limit is below `needed`.
LimitRoom make_room_for_descriptors(std::uint64_t needed);

// The same for `needed` bytes locked in RAM (RLIMIT_MEMLOCK), as an RDMA
// provider's memory registration pins them; the margin is 25%.
LimitRoom make_room_for_locked_bytes(std::uint64_t needed);

}  // namespace ringmaster::base

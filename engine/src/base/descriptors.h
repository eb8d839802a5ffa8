// How many file descriptors this process holds and may hold, and room
// made for more: a rank whose connections would not fit under its limit
// fails before it opens them, with the count and the limit, rather than
// one connection at a time with "Too many open files" on one side and a
// refusal or silence on the other.
#pragma once

#include <cstdint>

namespace ringmaster::base {

// Descriptors open in this process now (the entries of /proc/self/fd);
// -1 when that cannot be read.
int open_descriptors();

struct DescriptorRoom {
  bool enough = false;
  bool raised = false;     // the soft limit was raised to make room
  std::uint64_t soft = 0;  // RLIMIT_NOFILE after, UINT64_MAX for none
  std::uint64_t hard = 0;
  std::uint64_t advised = 0;  // the limit to ask for: `needed` and a margin for what opens briefly
};

// Makes room for `needed` descriptors in all: a soft limit below it is
// raised, as far as the hard limit allows (to `advised`). `enough` is false when even the hard limit is
// below `needed`.
DescriptorRoom make_room_for_descriptors(std::uint64_t needed);

}  // namespace ringmaster::base

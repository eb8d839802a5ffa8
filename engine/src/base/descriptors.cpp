#include "base/descriptors.h"

#include <dirent.h>
#include <sys/resource.h>

#include <algorithm>
#include <limits>

namespace ringmaster::base {

namespace {

std::uint64_t value_of(rlim_t v) {
  return v == RLIM_INFINITY ? std::numeric_limits<std::uint64_t>::max() : static_cast<std::uint64_t>(v);
}

}  // namespace

int open_descriptors() {
  DIR* dir = ::opendir("/proc/self/fd");
  if (dir == nullptr) return -1;
  int count = 0;
  while (const dirent* e = ::readdir(dir)) {
    if (e->d_name[0] != '.') ++count;
  }
  ::closedir(dir);
  return count - 1;  // the directory's own descriptor
}

namespace {

LimitRoom make_room(int resource, std::uint64_t needed, std::uint64_t advised) {
  LimitRoom room;
  room.advised = advised;
  rlimit limit{};
  if (::getrlimit(resource, &limit) != 0) {
    room.enough = true;  // nothing known to be short
    return room;
  }
  room.soft = value_of(limit.rlim_cur);
  room.hard = value_of(limit.rlim_max);
  if (room.soft >= needed) {
    room.enough = true;
    return room;
  }
  if (room.hard < needed) return room;
  const std::uint64_t wanted = std::min(room.hard, room.advised);
  limit.rlim_cur = wanted == std::numeric_limits<std::uint64_t>::max() ? RLIM_INFINITY : static_cast<rlim_t>(wanted);
  if (::setrlimit(resource, &limit) != 0) return room;
  room.soft = wanted;
  room.raised = true;
  room.enough = true;
  return room;
}

}  // namespace

LimitRoom make_room_for_descriptors(std::uint64_t needed) {
  // A margin for what opens and closes while connections form (accepts
  // in flight, a retry's socket, the files a log opens).
  return make_room(RLIMIT_NOFILE, needed, needed + needed / 4 + 16);
}

LimitRoom make_room_for_locked_bytes(std::uint64_t needed) {
  return make_room(RLIMIT_MEMLOCK, needed, needed + needed / 4);
}

}  // namespace ringmaster::base

// Copying that is defined for empty ranges: collectives of count 0 may be
// given null buffers (as NCCL allows), and memcpy/memmove with a null
// pointer are undefined even for zero bytes.
#pragma once

#include <cstddef>
#include <cstring>

namespace ringmaster {

inline void copy_bytes(void* dst, const void* src, std::size_t bytes) noexcept {
  if (bytes != 0 && dst != src) std::memmove(dst, src, bytes);
}

}  // namespace ringmaster

// Copying that is defined for empty ranges: collectives of count 0 may be
// given null buffers (as NCCL allows), and memcpy/memmove with a null
// pointer are undefined even for zero bytes. Placing scratch bytes apart
// from the memory a loop writes while reading them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace ringmaster {

inline void copy_bytes(void* dst, const void* src, std::size_t bytes) noexcept {
  if (bytes != 0 && dst != src) std::memmove(dst, src, bytes);
}

// A loop that loads from one buffer while storing to another slows down
// several times when the two lie at the same offset within a 4 KiB page
// (each load waits on a store whose address matches in its low 12 bits:
// "4K aliasing"), and fresh large allocations all start at the same page
// offset. kApartSlack spare bytes let a scratch buffer start at
// offset_apart(base, toward): half a page away from `toward`, in step with
// it as both advance.
inline constexpr std::size_t kApartSlack = 4096;
inline std::size_t offset_apart(const void* base, const void* toward) noexcept {
  if (toward == nullptr) return 0;
  const auto b = reinterpret_cast<std::uintptr_t>(base), t = reinterpret_cast<std::uintptr_t>(toward);
  return (t + kApartSlack / 2 - b) & (kApartSlack - 1);
}

}  // namespace ringmaster

// A hash that is the same in every process and build (std::hash is not
// promised to be): for names that ranks compare without sending them.
#pragma once

#include <cstdint>
#include <string_view>

namespace ringmaster {

// 64-bit FNV-1a.
inline std::uint64_t fnv1a(std::string_view s) noexcept {
  std::uint64_t h = 1469598103934665603ull;
  for (const char c : s) {
    h ^= static_cast<unsigned char>(c);
    h *= 1099511628211ull;
  }
  return h;
}

}  // namespace ringmaster

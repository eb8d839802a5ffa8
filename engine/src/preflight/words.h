// How a preflight report writes sizes and limits, in its findings and in
// its per-node lines alike.
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <string>

namespace ringmaster::preflight_words {

inline std::string bytes_text(std::uint64_t b) {
  if (b >= (1ULL << 30)) return fmt::format("{:.1f} GiB", static_cast<double>(b) / (1ULL << 30));
  if (b >= (1ULL << 20)) return fmt::format("{:.0f} MiB", static_cast<double>(b) / (1ULL << 20));
  return fmt::format("{:.0f} KiB", static_cast<double>(b) / 1024);
}

inline std::string limit_text(long long v) {
  return v < 0 ? std::string("unlimited") : std::to_string(v);
}

}  // namespace ringmaster::preflight_words

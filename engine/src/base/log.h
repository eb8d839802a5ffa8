// NCCL-style logging: `host:pid:tid [rank] RINGMASTER INFO <SUBSYS> message`.
//
// NCCL_DEBUG picks the level (VERSION, WARN, INFO, TRACE; default WARN) and
// NCCL_DEBUG_SUBSYS the subsystems (comma list, `^` to exclude, ALL;
// default INIT,BOOTSTRAP,ENV), both read once. NCCL_DEBUG_FILE sends lines
// to a file (%h host, %p pid). The rank shown is per thread, because a
// process may host several ranks (`probe --np`). Thread-safe: each line is
// written with one call.
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <string_view>

namespace ringmaster::log {

enum class Level : std::uint8_t { none, version, warn, info, trace };

enum class Subsys : std::uint16_t {
  init = 1 << 0,
  bootstrap = 1 << 1,
  store = 1 << 2,
  net = 1 << 3,
  env = 1 << 4,
  coll = 1 << 5,
  tuning = 1 << 6,
  graph = 1 << 7,
};

bool enabled(Level level, Subsys subsys) noexcept;
void write(Level level, Subsys subsys, std::string_view message);

// The rank printed in this thread's lines; -1 prints no rank.
void set_thread_rank(int rank) noexcept;
// Rank 0's "Ringmaster version X" at init: a plain line under
// NCCL_DEBUG=VERSION, an INIT line under INFO, nothing otherwise.
void version_banner(std::string_view version);
int thread_rank() noexcept;

template <class... Args>
void line(Level level, Subsys subsys, fmt::format_string<Args...> format, Args&&... args) {
  if (enabled(level, subsys)) write(level, subsys, fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace ringmaster::log

#define RM_WARN(subsys, ...) \
  ::ringmaster::log::line(::ringmaster::log::Level::warn, ::ringmaster::log::Subsys::subsys, __VA_ARGS__)
#define RM_INFO(subsys, ...) \
  ::ringmaster::log::line(::ringmaster::log::Level::info, ::ringmaster::log::Subsys::subsys, __VA_ARGS__)
#define RM_TRACE(subsys, ...) \
  ::ringmaster::log::line(::ringmaster::log::Level::trace, ::ringmaster::log::Subsys::subsys, __VA_ARGS__)

// The agent's own log, through spdlog, on stderr: a level and an ISO 8601
// timestamp on every line, or, under systemd (JOURNAL_STREAM set), the
// kernel-style priority prefix journald reads (<4> for a warning) and no
// timestamp, since the journal adds its own. Lines about a client count
// against its address: at most 20 a second each, so one flooding client
// cannot hide another's failures; at most 100 lines a second in all, so a
// flood of broken clients cannot fill the disk (the lines held back are
// counted in the next second's first line). Control characters from
// clients are shown escaped, never written raw.
#pragma once

#include <fmt/format.h>

#include <string>
#include <string_view>

namespace ringmaster::agent::log {

enum class Level { trace, debug, info, warn, error, off };

// From --log-level: trace, debug, info, warn, error or off; Error(config)
// naming the word otherwise.
Level parse_level(std::string_view name);
// Sets the level and the line format (reads JOURNAL_STREAM). Lines logged
// before it go out at info with timestamps.
void setup(Level level);
bool enabled(Level level);
// `source`: the client address the line is about (empty: the agent's own).
void write(Level level, std::string_view text, std::string_view source = {});

template <class... Args>
void warn(fmt::format_string<Args...> format, Args&&... args) {
  if (enabled(Level::warn)) write(Level::warn, fmt::format(format, std::forward<Args>(args)...));
}
template <class... Args>
void info(fmt::format_string<Args...> format, Args&&... args) {
  if (enabled(Level::info)) write(Level::info, fmt::format(format, std::forward<Args>(args)...));
}
template <class... Args>
void error(fmt::format_string<Args...> format, Args&&... args) {
  if (enabled(Level::error)) write(Level::error, fmt::format(format, std::forward<Args>(args)...));
}
// A line about the client at `source` (its address), within its share.
template <class... Args>
void warn_from(std::string_view source, fmt::format_string<Args...> format, Args&&... args) {
  if (enabled(Level::warn)) write(Level::warn, fmt::format(format, std::forward<Args>(args)...), source);
}
template <class... Args>
void info_from(std::string_view source, fmt::format_string<Args...> format, Args&&... args) {
  if (enabled(Level::info)) write(Level::info, fmt::format(format, std::forward<Args>(args)...), source);
}
template <class... Args>
void debug(fmt::format_string<Args...> format, Args&&... args) {
  if (enabled(Level::debug)) write(Level::debug, fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace ringmaster::agent::log

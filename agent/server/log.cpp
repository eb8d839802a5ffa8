#include "ringmaster/agent/log.h"

#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <mutex>

#include "ringmaster/status.h"

namespace ringmaster::agent::log {
namespace {

using Clock = std::chrono::steady_clock;

std::atomic<int> g_level{static_cast<int>(Level::info)};

spdlog::level::level_enum to_spdlog(Level level) {
  switch (level) {
    case Level::trace:
      return spdlog::level::trace;
    case Level::debug:
      return spdlog::level::debug;
    case Level::info:
      return spdlog::level::info;
    case Level::warn:
      return spdlog::level::warn;
    case Level::error:
      return spdlog::level::err;
    case Level::off:
      break;
  }
  return spdlog::level::off;
}

// journald reads sd-daemon's "<N>" prefixes on a service's stderr.
const char* journal_prefix(Level level) {
  switch (level) {
    case Level::error:
      return "<3>";
    case Level::warn:
      return "<4>";
    case Level::info:
      return "<6>";
    default:
      return "<7>";
  }
}

struct Logger {
  std::mutex mutex;
  std::shared_ptr<spdlog::logger> logger;
  bool journal = false;
  Clock::time_point second{};
  int written = 0, held = 0;

  Logger() { configure(); }
  void configure() {
    journal = std::getenv("JOURNAL_STREAM") != nullptr;
    logger = std::make_shared<spdlog::logger>("ringmaster-agent", std::make_shared<spdlog::sinks::stderr_sink_mt>());
    // ISO 8601 with milliseconds and the zone; under journald the journal
    // keeps the time and the level comes as the prefix.
    logger->set_pattern(journal ? "%v" : "%Y-%m-%dT%H:%M:%S.%e%z ringmaster-agent %l: %v");
    logger->set_level(spdlog::level::trace);
    logger->flush_on(spdlog::level::trace);
  }
  void emit(Level level, const std::string& text) {
    if (journal) {
      logger->log(to_spdlog(level), "{}ringmaster-agent: {}", journal_prefix(level), text);
    } else {
      logger->log(to_spdlog(level), "{}", text);
    }
  }
};

Logger& instance() {
  static Logger logger;
  return logger;
}

}  // namespace

Level parse_level(std::string_view name) {
  if (name == "trace") return Level::trace;
  if (name == "debug") return Level::debug;
  if (name == "info") return Level::info;
  if (name == "warn" || name == "warning") return Level::warn;
  if (name == "error") return Level::error;
  if (name == "off") return Level::off;
  throw Error(ErrorCategory::config,
              "--log-level " + std::string(name) + ": expected trace, debug, info, warn, error or off");
}

void setup(Level level) {
  g_level = static_cast<int>(level);
  auto& l = instance();
  std::lock_guard lock(l.mutex);
  l.configure();
}

bool enabled(Level level) {
  return level != Level::off && static_cast<int>(level) >= g_level.load();
}

void write(Level level, std::string_view text) {
  auto& l = instance();
  std::lock_guard lock(l.mutex);
  const auto now = Clock::now();
  if (now - l.second >= std::chrono::seconds(1)) {
    if (l.held > 0) l.emit(Level::warn, fmt::format("({} lines held back in the last second)", l.held));
    l.second = now;
    l.written = l.held = 0;
  }
  if (l.written >= 20) {
    ++l.held;
    return;
  }
  ++l.written;
  std::string shown;
  shown.reserve(text.size());
  for (const char c : text) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
      shown += fmt::format("\\x{:02x}", static_cast<unsigned char>(c));
    } else {
      shown += c;
    }
  }
  l.emit(level, shown);
}

}  // namespace ringmaster::agent::log

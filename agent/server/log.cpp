#include "ringmaster/agent/log.h"

#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

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

// Lines written in the current second, and held back past a cap.
struct Budget {
  Clock::time_point second{};
  int written = 0, held = 0;
  // A new second: the lines held back in the last one, and a fresh count.
  int roll(Clock::time_point now) {
    if (now - second < std::chrono::seconds(1)) return 0;
    second = now;
    written = 0;
    return std::exchange(held, 0);
  }
};
constexpr int kLinesPerSource = 20;     // a second, per client address
constexpr int kLinesPerSecond = 100;    // a second, over everything
constexpr std::size_t kSources = 1024;  // addresses remembered

struct Logger {
  std::mutex mutex;
  std::shared_ptr<spdlog::logger> logger;
  bool journal = false;
  Budget all;
  std::map<std::string, Budget, std::less<>> sources;

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

void write(Level level, std::string_view text, std::string_view source) {
  auto& l = instance();
  std::lock_guard lock(l.mutex);
  const auto now = Clock::now();
  if (const int held = l.all.roll(now); held > 0) {
    l.emit(Level::warn, fmt::format("({} lines held back in the last second)", held));
  }
  if (!source.empty()) {
    auto it = l.sources.find(source);
    if (it == l.sources.end()) {
      if (l.sources.size() >= kSources) {
        std::erase_if(l.sources, [&](const auto& e) { return now - e.second.second >= std::chrono::seconds(1); });
        if (l.sources.size() >= kSources) l.sources.clear();
      }
      it = l.sources.emplace(std::string(source), Budget{}).first;
    }
    Budget& b = it->second;
    if (const int held = b.roll(now); held > 0) {
      l.emit(Level::warn, fmt::format("({} lines about {} held back in the last second)", held, source));
    }
    if (b.written >= kLinesPerSource) {
      ++b.held;
      return;
    }
    ++b.written;
  }
  if (l.all.written >= kLinesPerSecond) {
    ++l.all.held;
    return;
  }
  ++l.all.written;
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

#include "base/log.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <array>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace ringmaster::log {
namespace {

constexpr std::array<std::pair<std::string_view, Subsys>, 8> kSubsysNames = {{
    {"INIT", Subsys::init},
    {"BOOTSTRAP", Subsys::bootstrap},
    {"STORE", Subsys::store},
    {"NET", Subsys::net},
    {"ENV", Subsys::env},
    {"COLL", Subsys::coll},
    {"TUNING", Subsys::tuning},
    {"GRAPH", Subsys::graph},
}};

std::string upper(std::string_view s) {
  std::string out(s);
  for (auto& c : out)
    c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

struct Settings {
  Level level = Level::warn;
  std::uint32_t mask = 0;
  std::FILE* out = stderr;
  std::string host;
  std::string tag = "RINGMASTER";  // RINGMASTER_LOG_TAG: NCCL for `grep "NCCL WARN"` habits

  Settings() {
    if (const char* env = std::getenv("NCCL_DEBUG")) {
      const std::string v = upper(env);
      if (v == "VERSION") level = Level::version;
      if (v == "WARN") level = Level::warn;
      if (v == "INFO") level = Level::info;
      if (v == "TRACE") level = Level::trace;
      if (v == "NONE" || v.empty()) level = Level::none;
    }
    if (const char* t = std::getenv("RINGMASTER_LOG_TAG"); t != nullptr && *t != '\0') {
      // A short word of letters only: it sits in every line.
      std::string word;
      for (const char* c = t; *c != '\0' && word.size() < 16; ++c) {
        if (std::isalpha(static_cast<unsigned char>(*c))) word += *c;
      }
      if (!word.empty()) tag = word;
    }
    mask = static_cast<std::uint32_t>(Subsys::init) | static_cast<std::uint32_t>(Subsys::bootstrap) |
           static_cast<std::uint32_t>(Subsys::env);
    if (const char* env = std::getenv("NCCL_DEBUG_SUBSYS")) {
      std::string_view spec(env);
      const bool invert = !spec.empty() && spec.front() == '^';
      if (invert) spec.remove_prefix(1);
      std::uint32_t chosen = 0;
      while (!spec.empty()) {
        const auto comma = spec.find(',');
        const std::string name = upper(spec.substr(0, comma));
        if (name == "ALL") chosen = ~0u;
        for (const auto& [n, s] : kSubsysNames) {
          if (n == name) chosen |= static_cast<std::uint32_t>(s);
        }
        if (comma == std::string_view::npos) break;
        spec.remove_prefix(comma + 1);
      }
      mask = invert ? ~chosen : chosen;
    }
    char name[256] = {};
    gethostname(name, sizeof(name) - 1);
    host = name;
    if (const char* file = std::getenv("NCCL_DEBUG_FILE")) {
      std::string path;
      for (const char* p = file; *p != '\0'; ++p) {
        if (p[0] == '%' && p[1] == 'h') {
          path += host;
          ++p;
        } else if (p[0] == '%' && p[1] == 'p') {
          path += std::to_string(getpid());
          ++p;
        } else {
          path += *p;
        }
      }
      if (std::FILE* f = std::fopen(path.c_str(), "a")) out = f;
    }
  }
};

const Settings& settings() {
  static const Settings s;
  return s;
}

thread_local int t_rank = -1;

std::string_view level_name(Level level) {
  switch (level) {
    case Level::warn:
      return "WARN";
    case Level::info:
      return "INFO";
    case Level::trace:
      return "TRACE";
    default:
      return "VERSION";
  }
}

std::string_view subsys_name(Subsys subsys) {
  for (const auto& [n, s] : kSubsysNames) {
    if (s == subsys) return n;
  }
  return "?";
}

}  // namespace

bool enabled(Level level, Subsys subsys) noexcept {
  const auto& s = settings();
  if (level > s.level) return false;
  // Warnings always print, whatever the subsystem filter says (as in NCCL).
  return level <= Level::warn || (s.mask & static_cast<std::uint32_t>(subsys)) != 0;
}

void write(Level level, Subsys subsys, std::string_view message) {
  const auto& s = settings();
  const auto tid = static_cast<long>(syscall(SYS_gettid));
  std::string text = fmt::format("{}:{}:{} [{}] {} {} {} {}\n", s.host, getpid(), tid,
                                 t_rank >= 0 ? std::to_string(t_rank) : std::string("-"), s.tag, level_name(level),
                                 subsys_name(subsys), message);
  std::fwrite(text.data(), 1, text.size(), s.out);
  std::fflush(s.out);
}

void version_banner(std::string_view version) {
  const auto& s = settings();
  if (s.level == Level::version) {
    // As NCCL_DEBUG=VERSION prints it: one plain line.
    const std::string text = fmt::format("Ringmaster version {}\n", version);
    std::fwrite(text.data(), 1, text.size(), s.out);
    std::fflush(s.out);
  } else if (enabled(Level::info, Subsys::init)) {
    write(Level::info, Subsys::init, fmt::format("Ringmaster version {}", version));
  }
}

void set_thread_rank(int rank) noexcept {
  t_rank = rank;
}
int thread_rank() noexcept {
  return t_rank;
}

}  // namespace ringmaster::log

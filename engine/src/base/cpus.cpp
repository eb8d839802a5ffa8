#include "base/cpus.h"

#include <algorithm>
#include <charconv>
#include <fstream>
#include <string>
#include <thread>

namespace ringmaster::base {

namespace {

// The process's cgroup v2 path ("0::/kubepods/..."), empty when none.
std::string cgroup_v2_path() {
  std::ifstream in("/proc/self/cgroup");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("0::", 0) == 0) return line.substr(3);
  }
  return {};
}

// The tightest cpu.max from this cgroup up to the root.
int cgroup_quota_cpus() {
  std::string path = cgroup_v2_path();
  if (path.empty()) return 0;
  int tightest = 0;
  for (;;) {
    std::ifstream in("/sys/fs/cgroup" + path + (path == "/" ? "" : "/") + "cpu.max");
    std::string text;
    if (in && std::getline(in, text)) {
      const int cpus = cpus_from_cpu_max(text);
      if (cpus > 0) tightest = tightest == 0 ? cpus : std::min(tightest, cpus);
    }
    if (path == "/" || path.empty()) break;
    const auto slash = path.rfind('/');
    path = slash == 0 || slash == std::string::npos ? "/" : path.substr(0, slash);
  }
  return tightest;
}

}  // namespace

int cpus_from_cpu_max(std::string_view text) {
  const auto space = text.find(' ');
  if (space == std::string_view::npos) return 0;
  const std::string_view quota_text = text.substr(0, space);
  std::string_view period_text = text.substr(space + 1);
  while (!period_text.empty() && (period_text.back() == '\n' || period_text.back() == ' '))
    period_text.remove_suffix(1);
  long long quota = 0, period = 0;
  if (std::from_chars(quota_text.data(), quota_text.data() + quota_text.size(), quota).ec != std::errc() ||
      std::from_chars(period_text.data(), period_text.data() + period_text.size(), period).ec != std::errc() ||
      quota <= 0 || period <= 0) {
    return 0;  // "max": no limit
  }
  return static_cast<int>((quota + period - 1) / period);
}

int host_cpus() {
  int cpus = static_cast<int>(std::thread::hardware_concurrency());
  if (const int quota = cgroup_quota_cpus(); quota > 0) cpus = cpus > 0 ? std::min(cpus, quota) : quota;
  return std::max(1, cpus);
}

}  // namespace ringmaster::base

#include "base/cycles.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace ringmaster::cycles {
namespace {

bool invariant_tsc() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (static_cast<unsigned>(__get_cpuid_max(0x80000000u, nullptr)) < 0x80000007u) return false;
  __cpuid(0x80000007u, eax, ebx, ecx, edx);
  return (edx & (1u << 8)) != 0;  // CPUID.80000007H:EDX[8], invariant TSC
#else
  return false;
#endif
}

const bool kUsesTsc = invariant_tsc();

#if defined(__x86_64__) || defined(__i386__)
// One counter read between two clock reads, its clock time their midpoint.
// Of a few tries the narrowest pair is kept: a thread preempted between
// the reads (common on a loaded machine) widens that pair only, so the
// error of the pair kept is half its width, tens of nanoseconds.
struct Sample {
  std::chrono::steady_clock::time_point at;
  std::uint64_t ticks = 0;
};

Sample narrowest_sample() noexcept {
  using Clock = std::chrono::steady_clock;
  Sample best;
  auto best_width = Clock::duration::max();
  for (int i = 0; i < 5; ++i) {
    const auto before = Clock::now();
    const std::uint64_t ticks = __rdtsc();
    const auto after = Clock::now();
    if (after - before < best_width) {
      best_width = after - before;
      best = {before + (after - before) / 2, ticks};
    }
  }
  return best;
}
#endif

double measure_ns_per_tick() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  if (!kUsesTsc) return 1.0;
  // Against the steady clock over about 2 ms: the rate to 0.01% or better.
  const Sample first = narrowest_sample();
  while (std::chrono::steady_clock::now() - first.at < std::chrono::milliseconds(2)) {
  }
  const Sample last = narrowest_sample();
  const double ns = std::chrono::duration<double, std::nano>(last.at - first.at).count();
  return last.ticks > first.ticks && ns > 0 ? ns / static_cast<double>(last.ticks - first.ticks) : 1.0;
#else
  return 1.0;
#endif
}

}  // namespace

bool uses_tsc() noexcept {
  return kUsesTsc;
}

double ns_per_tick() noexcept {
  static const double rate = measure_ns_per_tick();
  return rate;
}

}  // namespace ringmaster::cycles

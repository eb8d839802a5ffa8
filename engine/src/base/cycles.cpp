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

double measure_ns_per_tick() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  if (!kUsesTsc) return 1.0;
  // Against the steady clock over about 2 ms: the rate to 0.1% or better.
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  const std::uint64_t c0 = __rdtsc();
  Clock::time_point t1;
  std::uint64_t c1 = 0;
  do {
    t1 = Clock::now();
    c1 = __rdtsc();
  } while (t1 - t0 < std::chrono::milliseconds(2));
  const double ns = std::chrono::duration<double, std::nano>(t1 - t0).count();
  return c1 > c0 ? ns / static_cast<double>(c1 - c0) : 1.0;
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

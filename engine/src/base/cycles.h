// Step timing at the cost of one time-stamp counter read.
//
// A channel adds every step's duration to its busy counter. Two reads of
// the steady clock cost about 60 ns on a VM (kvm-clock through the vDSO),
// a tenth of a small shared-memory all_reduce; the x86 time-stamp counter
// reads in about 10 ns. Where the CPU says its counter runs at a constant
// rate in every power state (invariant TSC), ticks are converted with a
// rate measured once against the steady clock; elsewhere a tick is a
// steady-clock nanosecond.
#pragma once

#include <chrono>
#include <cstdint>

#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#endif

namespace ringmaster::cycles {

// Nanoseconds per tick, measured on first use (about 2 ms); 1 where the
// steady clock is the tick.
double ns_per_tick() noexcept;

// True when ticks are the time-stamp counter.
bool uses_tsc() noexcept;

inline std::uint64_t now() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  if (uses_tsc()) return __rdtsc();
#endif
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
          .count());
}

template <class Rep, class Period>
std::uint64_t ticks_in(std::chrono::duration<Rep, Period> d) noexcept {
  return static_cast<std::uint64_t>(std::chrono::duration<double, std::nano>(d).count() / ns_per_tick());
}

// Zero if the thread moved to a CPU whose counter lags the first one's.
inline std::uint64_t elapsed_ns(std::uint64_t since) noexcept {
  const std::uint64_t at = now();
  return at > since ? static_cast<std::uint64_t>(static_cast<double>(at - since) * ns_per_tick()) : 0;
}

}  // namespace ringmaster::cycles

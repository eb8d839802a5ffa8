#include "comm/flight_recorder.h"

#include <time.h>

#include <algorithm>
#include <chrono>

namespace ringmaster {

std::string_view name_of(CallState state) noexcept {
  switch (state) {
    case CallState::queued:
      return "queued";
    case CallState::running:
      return "running";
    case CallState::done:
      return "done";
    case CallState::failed:
      return "failed";
  }
  return "?";
}

namespace comm {
namespace {

constexpr std::uint64_t tag_of(std::uint64_t seq, CallState state) noexcept {
  return (seq + 1) << 2 | static_cast<std::uint64_t>(state);
}

// The monotonic clock at the kernel's tick (4 ms here), read from the vDSO
// without the time-stamp counter: about 4 ns where a counter read costs 11
// on a VM, twice per call. Ages and durations to a tick are what a stall
// report needs; the channels' busy counters time the steps themselves.
std::uint64_t coarse_now_ns() noexcept {
  timespec t{};
  ::clock_gettime(CLOCK_MONOTONIC_COARSE, &t);
  return static_cast<std::uint64_t>(t.tv_sec) * 1'000'000'000u + static_cast<std::uint64_t>(t.tv_nsec);
}

}  // namespace

void FlightRecorder::begin(std::uint64_t seq, Collective collective, std::size_t bytes, Algorithm algorithm,
                           Protocol protocol, int channels) noexcept {
  Slot& s = slots_[seq % kSlots];
  const std::uint64_t held = s.tag.load(std::memory_order_relaxed);
  const auto held_state = static_cast<CallState>(held & 3);
  if (held != 0 && !has_ended(held_state)) {
    begun_.store(seq + 1, std::memory_order_release);
    return;
  }
  s.tag.store(0, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  s.bytes.store(bytes, std::memory_order_relaxed);
  s.shape.store(static_cast<std::uint32_t>(collective) | static_cast<std::uint32_t>(algorithm) << 8 |
                    static_cast<std::uint32_t>(protocol) << 16 |
                    static_cast<std::uint32_t>(std::clamp(channels, 0, 255)) << 24,
                std::memory_order_relaxed);
  s.start.store(coarse_now_ns(), std::memory_order_relaxed);
  s.end.store(0, std::memory_order_relaxed);
  s.tag.store(tag_of(seq, CallState::queued), std::memory_order_release);
  begun_.store(seq + 1, std::memory_order_release);
}

// No read-modify-write: a call that has not ended keeps its slot, so
// nothing else writes it meanwhile; its parts may each mark it running (the
// same value), and its end comes after every part's start.
void FlightRecorder::advance(std::uint64_t seq, CallState to) noexcept {
  Slot& s = slots_[seq % kSlots];
  const std::uint64_t tag = s.tag.load(std::memory_order_relaxed);
  if (tag >> 2 == seq + 1 && (tag & 3) < static_cast<std::uint64_t>(to)) {
    s.tag.store(tag_of(seq, to), std::memory_order_release);
  }
}

void FlightRecorder::started(std::uint64_t seq) noexcept {
  advance(seq, CallState::running);
}

void FlightRecorder::ended(std::uint64_t seq, bool ok) noexcept {
  Slot& s = slots_[seq % kSlots];
  if (s.tag.load(std::memory_order_relaxed) >> 2 == seq + 1) s.end.store(coarse_now_ns(), std::memory_order_relaxed);
  advance(seq, ok ? CallState::done : CallState::failed);
  ended_.fetch_add(1, std::memory_order_relaxed);
}

std::vector<CallRecord> FlightRecorder::snapshot() const {
  const std::uint64_t now = coarse_now_ns();
  auto micros = [&](std::uint64_t from, std::uint64_t to) {
    return std::chrono::microseconds(static_cast<std::int64_t>(to > from ? (to - from) / 1000 : 0));
  };
  std::vector<CallRecord> calls;
  calls.reserve(kSlots);
  for (const Slot& s : slots_) {
    const std::uint64_t tag = s.tag.load(std::memory_order_acquire);
    if (tag == 0) continue;  // empty, or being rewritten
    const std::uint64_t seq = (tag >> 2) - 1;
    const std::uint64_t bytes = s.bytes.load(std::memory_order_relaxed);
    const std::uint32_t shape = s.shape.load(std::memory_order_relaxed);
    const std::uint64_t start = s.start.load(std::memory_order_relaxed);
    const std::uint64_t end = s.end.load(std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_acquire);
    if (s.tag.load(std::memory_order_relaxed) >> 2 != seq + 1) continue;  // rewritten while read
    CallRecord r;
    r.seq = seq;
    r.collective = static_cast<Collective>(shape & 0xff);
    r.algorithm = static_cast<Algorithm>(shape >> 8 & 0xff);
    r.protocol = static_cast<Protocol>(shape >> 16 & 0xff);
    r.channels = static_cast<int>(shape >> 24);
    r.bytes = bytes;
    r.state = static_cast<CallState>(tag & 3);
    const bool over = has_ended(r.state);
    r.age = micros(start, now);
    r.duration = micros(start, over && end != 0 ? end : now);
    calls.push_back(r);
  }
  std::sort(calls.begin(), calls.end(), [](const CallRecord& a, const CallRecord& b) { return a.seq < b.seq; });
  return calls;
}

}  // namespace comm
}  // namespace ringmaster

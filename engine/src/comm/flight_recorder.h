// Internal: a communicator's flight recorder, the last kSlots collectives
// of this rank (Communicator::recent_calls). Always on, so it must cost a
// small collective next to nothing: no lock, no allocation, one atomic
// add and two reads of the kernel's coarse clock a call. Each slot is written by the caller that submits the call
// and by the channel that runs it; a reader checks that the slot still
// holds the same call after reading it and drops it otherwise.
//
// A call that has not ended keeps its slot: a caller that submits
// thousands of calls before it waits (nccl-tests' loop) would otherwise
// push the one that is stuck, the one a stall report is about, out of the
// recorder. The calls submitted meanwhile are then not kept.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <vector>

#include "ringmaster/comm.h"

namespace ringmaster::comm {

// Done or failed; queued and running calls have not ended.
inline bool has_ended(CallState state) noexcept {
  return state == CallState::done || state == CallState::failed;
}

class FlightRecorder {
 public:
  static constexpr std::size_t kSlots = 256;

  // A call submitted (queued); seq is one more than the last begun. Not
  // kept when its slot still holds a call that has not ended.
  void begin(std::uint64_t seq, Collective collective, std::size_t bytes, Algorithm algorithm, Protocol protocol,
             int channels) noexcept;
  // Its first part started.
  void started(std::uint64_t seq) noexcept;
  // Its last part ended.
  void ended(std::uint64_t seq, bool ok) noexcept;

  // The calls held, in order, without the waits (the channels know those:
  // Communicator::recent_calls adds them).
  std::vector<CallRecord> snapshot() const;

  // Calls begun and calls ended so far (ended ones in any order).
  std::uint64_t begun() const noexcept { return begun_.load(std::memory_order_acquire); }
  std::uint64_t ended_count() const noexcept { return ended_.load(std::memory_order_relaxed); }

 private:
  // tag: (seq + 1) << 2 | CallState, 0 while the slot is being written.
  struct Slot {
    std::atomic<std::uint64_t> tag{0};
    std::atomic<std::uint64_t> bytes{0};
    std::atomic<std::uint32_t> shape{0};  // collective | algorithm << 8 | protocol << 16 | channels << 24
    std::atomic<std::uint64_t> start{0};  // CLOCK_MONOTONIC_COARSE, ns
    std::atomic<std::uint64_t> end{0};
  };
  // Moves the slot of `seq` from one state to the next; nothing when the
  // slot holds another call by now (256 calls later).
  void advance(std::uint64_t seq, CallState to) noexcept;

  std::array<Slot, kSlots> slots_;
  std::atomic<std::uint64_t> begun_{0};
  std::atomic<std::uint64_t> ended_{0};
};

}  // namespace ringmaster::comm

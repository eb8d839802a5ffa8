// Internal: a collective's completion state, shared by its Request, its
// queued parts and the channels that run them (comm/enqueue.cpp).
#pragma once

#include <atomic>
#include <cstdint>
#include <exception>
#include <functional>
#include <utility>

#include "base/log.h"
#include "ringmaster/comm.h"
#include "ringmaster/status.h"

namespace ringmaster {

struct Request::State {
  std::atomic<int> remaining{0};           // parts (channels) still running
  std::atomic<std::uint32_t> finished{0};  // 1: every part done, status final (a futex word)
  std::atomic<bool> sleeping{false};       // a waiter sleeps (or is about to) on `finished`
  std::atomic<bool> failed{false};         // a failed part has written `status`
  Status status;
  std::function<void(const Status&)> on_done;  // runs once, before waiters wake
  // Runs once after on_done, before waiters wake: the engine's own
  // bookkeeping (the flight recorder), a plain function.
  void (*before_wake)(State& state, const Status& status) = nullptr;
  // Runs the next queued task of the channel this request waits on, on the
  // waiter's thread, if its progress thread has not started it yet; false
  // when there is none. A caller that waits at once so pays no thread
  // wake-up: the handoff costs tens of microseconds on a VM, more than a
  // small collective itself. `kick` starts the progress thread on it
  // instead. Plain functions of `channel`: nothing to build per call.
  bool (*help)(void* channel) = nullptr;
  void (*kick)(void* channel) = nullptr;
  void* channel = nullptr;

  // The last part to finish runs on_done and wakes the waiters; true for
  // it. No lock: a small collective's caller usually runs it itself and
  // never sleeps.
  bool finish_part(const Status& part) {
    // The first failure is kept; acq_rel below publishes it to the last part.
    if (!part.ok() && !failed.exchange(true, std::memory_order_relaxed)) status = part;
    // A single part (most small collectives) is the last without an RMW;
    // of several, the acquire load sees the others' statuses when it reads 1.
    if (remaining.load(std::memory_order_acquire) > 1 && remaining.fetch_sub(1, std::memory_order_acq_rel) > 1)
      return false;
    if (on_done) {
      // A user callback (CommOptions::on_collective) must not keep the
      // request from completing: its waiters would wait for ever.
      try {
        std::exchange(on_done, nullptr)(status);
      } catch (const std::exception& e) {
        RM_WARN(coll, "the on_collective callback threw ({}); the collective completed regardless", e.what());
      } catch (...) {
        RM_WARN(coll, "the on_collective callback threw; the collective completed regardless");
      }
    }
    if (before_wake != nullptr) before_wake(*this, status);
    finished.store(1, std::memory_order_seq_cst);
    // A waiter sets `sleeping` before it checks `finished` (both seq_cst):
    // either it saw `finished`, or this sees `sleeping` and wakes it (its
    // futex wait returns at once if `finished` changed before it slept).
    if (sleeping.load(std::memory_order_seq_cst)) finished.notify_all();
    return true;
  }
};

}  // namespace ringmaster

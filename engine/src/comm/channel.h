// Internal: a channel of a communicator. Its ring link, its FIFO of work
// and the progress thread that works it off; a small collective may
// instead be parked on the channel for its caller to run (see park).
//
// Parked work never waits for its caller for long: when a caller is about
// to sleep in Request::wait, and after kParkedTakeover at the latest (a
// caller blocked on a pipe, another library's barrier or a step of
// another communicator), a watcher hands it to the progress thread, so a
// submitted collective always completes.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "transport/link.h"

namespace ringmaster::comm {

struct Channel {
  int index = 0;
  transport::ChannelLink link;
  transport::ChannelStats stats;
  std::vector<std::byte> scratch;
  std::mutex mutex;
  std::condition_variable wake;
  std::deque<std::function<void()>> queue;  // under mutex
  std::atomic<int> queued{0};               // queue.size(), for readers without the lock
  // Held by whoever runs the channel's next task, the progress thread or a
  // caller, or by a parked task: taken with one compare-and-swap, so a
  // small collective on an idle channel takes no lock at all.
  std::atomic<bool> running{false};
  // A small collective claimed by its caller at submit and not started:
  // the caller runs it when it waits (or tests it, or issues the next one
  // hands it over); whoever takes it from here holds the claim.
  std::atomic<void*> parked{nullptr};
  void (*run_parked)(void* job) = nullptr;  // set before the thread starts
  bool stopping = false;
  // In waiting_channels: set and cleared under waiting_mutex, read without.
  std::atomic<bool> waiting_listed{false};
  std::thread thread;

  bool claim() noexcept {
    bool idle = false;
    return !running.load(std::memory_order_relaxed) &&
           running.compare_exchange_strong(idle, true, std::memory_order_seq_cst);
  }

  // Ends a claim, waking the progress thread for work queued meanwhile.
  // seq_cst against a submit that queues (queued, then the thread's
  // claim): either that claim succeeds or this sees the queued work.
  void release() {
    running.store(false, std::memory_order_seq_cst);
    if (queued.load(std::memory_order_seq_cst) > 0) {
      { std::lock_guard lock(mutex); }  // the thread is asleep or sees `running` false
      wake.notify_one();
    }
  }

  // Queues a task behind the others (or ahead of them: a parked task was
  // first) and wakes the progress thread for it.
  void enqueue(std::function<void()> task, bool first = false) {
    {
      std::lock_guard lock(mutex);
      if (first) {
        queue.push_front(std::move(task));
      } else {
        queue.push_back(std::move(task));
      }
      queued.store(static_cast<int>(queue.size()), std::memory_order_seq_cst);
    }
    wake.notify_one();
  }

  // Gives a parked task to the progress thread: its caller is not running
  // it now (it polls, issued more work, or is about to sleep elsewhere).
  void hand_off_parked() {
    void* job = parked.exchange(nullptr, std::memory_order_seq_cst);
    if (job == nullptr) return;
    enqueue([this, job] { run_parked(job); }, /*first=*/true);
    release();  // the claim was the parked task's
  }

  // Parks `job` (run later by run_parked) when the channel is idle:
  // claimed without a lock, and listed for the watcher. False when the
  // channel is busy; the job must then be queued.
  bool park(void* job);

  // The progress thread's loop, until stopping and the queue is empty.
  void run(int rank);

  // Runs the channel's next task on the calling thread when nobody runs
  // one: the parked one, else the first queued; false when there was
  // nothing to take.
  bool run_next_here();
};

// Hands every parked collective to its progress thread: called before a
// caller sleeps in Request::wait, since the parked work's caller may be
// the one about to sleep.
void start_waiting_work();

// A channel about to be destroyed leaves the watcher's list.
void forget_waiting(Channel* c);

}  // namespace ringmaster::comm

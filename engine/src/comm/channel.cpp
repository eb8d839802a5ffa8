// Channels: the progress thread's loop, work taken over by a caller, and
// parked work handed to progress threads (comm/channel.h).
#include "comm/channel.h"

#include <fmt/format.h>
#include <pthread.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <utility>

#include "base/log.h"

namespace ringmaster::comm {

using Clock = std::chrono::steady_clock;

void Channel::run(int rank) {
  log::set_thread_rank(rank);
  // Named for top -H, gdb and /proc/<pid>/task/*/comm (15 characters at most).
  ::pthread_setname_np(::pthread_self(), fmt::format("rm-channel-{}", index).substr(0, 15).c_str());
  for (;;) {
    std::function<void()> task;
    {
      std::unique_lock lock(mutex);
      bool claimed = false;
      // Stopping, the queue is still worked off.
      wake.wait(lock,
                [&] { return (!queue.empty() && (claimed || (claimed = claim()))) || (stopping && queue.empty()); });
      if (!claimed) return;
      task = std::move(queue.front());
      queue.pop_front();
      queued.store(static_cast<int>(queue.size()), std::memory_order_seq_cst);
    }
    task();  // releases the claim itself, before its request completes
  }
}

bool Channel::run_next_here() {
  if (void* job = parked.exchange(nullptr, std::memory_order_acq_rel)) {
    run_parked(job);  // releases the claim
    return true;
  }
  if (queued.load(std::memory_order_acquire) == 0 || running.load(std::memory_order_relaxed)) return false;
  std::function<void()> task;
  {
    std::lock_guard lock(mutex);
    if (queue.empty() || !claim()) return false;
    task = std::move(queue.front());
    queue.pop_front();
    queued.store(static_cast<int>(queue.size()), std::memory_order_seq_cst);
  }
  task();  // releases the claim itself
  return true;
}

namespace {

// Channels holding a small collective that waits for its caller (see
// Channel::park). Before a caller sleeps in Request::wait they are handed
// to their progress threads: the caller may be the one about to sleep, on
// another communicator, and its peers would wait for that collective
// meanwhile. A caller that sleeps anywhere else is covered by the watcher.
std::mutex waiting_mutex;
std::vector<Channel*> waiting_channels;  // a channel may be listed twice; each entry is looked at
std::atomic<int> waiting_count{0};

// A parked collective also runs when its caller never comes back to the
// engine (it blocks on a pipe, another library's barrier, a sleep): a
// watcher thread looks at the listed channels every kParkedTakeover, and
// a job still parked after a whole interval is handed to its progress
// thread. The watcher sleeps while nothing is listed; a listing wakes it.
constexpr auto kParkedTakeover = std::chrono::milliseconds(5);

class ParkedWatch {
 public:
  // Called with waiting_mutex held, after listing a channel.
  void listed() {
    if (!thread_) {
      // fork() copies this object but not the thread, and a condition
      // variable mid-wait: a child starts afresh (see forked()).
      static std::once_flag registered;
      std::call_once(registered, [] {
        ::pthread_atfork([] { waiting_mutex.lock(); }, [] { waiting_mutex.unlock(); },
                         [] {
                           parked_watch_forked();
                           waiting_mutex.unlock();
                         });
      });
      idle_ = false;
      thread_ = std::make_unique<std::thread>([this] { run(); });
    }
    if (idle_) changed_->notify_one();
  }

  // In a child after fork(): the thread did not come along (its object is
  // left to leak), and the condition variable may hold its waiter's state.
  void forked() {
    (void)thread_.release();
    (void)changed_.release();
    changed_ = std::make_unique<std::condition_variable>();
    idle_ = false;
    stopping_ = false;
  }

  ~ParkedWatch() {
    if (!thread_) return;
    {
      std::lock_guard lock(waiting_mutex);
      stopping_ = true;
    }
    changed_->notify_one();
    thread_->join();
  }

 private:
  void run() {
    ::pthread_setname_np(::pthread_self(), "rm-parked-watch");
    std::unique_lock lock(waiting_mutex);
    std::vector<std::pair<Channel*, void*>> seen;  // what was parked at the last look
    while (!stopping_) {
      if (waiting_channels.empty()) {
        seen.clear();
        idle_ = true;
        changed_->wait(lock, [&] { return stopping_ || !waiting_channels.empty(); });
        idle_ = false;
        continue;
      }
      // A whole interval, whatever is listed meanwhile.
      const auto until = Clock::now() + kParkedTakeover;
      changed_->wait_until(lock, until, [&] { return stopping_ || Clock::now() >= until; });
      if (stopping_) break;
      std::vector<std::pair<Channel*, void*>> now;
      std::vector<Channel*> keep;
      for (Channel* c : waiting_channels) {
        if (std::find(keep.begin(), keep.end(), c) != keep.end()) continue;
        // Unlisted before the look, as in start_waiting_work: a submit that
        // parks after this sees the flag down and lists the channel again.
        c->waiting_listed.store(false, std::memory_order_seq_cst);
        void* job = c->parked.load(std::memory_order_seq_cst);
        if (job == nullptr) continue;
        if (std::find(seen.begin(), seen.end(), std::make_pair(c, job)) != seen.end()) {
          c->hand_off_parked();  // parked for a whole interval: its caller is busy elsewhere
          continue;
        }
        now.emplace_back(c, job);
        keep.push_back(c);
        c->waiting_listed.store(true, std::memory_order_seq_cst);
      }
      waiting_channels = std::move(keep);
      waiting_count.store(static_cast<int>(waiting_channels.size()));
      seen = std::move(now);
    }
  }

  static void parked_watch_forked();

  std::unique_ptr<std::thread> thread_;
  std::unique_ptr<std::condition_variable> changed_ = std::make_unique<std::condition_variable>();
  bool idle_ = false;      // under waiting_mutex
  bool stopping_ = false;  // under waiting_mutex
};

ParkedWatch& parked_watch() {
  static ParkedWatch watch;
  return watch;
}

void ParkedWatch::parked_watch_forked() {
  parked_watch().forked();
}

}  // namespace

void start_waiting_work() {
  if (waiting_count.load(std::memory_order_relaxed) == 0) return;
  std::lock_guard lock(waiting_mutex);
  // Unlisted before the handoff: a submit that still saw its channel
  // listed (and so did not list it again) parked its task before this
  // looks. Only a parked task needs the progress thread: a channel whose
  // task runs on its caller's thread (often the very thread about to
  // sleep, in a step waiting for a peer) is left alone; waking its thread
  // only made it compete for a CPU (8 ranks on 2 CPUs: ten thousand futile
  // wake-ups a second per rank).
  for (Channel* c : waiting_channels) {
    c->waiting_listed.store(false, std::memory_order_seq_cst);
    c->hand_off_parked();
  }
  waiting_channels.clear();
  waiting_count.store(0);
}

bool Channel::park(void* job) {
  // Idle: claimed and parked without a lock. The second look at the
  // queue catches a parked task handed off just before the claim.
  if (queued.load(std::memory_order_seq_cst) != 0 || !claim()) return false;
  if (queued.load(std::memory_order_seq_cst) != 0) {
    release();
    return false;
  }
  parked.store(job, std::memory_order_seq_cst);
  if (!waiting_listed.load(std::memory_order_seq_cst)) {
    // Once: a caller that runs its collectives itself never sleeps, so
    // nothing would empty the list.
    std::lock_guard waiting(waiting_mutex);
    if (!waiting_listed.load(std::memory_order_relaxed)) {
      waiting_channels.push_back(this);
      waiting_listed.store(true, std::memory_order_seq_cst);
      waiting_count.store(static_cast<int>(waiting_channels.size()));
      parked_watch().listed();
    }
  }
  return true;
}

void forget_waiting(Channel* c) {
  std::lock_guard lock(waiting_mutex);
  std::erase(waiting_channels, c);
  c->waiting_listed = false;
  waiting_count.store(static_cast<int>(waiting_channels.size()));
}

}  // namespace ringmaster::comm

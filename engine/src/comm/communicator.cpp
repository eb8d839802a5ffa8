// Communicator: bootstrap, then one ring of connections per channel (shared
// memory to ranks on the same host, sockets to the others),
// each channel served by its own progress thread with a FIFO of work. A
// collective is split evenly across the channels it uses; its Request
// completes when the last of them finishes. The first error on any channel
// aborts the communicator, so no channel (and no peer) waits for a partner
// that has already failed.
#include <pthread.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <deque>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>

#include "algo/pair.h"
#include "algo/ring.h"
#include "algo/tree.h"
#include "base/bytes.h"
#include "base/cycles.h"
#include "base/log.h"
#include "base/params.h"
#include "bootstrap/bootstrap_impl.h"
#include "comm/settings.h"
#include "kernels/reduce.h"
#include "ringmaster/comm.h"
#include "ringmaster/topology.h"
#include "ringmaster/tuner.h"
#include "transport/link.h"
#include "transport/offer.h"
#include "transport/ofi/ofi.h"
#include "transport/shm/shm.h"
#include "transport/socket/socket_connection.h"
#include "tune/cache.h"

namespace ringmaster {

using Clock = std::chrono::steady_clock;

struct Request::State {
  std::atomic<int> remaining{0};           // parts (channels) still running
  std::atomic<std::uint32_t> finished{0};  // 1: every part done, status final (a futex word)
  std::atomic<bool> sleeping{false};       // a waiter sleeps (or is about to) on `finished`
  std::atomic<bool> failed{false};         // a failed part has written `status`
  Status status;
  std::function<void(const Status&)> on_done;  // runs once, before waiters wake
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
    finished.store(1, std::memory_order_seq_cst);
    // A waiter sets `sleeping` before it checks `finished` (both seq_cst):
    // either it saw `finished`, or this sees `sleeping` and wakes it (its
    // futex wait returns at once if `finished` changed before it slept).
    if (sleeping.load(std::memory_order_seq_cst)) finished.notify_all();
    return true;
  }
};

namespace {
void start_waiting_work();
}  // namespace

void Request::wait() const {
  if (!state_) return;
  if (state_->help != nullptr) {
    while (state_->finished.load(std::memory_order_acquire) == 0 && state_->help(state_->channel)) {
    }
  }
  if (state_->finished.load(std::memory_order_acquire) == 0) {
    start_waiting_work();
    state_->sleeping.store(true, std::memory_order_seq_cst);
    while (state_->finished.load(std::memory_order_seq_cst) == 0)
      state_->finished.wait(0, std::memory_order_seq_cst);
  }
  if (!state_->status.ok()) throw Error(state_->status);
}

bool Request::test() const {
  if (!state_) return true;
  if (state_->finished.load(std::memory_order_acquire) != 0) return true;
  if (state_->kick != nullptr) state_->kick(state_->channel);  // a caller that polls is not going to run it
  return false;
}

Status Request::status() const {
  if (!state_ || state_->finished.load(std::memory_order_acquire) == 0) return {};
  return state_->status;
}

namespace {

// CPUs online on this host. Not this process's affinity mask: ranks bound
// one to a CPU each see a single CPU there, yet none waits for another's.
int usable_cpus() {
  return std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
}

struct Channel {
  int index = 0;
  transport::RingLink link;
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

  void run(int rank) {
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

  // Runs the channel's next task on the calling thread when nobody runs
  // one: the parked one, else the first queued; false when there was
  // nothing to take.
  bool run_next_here() {
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
};

// Channels holding a small collective that waits for its caller (see
// submit). Before any thread of ours sleeps they are handed to their
// progress threads: the caller may be the one about to sleep, on another
// communicator, and its peers would wait for that collective meanwhile.
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

void forget_waiting(Channel* c) {
  std::lock_guard lock(waiting_mutex);
  std::erase(waiting_channels, c);
  c->waiting_listed = false;
  waiting_count.store(static_cast<int>(waiting_channels.size()));
}

constexpr std::uint32_t kChannelHelloMagic = 0x4348414E;      // "CHAN"
constexpr std::uint32_t kMeshConnection = 0xFFFF;             // hello's channel field for a direct connection
constexpr std::uint32_t kExtraSocketHelloMagic = 0x534F434B;  // "SOCK": a ring connection's further socket

}  // namespace

struct Communicator::Impl {
  std::unique_ptr<Bootstrap> bootstrap;
  int rank = 0;
  int nranks = 1;
  int min_channels = 1;
  int max_channels = 2;
  std::optional<tune::Tuner> tuner;
  // What the tuner picked per (collective, bytes); asked once per size.
  struct Choice {
    Algorithm algorithm = Algorithm::ring;
    Protocol protocol = Protocol::simple;
    int channels = 1;
  };
  using Choices = std::map<std::pair<Collective, std::size_t>, Choice>;
  Choices choices;
  // What NCCL_ALGO / NCCL_PROTO (or the options) allow, and per select()
  // (algorithm and protocol index + 1, 0 for none) the tuner narrowed
  // further and its picks: perf --candidates switches between them call
  // by call, and each decides a size once.
  tune::Selection algorithms, protocols;
  struct Narrowed {
    std::optional<tune::Tuner> tuner;
    Choices choices;
  };
  std::map<std::pair<int, int>, Narrowed> narrowed;
  Narrowed* selected = nullptr;  // none: the tuner as init made it
  std::optional<std::pair<std::pair<Collective, std::size_t>, Choice>> last_choice;
  std::function<void(const tune::Decision&)> on_decision;
  // The double binary trees: what they span (node_of), and per root.
  std::vector<int> tree_node_of;
  std::map<int, algo::DoubleTree> trees;
  std::size_t buffsize = 4 << 20;
  std::chrono::milliseconds timeout{60000};
  std::chrono::microseconds spin{50};
  std::size_t inline_bytes = 65536;  // collectives up to this size may run on the calling thread
  std::size_t pair_bytes = 16384;    // 2-rank all_reduce up to this size: one whole-input exchange
  std::function<void(const CollectiveRecord&)> on_collective;
  std::vector<std::unique_ptr<Channel>> channels;
  std::vector<ConnectionInfo> connection_infos;
  std::optional<bool> shared_memory;  // CommOptions' override of NCCL_SHM_DISABLE
  std::string net;                    // NCCL_NET, lower case: "", "socket" or "ofi"
  std::atomic<bool> aborted{false};
  // The first failed collective part is logged; once it has been, every
  // later one (after an abort: each queued call) is only counted, and the
  // count logged once at the end. Millions of queued calls made millions
  // of lines and a slow exit.
  std::atomic<bool> failure_logged{false};
  std::atomic<std::uint64_t> failures_unlogged{0};
  std::uint64_t next_seq = 0;
  // Point-to-point messages are numbered per pair and direction, so they
  // are checked without involving the other ranks' sequence.
  std::vector<std::uint64_t> p2p_sent, p2p_received;

  ~Impl() {
    for (auto& c : channels) {
      forget_waiting(c.get());
      c->hand_off_parked();  // a collective nobody waited for still runs
      {
        std::lock_guard lock(c->mutex);
        c->stopping = true;
      }
      c->wake.notify_all();
    }
    for (auto& c : channels) {
      if (c->thread.joinable()) c->thread.join();
    }
    if (const auto n = failures_unlogged.load(); n > 0) {
      RM_WARN(coll, "{} more collective part(s) failed after the first failure (not logged one by one)", n);
    }
  }

  void abort() {
    if (aborted.exchange(true)) return;
    for (auto& c : channels)
      c->link.shutdown();
  }

  Choice choose(Collective collective, std::size_t bytes) {
    // A training loop calls the same collective and size over and over:
    // the last answer is kept beside the map.
    if (last_choice && last_choice->first == std::make_pair(collective, bytes)) return last_choice->second;
    const auto key = std::make_pair(collective, bytes);
    Choices& known = selected ? selected->choices : choices;
    if (auto it = known.find(key); it != known.end()) {
      last_choice = *it;
      return it->second;
    }
    const tune::Decision d = (selected ? *selected->tuner : *tuner).decide(collective, bytes);
    const auto& pick = d.pick();
    if (on_decision) on_decision(d);
    if (known.size() > 4096) known.clear();
    const Choice choice{pick.algorithm, pick.protocol, pick.channels};
    known[key] = choice;
    last_choice = std::make_pair(key, choice);
    return choice;
  }

  const algo::DoubleTree& tree_for(int root) {
    auto it = trees.find(root);
    if (it == trees.end()) it = trees.emplace(root, algo::build_double_tree(rank, tree_node_of, root)).first;
    return it->second;
  }

  // A collective's request state and its bookkeeping; JobOf adds its work
  // in the same allocation. Its queued parts hold it by a plain pointer (a
  // closure small enough for std::function to keep without allocating):
  // the job keeps itself alive until its last part has finished.
  struct Job : Request::State {
    Impl* impl = nullptr;
    algo::RingOp op;
    int nch = 1;
    std::shared_ptr<Job> self;

    // A parked job (see submit) is a small collective: channel 0 alone.
    static void run_parked(void* job) {
      auto* parked = static_cast<Job*>(job);
      parked->run(*parked->impl->channels[0], 0);
    }

    void run(Channel& channel, int c) {
      Status status;
      try {
        if (impl->aborted) throw Error(ErrorCategory::peer, "the communicator was aborted");
        execute(channel, c);
        channel.link.flush();
      } catch (const Error& e) {
        status = e.status();
        if (!impl->failure_logged.exchange(true, std::memory_order_relaxed)) {
          RM_WARN(coll, "channel {}: {} #{} failed: {}", c, name_of(op.collective), op.seq, e.what());
        } else {
          impl->failures_unlogged.fetch_add(1, std::memory_order_relaxed);
        }
        impl->abort();
      } catch (const std::exception& e) {
        status = Status(ErrorCategory::internal, e.what());
        impl->abort();
      }
      // The channel is free before the waiter wakes: a caller that wakes
      // and submits its next small collective at once must find it idle
      // and run it itself, not queue it behind a task that is only
      // finishing (its thread preempted by the waiter on a shared core),
      // which would hand every later collective to the progress thread.
      // Work that came while this ran goes to the progress thread (a
      // caller that runs this task itself does not run later ones).
      channel.release();
      // The last part lets go of the job, after its last use of it.
      std::shared_ptr<Job> last;
      if (finish_part(status)) last = std::move(self);
    }

   protected:
    Job() = default;
    ~Job() = default;
    // Part c of nch of the collective, on `channel`.
    virtual void execute(Channel& channel, int c) = 0;
  };

  // Work is called as work(channel, index, nchannels, op).
  template <class Work>
  struct JobOf final : Job {
    explicit JobOf(Work&& w) : work(std::move(w)) {}
    Work work;
    void execute(Channel& channel, int c) override { work(channel, c, nch, op); }
  };

  // Splits a collective of `bytes` across channels and queues
  // work(channel, index, nchannels, op) on each: one allocation a call.
  template <class Work>
  Request submit(Collective collective, std::size_t bytes, DataType type, RedOp op, int root, Work work,
                 int forced_channels = 0) {
    return start(std::make_shared<JobOf<Work>>(std::move(work)), collective, bytes, type, op, root, forced_channels);
  }

  Request start(std::shared_ptr<Job> job, Collective collective, std::size_t bytes, DataType type, RedOp op, int root,
                int forced_channels) {
    algo::RingOp& ring_op = job->op;
    ring_op.collective = collective;
    ring_op.seq = next_seq++;
    ring_op.type = type;
    ring_op.op = op;
    ring_op.root = root;
    Choice choice = choose(collective, bytes);
    if (forced_channels > 0) choice.channels = forced_channels;
    ring_op.algorithm = choice.algorithm;
    const Protocol protocol = choice.protocol;
    ring_op.protocol = protocol;
    const std::size_t es = size_of(type);
    // LL moves a ring step in one piece. A tree's halves go in slots under
    // every protocol: a tree level under LL in one piece (megabytes in one
    // frame to each child) left loopback TCP reordering and retransmitting
    // for the calls after it.
    const bool whole = protocol == Protocol::ll && choice.algorithm == Algorithm::ring;
    ring_op.slot_bytes = whole ? 0 : std::max(es, (buffsize / 8) / es * es);
    // Trees run on channel 0, over its direct connections.
    const int nch = choice.algorithm == Algorithm::tree ? 1 : choice.channels;
    job->impl = this;
    job->nch = nch;
    job->remaining = nch;
    job->self = job;
    // The telemetry record, when someone takes it (a clock read and a
    // closure less per call otherwise).
    if (on_collective) {
      const auto start = Clock::now();
      job->on_done = [this, ring_op, bytes, protocol, nch, start](const Status& status) {
        if (status.ok()) {
          on_collective(
              {ring_op.seq, ring_op.collective, bytes, ring_op.algorithm, protocol, nch, Clock::now() - start});
        }
      };
    }
    // A small collective on an idle channel waits for its caller to wait
    // for it (or test it, or issue the next one) and then runs on the
    // caller's thread: the progress thread, woken for it, would cost two
    // thread wake-ups, tens of microseconds on a VM, more than the
    // transfer. Work behind other work goes to the progress thread.
    const bool lazy = nch == 1 && bytes <= inline_bytes;
    Job* const raw = job.get();
    if (lazy) {
      Channel& channel = *channels[0];
      job->channel = &channel;
      job->help = [](void* channel) { return static_cast<Channel*>(channel)->run_next_here(); };
      job->kick = [](void* channel) { static_cast<Channel*>(channel)->hand_off_parked(); };
      // Idle: claimed and parked without a lock. The second look at the
      // queue catches a parked task handed off just before the claim.
      if (channel.queued.load(std::memory_order_seq_cst) == 0 && channel.claim()) {
        if (channel.queued.load(std::memory_order_seq_cst) == 0) {
          channel.parked.store(raw, std::memory_order_seq_cst);
          if (!channel.waiting_listed.load(std::memory_order_seq_cst)) {
            // Once: a caller that runs its collectives itself never
            // sleeps, so nothing would empty the list.
            std::lock_guard waiting(waiting_mutex);
            if (!channel.waiting_listed.load(std::memory_order_relaxed)) {
              waiting_channels.push_back(&channel);
              channel.waiting_listed.store(true, std::memory_order_seq_cst);
              waiting_count.store(static_cast<int>(waiting_channels.size()));
              parked_watch().listed();
            }
          }
          return Request(std::move(job));
        }
        channel.release();
      }
    }
    // Behind other work: an earlier small collective still waiting for its
    // caller goes to the progress thread ahead of this one.
    channels[0]->hand_off_parked();
    for (int c = 0; c < nch; ++c) {
      channels[static_cast<std::size_t>(c)]->enqueue(
          [raw, c] { raw->run(*raw->impl->channels[static_cast<std::size_t>(c)], c); });
    }
    return Request(std::move(job));
  }

  // Work that runs whole on channel 0 (direct connections). Point-to-point
  // calls do not take a collective sequence number: other ranks need not
  // make them.
  template <class Work>
  Request submit_single(Collective collective, std::size_t bytes, DataType type, Work work, bool numbered = true) {
    auto request = submit(
        collective, bytes, type, RedOp::sum, 0,
        [work = std::move(work)](Channel& ch, int, int, const algo::RingOp& op) { work(ch, op); },
        /*channels=*/1);
    if (!numbered) --next_seq;  // give back the number submit() took
    return request;
  }

  algo::RingContext context(Channel& c) { return algo::RingContext{c.link, rank, nranks, c.scratch}; }

  // TOPOLOGY: which hosts the ranks are on, the node's hardware when a
  // topology file is given (NCCL_TOPO_FILE) or a dump is asked for
  // (RINGMASTER_TOPO_DUMP_FILE, written by rank 0), and the channel rings.
  void describe_topology() {
    bootstrap->run_stage(Stage::topology, [&] {
      const auto& peers = bootstrap->peers();
      std::vector<std::string> hosts;
      for (const auto& p : peers) {
        if (std::find(hosts.begin(), hosts.end(), p.host) == hosts.end()) hosts.push_back(p.host);
      }
      std::string detail = fmt::format("{} rank{} on {} host{}", nranks, nranks == 1 ? "" : "s", hosts.size(),
                                       hosts.size() == 1 ? "" : "s");
      const auto file = param_env(Param::TopoFile);
      const auto dump = param_env(Param::TopoDumpFile);
      if (file || (dump && rank == 0)) {
        std::optional<topo::Topology> t;
        try {
          t = file ? topo::Topology::load_file(*file, topo::LoadOptions{"/sys"}) : topo::Topology::discover();
        } catch (const Error& e) {
          auto f = bootstrap->failure(Stage::topology, e.status().message());
          f.category = e.category();
          f.hint =
              "NCCL_TOPO_FILE must name an NCCL topology XML or hwloc XML file readable on every rank; "
              "`ringmaster-cli topo show --file FILE` shows what is wrong with it.";
          throw StageError(f);
        }
        detail += "; " + t->summary();
        RM_INFO(graph, "Topology {}", t->summary());
        if (dump && rank == 0) {
          std::FILE* out = std::fopen(dump->c_str(), "w");
          const std::string xml = t->to_nccl_xml();
          const bool written = out && std::fwrite(xml.data(), 1, xml.size(), out) == xml.size();
          if (out) std::fclose(out);
          if (!written) {
            throw Error(ErrorCategory::config,
                        fmt::format("RINGMASTER_TOPO_DUMP_FILE={}: cannot write: {}", *dump, std::strerror(errno)));
          }
          detail += "; written to " + *dump;
        }
      }
      // CPU ranks: every channel's ring is the rank order.
      std::string ring;
      for (int r = 0; r < nranks; ++r)
        ring += fmt::format("{}{}", r ? " " : "", r);
      for (const auto& c : channels)
        RM_INFO(graph, "Channel {:02d} : {}", c->index, ring);
      return detail;
    });
  }

  // Hop latency and bandwidth of this communicator's links, measured
  // by every rank at once on channel 0's ring (a step as the ring takes
  // it: all ranks sending and receiving), then agreed on with an
  // all_reduce(max) so every rank builds the same model and picks the same
  // candidates. Without calibration the RINGMASTER_TUNE_* values are used.
  tune::LinkModel calibrate(tune::Shape& shape) {
    std::string& source = shape.source;
    tune::LinkModel link = shape.intra;  // socket_shape's, with the RINGMASTER_TUNE_* figures
    // Per protocol (LL, LL128, Simple): shared memory lays each out its own way.
    double hop[3] = {link.hop_latency_us[0], link.hop_latency_us[1], link.hop_latency_us[2]};
    double share[3] = {link.protocol_efficiency[0], link.protocol_efficiency[1], link.protocol_efficiency[2]};
    double tree_hop[3] = {0, 0, 0};  // not measured: the tree's factor times a hop
    double gbs = link.bandwidth_gbs;
    double gbs_all = link.max_bandwidth_gbs;
    double tree_share = shape.tree_efficiency;
    // The ring's bandwidth over gbs and the tree's share at each of
    // tune::kCalibrationSizes; empty curves unless measured.
    constexpr int kPoints = tune::kCalibrationPoints;
    double factor[kPoints] = {};
    double tree_share_at[kPoints] = {};
    bool by_size = false;
    source = "defaults (RINGMASTER_TUNE_HOP_US, RINGMASTER_TUNE_GBS)";
    // What carries this rank's links ("shm", "ofi", "socket" or a mix such
    // as "shm+socket"): the figures below are measured over them, so the
    // cache keeps them apart.
    link.transport.clear();
    for (const char* kind : {"SHM", "OFI", "SOCKET"}) {
      const bool used = std::any_of(connection_infos.begin(), connection_infos.end(),
                                    [&](const auto& c) { return c.transport == kind; });
      if (!used) continue;
      if (!link.transport.empty()) link.transport += '+';
      for (const char* k = kind; *k != '\0'; ++k)
        link.transport += static_cast<char>(std::tolower(*k));
    }
    if (link.transport.empty()) link.transport = "socket";
    // LL128's lines need every link to be shared memory; sockets and
    // libfabric carry a byte stream.
    link.ll128 = link.transport == "shm" || connection_infos.empty();
    constexpr int kSimple = static_cast<int>(Protocol::simple);
    if (nranks > 1) {
      // Every rank must offer LL128 alike, or they would pick different
      // protocols: only when every rank's links are all shared memory.
      auto ctx = context(*channels[0]);
      algo::RingOp agree;
      agree.collective = Collective::barrier;
      agree.seq = ~std::uint64_t{0} - 5;
      agree.type = DataType::int32;
      agree.op = RedOp::min;
      std::int32_t lines = link.ll128 ? 1 : 0;
      algo::all_reduce(ctx, agree, reinterpret_cast<const std::byte*>(&lines), reinterpret_cast<std::byte*>(&lines), 1);
      link.ll128 = lines == 1;
    }
    if (param_int(Param::Calibrate) != 0 && nranks > 1) {
      const auto started = Clock::now();
      auto ctx = context(*channels[0]);
      algo::RingOp sync;
      sync.collective = Collective::barrier;
      sync.seq = ~std::uint64_t{0} - 2;
      std::byte token{};
      // Everyone here first (a zero-byte all_reduce), so no rank times its
      // neighbours' start-up.
      algo::all_reduce(ctx, sync, &token, &token, 0);
      // Rank 0 offers a calibration of this very shape from the cache;
      // everyone takes it, or everyone measures.
      const std::string cache = tune::calibration_cache_path();
      std::vector<std::string> hosts;
      for (const auto& p : bootstrap->peers())
        hosts.push_back(p.host);
      const std::string key =
          fmt::format("{} ranks={} hosts={} channels={} buffsize={} trees={}", link.transport, nranks,
                      fmt::join(hosts, ","), channels.size(), buffsize, param_string(Param::TreeNodes));
      double offer[14 + 2 * kPoints] = {};
      if (rank == 0) {
        if (const auto c = tune::load_calibration(cache, key, std::chrono::hours(1))) {
          offer[0] = 1, offer[1] = c->hop_us[0], offer[2] = c->hop_us[1], offer[3] = c->hop_us[2];
          offer[4] = c->gbs, offer[5] = c->gbs_all, offer[6] = c->tree_share;
          offer[7] = static_cast<double>(c->measured_at);
          offer[8] = c->share[0], offer[9] = c->share[1], offer[10] = c->share[2];
          offer[11] = c->tree_hop_us[0], offer[12] = c->tree_hop_us[1], offer[13] = c->tree_hop_us[2];
          std::copy(c->bandwidth_factor, c->bandwidth_factor + kPoints, offer + 14);
          std::copy(c->tree_share_by_size, c->tree_share_by_size + kPoints, offer + 14 + kPoints);
        }
      }
      algo::RingOp offer_op = sync;
      offer_op.seq = ~std::uint64_t{0} - 4;
      offer_op.type = DataType::fp64;
      offer_op.root = 0;
      algo::broadcast(ctx, offer_op, reinterpret_cast<std::byte*>(offer), std::size(offer));
      // The collective itself, timed in batches (ranks run in lock step,
      // so a batch amortises when each started): small all_reduces give
      // the hop latency (2(n-1) steps each), 2 MiB ones the bandwidth of
      // a step beyond that latency.
      const double n = nranks;
      algo::RingOp op_small = sync;
      op_small.seq = ~std::uint64_t{0} - 3;
      op_small.type = DataType::fp32;
      float value[2] = {1, 2};
      auto small = [&] {
        algo::all_reduce(ctx, op_small, reinterpret_cast<std::byte*>(value), reinterpret_cast<std::byte*>(value), 2);
      };
      // First a warm-up of small all_reduces for kWarmUp (rank 0's clock
      // decides, the others follow its answer): a rank's first tens of
      // milliseconds after start run several times slower on a VM, and
      // the figures below would carry that.
      constexpr auto kWarmUp = std::chrono::milliseconds(30);
      {
        algo::RingOp go_op = op_small;
        go_op.type = DataType::int32;
        go_op.op = RedOp::max;
        for (std::int32_t go = 1; go != 0;) {
          go = rank == 0 && Clock::now() - started < kWarmUp ? 1 : 0;
          algo::all_reduce(ctx, go_op, reinterpret_cast<std::byte*>(&go), reinterpret_cast<std::byte*>(&go), 1);
        }
      }
      auto batch_from_here = [&](const std::function<void()>& f, int rounds) {
        const auto t = Clock::now();
        for (int i = 0; i < rounds; ++i)
          f();
        return std::chrono::duration<double, std::micro>(Clock::now() - t).count() / rounds;
      };
      // Every timed batch starts from a zero-byte all_reduce, so the ranks
      // start it together. Without it a rank that left the previous batch
      // early (a tree's root finishes before its leaves) timed its wait for
      // the others as part of the next batch: the ring batches after tree
      // batches came out slow, and the tree's share at 1 MiB read 1.9-4.5
      // on the four ranks of one calibration and 2.9-10.6 in the next.
      auto batch = [&](const std::function<void()>& f, int rounds) {
        algo::all_reduce(ctx, sync, &token, &token, 0);
        return batch_from_here(f, rounds);
      };
      // One call timed as a loop of it runs: after the common start a
      // lead-in call, then the timed one, which starts where the lead-in
      // left each rank (a tree's root leaves a call before its leaves).
      // Timed straight from the common start, a 1 MiB ring at 4 ranks
      // over sockets read 0.9 GB/s where back-to-back calls ran at 1.3.
      auto after_lead_in = [&](const std::function<void()>& f, int calls) {
        algo::all_reduce(ctx, sync, &token, &token, 0);
        f();
        return batch_from_here(f, calls);
      };
      // The median of several batches: the fastest one is where every
      // rank happened to run at once, which with more ranks than CPUs
      // is the exception, and the model should predict the rule.
      auto median_of = [](std::vector<double> v) {
        std::sort(v.begin(), v.end());
        return v[v.size() / 2];
      };
      // Small calls one by one after a lead-in, the median call: a batch's
      // mean carries every call that waited for a rank the scheduler had
      // parked (4 ranks on 2 CPUs), and the means put the 4-rank hop at
      // 1.2-1.4x what single calls in a loop take, the time a training
      // loop sees and perf reports.
      auto median_call = [&](const std::function<void()>& f, int calls) {
        algo::all_reduce(ctx, sync, &token, &token, 0);
        f();
        std::vector<double> times;
        for (int i = 0; i < calls; ++i)
          times.push_back(batch_from_here(f, 1));
        return median_of(std::move(times));
      };
      auto typical = [&](const std::function<void()>& f, int calls, int batches) {
        std::vector<double> times;
        for (int i = 0; i < batches; ++i)
          times.push_back(median_call(f, calls));
        return median_of(std::move(times));
      };
      // A calibration cached while the machine was busy (a build beside
      // it) would stay for the hour: rank 0 times the small all_reduce
      // now, and a cached hop over twice what it sees is measured anew.
      // (Measuring anew also when the cached hop was 1.5x faster made a
      // busy machine measure at most inits: the shared-memory test matrix
      // of 1-3 ranks took 647 s instead of 160.)
      bool cached = offer[0] == 1;
      if (cached) {
        op_small.protocol = Protocol::simple;
        const double hop_now = typical(small, 8, 5) / (2 * (n - 1));
        algo::RingOp stale_op = op_small;
        stale_op.type = DataType::int32;
        stale_op.op = RedOp::max;
        std::int32_t stale = rank == 0 && offer[3] > 2 * hop_now ? 1 : 0;
        algo::all_reduce(ctx, stale_op, reinterpret_cast<std::byte*>(&stale), reinterpret_cast<std::byte*>(&stale), 1);
        if (stale != 0) {
          cached = false;
          if (rank == 0) {
            RM_INFO(tuning,
                    "cached calibration ({:.1f} us a hop) is over twice what the links take now ({:.1f} us): "
                    "measuring anew",
                    offer[3], hop_now);
          }
        }
      }
      if (cached) {
        channels[0]->link.flush();
        hop[0] = offer[1], hop[1] = offer[2], hop[2] = offer[3];
        gbs = offer[4], gbs_all = offer[5], tree_share = offer[6];
        share[0] = offer[8], share[1] = offer[9], share[2] = offer[10];
        tree_hop[0] = offer[11], tree_hop[1] = offer[12], tree_hop[2] = offer[13];
        std::copy(offer + 14, offer + 14 + kPoints, factor);
        std::copy(offer + 14 + kPoints, offer + 14 + 2 * kPoints, tree_share_at);
        by_size = true;
        const auto now =
            std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
                .count();
        source = fmt::format("calibration of this shape measured {} s ago, kept in {}",
                             now - static_cast<std::int64_t>(offer[7]), cache);
      } else {
        // A small tree all_reduce per protocol too: its levels cost what
        // the ring's hops do not tell (a rank waits on two children, and
        // the two trees' steps interleave).
        const auto& small_tree = tree_for(-1);
        const int tree_depth = small_tree.depth_intra + small_tree.depth_inter;
        algo::RingOp op_small_tree = op_small;
        op_small_tree.algorithm = Algorithm::tree;
        auto small_by_tree = [&] {
          algo::tree_all_reduce(ctx, small_tree, op_small_tree, reinterpret_cast<std::byte*>(value),
                                reinterpret_cast<std::byte*>(value), 2);
        };
        // Ring and tree batches of every protocol take turns, round after
        // round, so all of them see the same spells of the machine (one
        // protocol's batches all in a quiet spell would make it look the
        // faster one, as the bandwidth shares below once did).
        auto measured_protocol = [&](int p) { return p != static_cast<int>(Protocol::ll128) || link.ll128; };
        auto use = [&](int p) { op_small.protocol = op_small_tree.protocol = static_cast<Protocol>(p); };
        for (int p = 0; p < 3; ++p) {
          if (!measured_protocol(p)) continue;
          use(p);
          batch(small, 5);
          if (tree_depth > 0) batch(small_by_tree, 5);
        }
        std::vector<double> ring_times[3], tree_times[3];
        for (int i = 0; i < 7; ++i) {
          for (int p = 0; p < 3; ++p) {
            if (!measured_protocol(p)) continue;
            use(p);
            ring_times[p].push_back(median_call(small, 8));
            if (tree_depth > 0) tree_times[p].push_back(median_call(small_by_tree, 8));
          }
        }
        // Simple's ring figure sets the scale; every other figure counts as
        // its ratio to the Simple ring figure of its own round (the median
        // of those ratios): a spell of the machine that slows one round
        // slows both sides of its ratios, where medians taken apart could
        // come from different spells (a tree level once measured 1.35
        // ring hops in one calibration and 0.7 in the next).
        auto paired = [&](const std::vector<double>& times) {
          std::vector<double> ratios;
          for (std::size_t i = 0; i < times.size(); ++i)
            ratios.push_back(times[i] / ring_times[kSimple][i]);
          return median_of(std::move(ratios)) * median_of(ring_times[kSimple]);
        };
        for (int p = 0; p < 3; ++p) {
          if (!measured_protocol(p)) continue;
          hop[p] = paired(ring_times[p]) / (2 * (n - 1));
          if (tree_depth > 0) tree_hop[p] = paired(tree_times[p]) / (2 * tree_depth);
        }
        if (!link.ll128) {  // not a candidate; figures all the same
          hop[1] = hop[kSimple];
          tree_hop[1] = tree_hop[kSimple];
        }
        op_small.protocol = Protocol::simple;
        // Ring and tree at tune::kCalibrationSizes (64 KiB to 16 MiB),
        // taking turns, medians of several tries (the faster of two at 16
        // MiB put the ring there at 0.77-0.85 of its time in runs, and the
        // tuner took it over trees 1.2-1.4x faster): the bandwidth by size
        // (CPU ranks copy and add faster per byte while the buffers stay in
        // cache: one figure from 4 MiB predicted 16-64 MiB at 0.6-0.7 of
        // their time and 0.5-1 MiB at 1.2-1.7; with 1 MiB the smallest
        // size, the rings at 256-512 KiB ran in half their predicted time
        // over sockets, and the tree at 2 MiB took 2.7x its 1 MiB time
        // where log(bytes) between 1 and 4 MiB said 2) and the tree's share
        // of it through the model's own formula (twice the buffer plus one
        // piece of fill per level and pass). From 64 KiB: with 256 KiB the
        // smallest, sizes below it took its figures, and over sockets at 4
        // ranks the trees, all latency up to 64 KiB (95-120 us from 8 B),
        // were predicted at 1.35-1.7x their time from 16 to 256 KiB.
        constexpr std::size_t kBig = 4 << 20;
        constexpr std::size_t kLargest = static_cast<std::size_t>(tune::kCalibrationSizes[kPoints - 1]);
        std::vector<std::byte> big(kLargest), big_out(kLargest);
        algo::RingOp op_big = op_small;
        op_big.slot_bytes = buffsize / 8 / 4 * 4;
        const double steps = 2 * (n - 1) * hop[kSimple];
        const auto& tree = tree_for(-1);
        algo::RingOp op_tree = op_big;
        op_tree.algorithm = Algorithm::tree;
        const double depth = tree.depth_intra + tree.depth_inter;
        auto ring_at = [&](std::size_t bytes) { algo::all_reduce(ctx, op_big, big.data(), big_out.data(), bytes / 4); };
        auto tree_at = [&](std::size_t bytes) {
          algo::tree_all_reduce(ctx, tree, op_tree, big.data(), big_out.data(), bytes / 4);
        };
        // Scratch and socket buffers grow on first use: each try's lead-in
        // call takes that. A size whose calls would take over kCallBudget
        // (a slow link: 16 MiB at 40 Mbit/s takes seconds a call) is not
        // measured; it and the sizes above keep the last measured figures.
        // The ranks agree on it from the slowest rank's estimate.
        constexpr double kCallBudgetUs = 250e3;
        double ring_gbs[kPoints] = {};
        int measured_points = 0;
        for (int i = 0; i < kPoints; ++i) {
          const auto bytes = static_cast<std::size_t>(tune::kCalibrationSizes[i]);
          if (i > 0) {
            const double b = tune::kCalibrationSizes[i];
            const double ring_us = b * 2 * (n - 1) / n / (ring_gbs[i - 1] * 1e3) + steps;
            const double tree_us = ring_us / std::max(tree_share_at[i - 1], 0.1);
            std::int32_t go = std::max(ring_us, tree_us) <= kCallBudgetUs ? 1 : 0;
            algo::RingOp go_op = op_small;
            go_op.type = DataType::int32;
            go_op.op = RedOp::min;
            algo::all_reduce(ctx, go_op, reinterpret_cast<std::byte*>(&go), reinterpret_cast<std::byte*>(&go), 1);
            if (go == 0) break;
          }
          measured_points = i + 1;
          std::vector<double> ring_tries, tree_tries;
          // Five tries up to 2 MiB, where a call takes a few milliseconds,
          // and up to 1 MiB each the mean of four calls (single calls of
          // 256 KiB, a few hundred microseconds on 2 CPUs shared by 4
          // ranks, put one rank's ring at 0.45 of the 4 MiB bandwidth and
          // another's at 1.8); three single calls above.
          const int tries = bytes <= (2u << 20) ? 5 : 3;
          const int calls = bytes <= (1u << 20) ? 4 : 1;
          // The first size's tries run twice, the first time unrecorded:
          // over shared memory at 4 ranks the first 25-35 tree calls of 64
          // KiB after the small ones took 600-870 us, then 60-80 us, as
          // perf and a loop find them (the tree's share came out 0.07-0.19
          // and the trees were predicted at 6-10x their time).
          for (int pass = i == 0 ? 0 : 1; pass < 2; ++pass) {
            ring_tries.clear();
            tree_tries.clear();
            for (int t = 0; t < tries; ++t) {
              ring_tries.push_back(after_lead_in([&] { ring_at(bytes); }, calls));
              tree_tries.push_back(after_lead_in([&] { tree_at(bytes); }, calls));
            }
          }
          const double b = static_cast<double>(bytes);
          // The time beyond the latency, but at least an eighth of the call:
          // at 64 KiB the latency is most of it, and a try that ran faster
          // than the small calls said must not read as endless bandwidth.
          auto beyond = [](double t, double latency) { return std::max(t - latency, t / 8); };
          auto ring_rate = [&](double t) { return b * 2 * (n - 1) / n / beyond(t, steps) / 1e3; };
          ring_gbs[i] = ring_rate(median_of(ring_tries));
          const double piece = std::min(b / 2, static_cast<double>(buffsize / 8));
          const double tree_moved = 2.0 * b + 2 * depth * piece;
          const double tree_latency = 2 * depth * tree_hop[kSimple];
          // The tree's share from each try's pair (a tree try and the ring
          // try next to it see the same spell of the machine), the median
          // of those: what decides between the two is their ratio, and
          // medians taken apart can come from different spells.
          std::vector<double> shares;
          for (std::size_t t = 0; t < tree_tries.size(); ++t) {
            const double tree_rate = tree_moved / beyond(tree_tries[t], tree_latency) / 1e3;
            shares.push_back(tree_rate / ring_rate(ring_tries[t]));
          }
          tree_share_at[i] = median_of(std::move(shares));
        }
        for (int i = measured_points; i < kPoints; ++i) {
          ring_gbs[i] = ring_gbs[measured_points - 1];
          tree_share_at[i] = tree_share_at[measured_points - 1];
        }
        if (measured_points < kPoints && rank == 0) {
          RM_INFO(tuning, "calibration stopped after {} bytes: larger calls would take over {:.0f} ms each",
                  tune::kCalibrationSizes[measured_points - 1], kCallBudgetUs / 1e3);
        }
        gbs = ring_gbs[tune::kReferencePoint];
        tree_share = tree_share_at[tune::kReferencePoint];
        for (int i = 0; i < kPoints; ++i)
          factor[i] = ring_gbs[i] / gbs;
        by_size = true;
        // All channels at once at 4 MiB, or at the largest size measured.
        const std::size_t all_bytes =
            std::min(kBig, static_cast<std::size_t>(tune::kCalibrationSizes[measured_points - 1]));
        const double moved = static_cast<double>(all_bytes) * 2 * (n - 1) / n;
        // Each protocol's share of Simple's bandwidth, at a size where
        // bytes count more than steps: over shared memory LL and LL128 move
        // their lines slower than the byte ring moves its bytes.
        {
          // The protocols take turns, several rounds, medians: three calls
          // each in a row once measured LL128 as fast as Simple at 4 ranks
          // on 2 CPUs (one quiet spell), where runs find it 2-3x slower.
          constexpr std::size_t kMid = 256 << 10;
          constexpr int kRounds = 5;
          auto run_mid = [&](int p) {
            algo::RingOp op_mid = op_big;
            op_mid.protocol = static_cast<Protocol>(p);
            if (op_mid.protocol == Protocol::ll) op_mid.slot_bytes = 0;
            algo::all_reduce(ctx, op_mid, big.data(), big_out.data(), kMid / 4);
          };
          auto measured = [&](int p) { return p != static_cast<int>(Protocol::ll128) || link.ll128; };
          std::vector<double> rounds[3];
          for (int p = 0; p < 3; ++p) {
            if (measured(p)) run_mid(p);
          }
          for (int r = 0; r < kRounds; ++r) {
            for (int p = 0; p < 3; ++p) {
              if (measured(p)) rounds[p].push_back(after_lead_in([&] { run_mid(p); }, 1));
            }
          }
          double t_mid[3] = {};
          for (int p = 0; p < 3; ++p) {
            if (measured(p)) t_mid[p] = median_of(rounds[p]);
          }
          const double simple_time = std::max(t_mid[kSimple] - 2 * (n - 1) * hop[kSimple], t_mid[kSimple] / 2);
          // At most what a line carries: over shared memory LL's lines hold
          // 8 bytes of data in 16, LL128's 120 in 128; over sockets and
          // libfabric LL is one eager frame of plain bytes, the line
          // Simple's (capped at 0.5 there too, the tuner kept sockets off
          // Ring/LL at 256 KiB-1 MiB, where it ran 1.3x faster than Simple).
          const bool lines = link.transport.find("shm") != std::string::npos;
          const double most_share[3] = {lines ? 0.5 : 1.0, 0.9375, 1.0};
          for (int p = 0; p < 3; ++p) {
            if (p == kSimple || t_mid[p] <= 0) continue;
            const double time = std::max(t_mid[p] - 2 * (n - 1) * hop[p], t_mid[p] / 2);
            share[p] = std::clamp(simple_time / time, 0.01, most_share[p]);
          }
          share[kSimple] = 1;
        }
        gbs_all = gbs;
        if (channels.size() > 1) {
          // Every channel at once, each on its own buffers.
          std::vector<double> times(channels.size());
          std::vector<std::exception_ptr> failed(channels.size());
          std::vector<std::thread> threads;
          for (std::size_t c = 0; c < channels.size(); ++c) {
            threads.emplace_back([&, c] {
              try {
                std::vector<std::byte> in(all_bytes), out(all_bytes);
                auto cc = context(*channels[c]);
                algo::all_reduce(cc, op_big, in.data(), out.data(), all_bytes / 4);
                // The median of three calls (two calls' mean once put two
                // channels at twice one's bandwidth at 8 ranks on 2 CPUs,
                // where they run no faster than one).
                std::vector<double> tries;
                for (int t = 0; t < 3; ++t) {
                  tries.push_back(
                      batch_from_here([&] { algo::all_reduce(cc, op_big, in.data(), out.data(), all_bytes / 4); }, 1));
                }
                times[c] = median_of(std::move(tries));
                // What this channel sent last must leave before its thread
                // does: nothing else drives this channel until init is over.
                channels[c]->link.flush();
              } catch (...) {
                failed[c] = std::current_exception();
              }
            });
          }
          for (auto& t : threads)
            t.join();
          for (const auto& f : failed) {
            if (f) std::rethrow_exception(f);
          }
          const double slowest = *std::max_element(times.begin(), times.end());
          gbs_all = moved * static_cast<double>(channels.size()) / std::max(slowest - steps, slowest / 2) / 1e3;
        }
        RM_INFO(
            tuning,
            "calibration on this rank: hop {:.1f}/{:.1f}/{:.1f} us (LL/LL128/Simple), tree level {:.1f}/{:.1f}/{:.1f} "
            "us, {:.3f} GB/s per channel at 4 MiB (LL {:.2f}, LL128 {:.2f} of it; x{:.2f} at 64K/256K/1M/2M/4M/16M), "
            "{:.3f} GB/s on all channels, tree at {:.2f} of the ring's bandwidth",
            hop[0], hop[1], hop[2], tree_hop[0], tree_hop[1], tree_hop[2], gbs, share[0], share[1],
            fmt::join(factor, "/x"), gbs_all, fmt::join(tree_share_at, "/"));
        // Every rank takes the median of all ranks' figures: the same
        // numbers everywhere, and one rank's scheduling hiccup does not count.
        constexpr int kFigures = 11 + 2 * kPoints;
        std::vector<double> all(kFigures * static_cast<std::size_t>(nranks));
        double* mine = all.data() + kFigures * rank;
        mine[0] = hop[0], mine[1] = hop[1], mine[2] = hop[2], mine[3] = gbs, mine[4] = gbs_all, mine[5] = tree_share;
        mine[6] = share[0], mine[7] = share[1];
        mine[8] = tree_hop[0], mine[9] = tree_hop[1], mine[10] = tree_hop[2];
        std::copy(factor, factor + kPoints, mine + 11);
        std::copy(tree_share_at, tree_share_at + kPoints, mine + 11 + kPoints);
        algo::RingOp gather_op = op_small;
        gather_op.type = DataType::fp64;
        gather_op.slot_bytes = 0;
        algo::all_gather(ctx, gather_op, reinterpret_cast<std::byte*>(all.data()), kFigures, kFigures * sizeof(double));
        auto median = [&](int field) {
          std::vector<double> v;
          for (int r = 0; r < nranks; ++r)
            v.push_back(all[static_cast<std::size_t>(kFigures * r + field)]);
          return median_of(std::move(v));
        };
        hop[0] = median(0), hop[1] = median(1), hop[2] = median(2);
        // The tree's share too: each rank times its call after a lead-in
        // call, as a loop runs them, so the ranks read one pace, a root
        // that left the lead-in early a little more of it, a leaf that
        // left late a little less. (The slowest rank's share fitted calls
        // timed from a common start; after a lead-in it put Tree/Simple
        // at 8 ranks at 1.2-1.5x its time from 1 MiB up.)
        gbs = median(3), gbs_all = median(4), tree_share = median(5);
        share[0] = median(6), share[1] = median(7);
        tree_hop[0] = median(8), tree_hop[1] = median(9), tree_hop[2] = median(10);
        for (int i = 0; i < kPoints; ++i) {
          factor[i] = median(11 + i);
          tree_share_at[i] = median(11 + kPoints + i);
        }
        channels[0]->link.flush();
        const double took = std::chrono::duration<double, std::milli>(Clock::now() - started).count();
        source = fmt::format("calibrated at init in {:.1f} ms (median of the ranks' figures)", took);
        if (rank == 0) {
          tune::Calibration c{
              {hop[0], hop[1], hop[2]},
              {share[0], share[1], share[2]},
              {tree_hop[0], tree_hop[1], tree_hop[2]},
              gbs,
              gbs_all,
              tree_share,
              {},
              {},
              std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
                  .count(),
              took};
          std::copy(factor, factor + kPoints, c.bandwidth_factor);
          std::copy(tree_share_at, tree_share_at + kPoints, c.tree_share_by_size);
          if (tune::store_calibration(cache, key, c)) source += "; kept in " + cache + " for an hour";
        }
      }
      for (auto& c : channels) {
        c->stats.bytes_sent = 0;
        c->stats.bytes_received = 0;
        c->stats.busy_ns = 0;
        c->stats.steps = 0;
        for (int p = 0; p < c->stats.peers; ++p) {
          c->stats.from_peer[static_cast<std::size_t>(p)].bytes = 0;
          c->stats.from_peer[static_cast<std::size_t>(p)].active_ns = 0;
          c->stats.from_peer[static_cast<std::size_t>(p)].total = 0;
        }
      }
    }
    std::copy(hop, hop + 3, link.hop_latency_us);
    std::copy(share, share + 3, link.protocol_efficiency);
    std::copy(tree_hop, tree_hop + 3, link.tree_hop_latency_us);
    link.bandwidth_gbs = gbs;
    link.max_bandwidth_gbs = std::max(gbs, gbs_all);
    shape.tree_efficiency = tree_share;
    if (by_size) {
      for (int i = 0; i < kPoints; ++i) {
        link.bandwidth_by_size.push_back({tune::kCalibrationSizes[i], factor[i]});
        shape.tree_efficiency_by_size.push_back({tune::kCalibrationSizes[i], tree_share_at[i]});
      }
    }
    return link;
  }

  // Every connection starts as a socket through the peer's bootstrap
  // listener. The opening rank offers shared memory when the peer looks
  // like it is on the same host (and creates the segment); the accepting
  // rank checks that it really is, maps the segment and answers. Offers go
  // out with the hellos and answers come back only after every rank has
  // accepted, so no rank waits on another that is itself still connecting.
  void connect_channels() {
    auto& b = bootstrap->impl();
    const int next = (rank + 1) % nranks;
    const int prev = (rank + nranks - 1) % nranks;
    const auto deadline = net::Clock::now() + b.config.bootstrap_timeout;
    // More ranks on this host than CPUs to run them: a rank spinning on a
    // step keeps the rank it waits for off the CPU, so spinning yields.
    const int ranks_here = static_cast<int>(
        std::count_if(b.peers.begin(), b.peers.end(), [&](const auto& p) { return p.host == b.peers[rank].host; }));
    const std::string yield = param_string(Param::SpinYield);
    if (yield != "auto" && yield != "0" && yield != "1") {
      auto f = bootstrap->failure(Stage::transport_connect,
                                  fmt::format("RINGMASTER_SPIN_YIELD={}: need auto, 0 or 1", yield));
      f.category = ErrorCategory::config;
      throw StageError(f);
    }
    const bool yield_while_spinning = yield == "auto" ? ranks_here > usable_cpus() : yield == "1";
    // A rank that yields while it spins gives its CPU to whoever can use
    // it, so it may spin for longer before it sleeps: a step that waits on
    // two ranks sharing a CPU often takes over 50 us, and each sleep costs
    // a wake-up of 20 us or more. With 4 ranks on 2 CPUs, 8 B all_reduce
    // single calls fell into modes 20 us apart (25, 33, 47, 67 us) and
    // their median jumped between them from one run to the next; spinning
    // for 1 ms, they sit at 31-33 us.
    const std::chrono::microseconds link_spin =
        yield_while_spinning && !param_env(Param::SocketSpin) ? std::chrono::microseconds(1000) : spin;
    // Nor is a CPU free for a progress thread to overlap a collective
    // with the caller's work: waking one only makes it wait for a CPU (and
    // preempt a rank that has one), so unless RINGMASTER_INLINE_BYTES says
    // otherwise every collective on one channel waits for its caller
    // (4 ranks on 2 CPUs, 256 KiB: 180-310 us a call handed over, 100 here).
    if (ranks_here > usable_cpus() && !param_env(Param::InlineBytes)) {
      inline_bytes = std::numeric_limits<std::size_t>::max();
    }
    (void)cycles::ns_per_tick();  // the steps' timer, measured now rather than in the first step
    for (auto& channel : channels) {
      channel->link.rank = rank;
      channel->link.timeout = timeout;
      channel->link.spin = link_spin;
      channel->link.yield_while_spinning = yield_while_spinning;
      channel->link.aborted = &aborted;
      channel->link.counters = &channel->stats;
      channel->stats.from_peer =
          std::make_unique<transport::ChannelStats::FromPeer[]>(static_cast<std::size_t>(nranks));
      channel->stats.peers = nranks;
    }
    if (nranks == 1) return;
    const bool shm_enabled = shared_memory.value_or(param_int(Param::ShmDisable) == 0);
    const auto fifo_bytes = static_cast<std::size_t>(std::max<std::int64_t>(4096, param_int(Param::ShmFifoBytes)));
    const auto& identity = transport::shm::host_identity();
    const auto nsocks = static_cast<std::uint32_t>(param_int(Param::NSocksPerChannel));
    if (nsocks < 1 || nsocks > 8) {
      auto f = bootstrap->failure(Stage::transport_connect,
                                  fmt::format("RINGMASTER_NSOCKS_PER_CHANNEL={}: need 1 to 8", nsocks));
      f.category = ErrorCategory::config;
      throw StageError(f);
    }
    // libfabric to other hosts: asked for (NCCL_NET=OFI, checked usable at
    // create), or by default when the provider is RDMA (efa, verbs).
    const std::string& interface = b.peers[rank].ifname;
    // libfabric is loaded (tens of ms) only when it may be used: asked for,
    // or by default when some peer is on another host.
    const bool other_hosts =
        std::any_of(b.peers.begin(), b.peers.end(), [&](const auto& p) { return p.host != b.peers[rank].host; });
    static const transport::ofi::Availability kNotLoaded{};
    const auto& fabric =
        net == "ofi" || (net.empty() && other_hosts) ? transport::ofi::availability(interface) : kNotLoaded;
    const bool ofi_wanted = net == "ofi" || (net.empty() && fabric.usable && fabric.rdma);
    if (net == "ofi" && !fabric.usable) {
      auto f = bootstrap->failure(Stage::transport_connect, "NCCL_NET=OFI but libfabric is unusable: " + fabric.why);
      f.category = ErrorCategory::config;
      const char* forced = std::getenv("FI_PROVIDER");
      f.hint = forced != nullptr && *forced != '\0'
                   ? fmt::format(
                         "FI_PROVIDER={} hides every other libfabric provider; unset it to let libfabric "
                         "choose (fi_info -l lists them), or unset NCCL_NET to run over sockets.",
                         forced)
               : fabric.providers.empty()
                   ? "libfabric lists no provider with RDM endpoints here; unset NCCL_NET to run over sockets."
                   : fmt::format(
                         "Providers here: {}. Set FI_PROVIDER to one of them, or unset NCCL_NET to run over "
                         "sockets.",
                         fmt::join(fabric.providers, ", "));
      throw StageError(f);
    }
    auto where = [&](int r) { return fmt::format("{}[{}]", r, b.peers[r].host); };
    auto connection_name = [&](std::uint32_t connection) {
      return connection == kMeshConnection ? std::string("p2p") : fmt::format("Channel {:02d}", connection);
    };

    // What this rank opened, until the answer says how it is carried.
    struct Opened {
      int peer;
      std::uint32_t connection;
      net::Socket socket;
      std::unique_ptr<transport::shm::Segment> segment;
      std::shared_ptr<transport::ofi::Endpoint> endpoint;
      transport::Peer* slot;
    };
    // An endpoint for a connection to another host, its address in `name`.
    auto open_endpoint = [&](int peer, char* name, std::uint32_t& length) {
      std::string why;
      auto e = transport::ofi::open_endpoint(interface, why);
      if (!e) {
        RM_WARN(init, "{} -> {}: no libfabric endpoint ({}), falling back to sockets", where(rank), where(peer), why);
        return e;
      }
      const std::string address = transport::ofi::endpoint_name(*e);
      if (address.size() > sizeof(transport::Offer::ofi_name)) {
        RM_WARN(init, "libfabric address of {} bytes does not fit the offer; sockets instead", address.size());
        return std::shared_ptr<transport::ofi::Endpoint>();
      }
      std::memcpy(name, address.data(), address.size());
      length = static_cast<std::uint32_t>(address.size());
      return e;
    };
    std::vector<Opened> opened;
    auto open_to = [&](int peer, std::uint32_t connection, transport::Peer* slot) {
      const auto address = net::SocketAddress::parse(b.peers[peer].address);
      net::Socket s;
      store::ConnectAttempts report;
      int err = store::connect_with_backoff({*address}, deadline, s, report);
      transport::Offer offer;
      offer.magic = transport::kOfferMagic;
      offer.shm_enabled = shm_enabled ? 1 : 0;
      offer.host_key = identity.key;
      std::unique_ptr<transport::shm::Segment> segment;
      if (err == 0 && shm_enabled && b.peers[peer].host == b.peers[rank].host) {
        try {
          segment = transport::shm::Segment::create(rank, peer, fifo_bytes);
          std::snprintf(offer.segment, sizeof(offer.segment), "%s", segment->name().c_str());
        } catch (const Error& e) {
          RM_WARN(init, "{} : {} -> {} cannot use shared memory, falling back to sockets: {}",
                  connection_name(connection), where(rank), where(peer), e.status().message());
          std::snprintf(offer.problem, sizeof(offer.problem), "%s", e.status().message().c_str());
        }
      }
      std::shared_ptr<transport::ofi::Endpoint> endpoint;
      // Offered beside a segment too: the peer may not take the segment.
      if (err == 0 && ofi_wanted) {
        endpoint = open_endpoint(peer, offer.ofi_name, offer.ofi_name_length);
        offer.ofi = endpoint ? 1 : 0;
      }
      offer.sockets = connection == kMeshConnection ? 1 : nsocks;
      const std::uint32_t hello[3] = {kChannelHelloMagic, static_cast<std::uint32_t>(rank), connection};
      if (err == 0) err = s.send_all(hello, sizeof(hello), deadline);
      if (err == 0) err = s.send_all(&offer, sizeof(offer), deadline);
      if (err != 0) {
        auto f = bootstrap->failure(Stage::transport_connect,
                                    connection == kMeshConnection
                                        ? fmt::format("cannot connect to rank {}", peer)
                                        : fmt::format("channel {}: cannot connect to rank {}", connection, peer));
        f.peer_rank = peer;
        f.remote_address = b.peers[peer].address;
        f.errno_text = net::errno_text(err);
        f.timeout = b.config.bootstrap_timeout;
        f.hint = "The bootstrap worked moments ago on the same port: rank " + std::to_string(peer) +
                 " probably died during init, or traffic between these two hosts is blocked. Check its log.";
        throw StageError(f);
      }
      s.set_nodelay();
      if (connection != kMeshConnection) s.set_buffer_sizes(4 << 20);
      opened.push_back({peer, connection, std::move(s), std::move(segment), std::move(endpoint), slot});
    };
    for (auto& channel : channels) {
      bootstrap->run_stage(Stage::transport_connect, [&] {
        open_to(next, static_cast<std::uint32_t>(channel->index), &channel->link.next);
        return fmt::format("channel {:02d} : {} -> {} connected to {}", channel->index, where(rank), where(next),
                           b.peers[next].address);
      });
    }
    // Direct connections for all_to_all and point-to-point: each rank
    // connects to every higher rank.
    auto& mesh = channels[0]->link.mesh;
    mesh.resize(static_cast<std::size_t>(nranks));
    for (int peer = rank + 1; peer < nranks; ++peer) {
      bootstrap->run_stage(Stage::transport_connect, [&] {
        open_to(peer, kMeshConnection, &mesh[static_cast<std::size_t>(peer)]);
        return fmt::format("p2p : {} -> {} connected to {}", where(rank), where(peer), b.peers[peer].address);
      });
    }
    // Connections on the bootstrap port that are not a rank's (no hello in
    // time, or one that does not fit): dropped and counted, so a port
    // scanner or a stale rank of an earlier job cannot stop init.
    struct StrayConnections {
      int count = 0;
      std::string last;
      void drop(net::Socket& socket, int err) {
        ++count;
        last = fmt::format("{} ({})", socket.peer_address().to_string(),
                           err == EPROTO ? std::string("not a channel hello of this job") : net::errno_text(err));
        RM_INFO(init, "dropped a connection on the bootstrap port from {}", last);
        socket = net::Socket();
      }
      std::string note() const {
        return count == 0 ? std::string()
                          : fmt::format(" ({} stray connection(s) dropped, the last from {})", count, last);
      }
    } stray;
    // What failed while accepting this rank's connections.
    auto accept_failed = [&](const std::string& what, int err) {
      auto f = bootstrap->failure(Stage::transport_connect, what);
      f.peer_rank = prev;
      f.local_address = b.listener.local_address().to_string();
      f.errno_text = net::errno_text(err);
      f.timeout = b.config.bootstrap_timeout;
      f.hint = "Rank " + std::to_string(prev) + " failed while opening its channels; check its log.";
      throw StageError(f);
    };
    // Accept every channel's connection from prev and the direct ones from
    // lower ranks, in whatever order they come, and answer their offers.
    std::vector<std::string> accepted;
    // Accepted socket connections that get further sockets (opened by the
    // peer once it has the answer).
    struct Striped {
      int peer;
      std::uint32_t connection;
      transport::SocketConnection* socket;
      std::uint32_t sockets;
    };
    std::vector<Striped> striped;
    struct EarlySocket {
      std::array<std::uint32_t, 4> hello;
      net::Socket socket;
    };
    std::vector<EarlySocket> early_sockets;
    bootstrap->run_stage(Stage::transport_connect, [&] {
      const std::size_t expected = channels.size() + static_cast<std::size_t>(rank);
      for (std::size_t got = 0; got < expected; ++got) {
        int err = 0;
        net::Socket in = b.listener.accept(deadline, err);
        if (err != 0) {
          accept_failed(
              fmt::format("rank {} did not open all {} channels to this rank{}", prev, channels.size(), stray.note()),
              err);
        }
        // A connection that does not say a hello and an offer at once is
        // dropped (stray.drop), and the listener keeps accepting.
        const auto hello_deadline = std::min(deadline, net::Clock::now() + kHelloWait);
        std::uint32_t hello[3] = {};
        transport::Offer offer;
        err = in.recv_all(hello, sizeof(hello), hello_deadline);
        if (err == 0 && hello[0] == kExtraSocketHelloMagic) {
          // A further socket of a connection answered already, come before
          // another rank's first one: kept for the stage below.
          std::uint32_t index = 0;
          err = in.recv_all(&index, sizeof(index), hello_deadline);
          if (err == 0) {
            early_sockets.push_back({{hello[0], hello[1], hello[2], index}, std::move(in)});
            --got;
            continue;
          }
        }
        if (err == 0 && hello[0] != kChannelHelloMagic) err = EPROTO;  // before waiting for an offer
        if (err == 0) err = in.recv_all(&offer, sizeof(offer), hello_deadline);
        const bool direct = hello[2] == kMeshConnection;
        if (err == 0 && offer.magic != transport::kOfferMagic) err = EPROTO;
        if (err == 0 && direct &&
            (hello[0] != kChannelHelloMagic || static_cast<int>(hello[1]) >= rank || mesh[hello[1]].valid())) {
          err = EPROTO;
        }
        if (err == 0 && !direct &&
            (hello[0] != kChannelHelloMagic || static_cast<int>(hello[1]) != prev || hello[2] >= channels.size() ||
             channels[hello[2]]->link.prev.valid())) {
          err = EPROTO;
        }
        if (err != 0) {
          stray.drop(in, err);
          --got;
          continue;
        }
        in.set_nodelay();
        const int peer = static_cast<int>(hello[1]);
        // Shared memory when both ranks allow it, they are on one host and
        // the segment maps here; otherwise why not.
        transport::Answer answer;
        answer.magic = transport::kAnswerMagic;
        std::unique_ptr<transport::shm::Segment> segment;
        using transport::Refusal;
        std::string why;
        Refusal refusal = Refusal::failed;
        if (offer.host_key != identity.key) {
          why = "different hosts";
          refusal = Refusal::different_hosts;
        } else if (!shm_enabled) {
          why = fmt::format("rank {} has NCCL_SHM_DISABLE=1", rank);
          refusal = Refusal::disabled;
        } else if (offer.shm_enabled == 0) {
          why = fmt::format("rank {} has NCCL_SHM_DISABLE=1", peer);
          refusal = Refusal::disabled;
        } else if (offer.segment[0] == '\0') {
          offer.problem[sizeof(offer.problem) - 1] = '\0';
          why = fmt::format("rank {} could not create a segment: {}", peer,
                            offer.problem[0] != '\0' ? offer.problem : "see its log");
        } else {
          offer.segment[sizeof(offer.segment) - 1] = '\0';
          segment = transport::shm::Segment::open(offer.segment, why);
        }
        answer.use_shm = segment ? 1 : 0;
        answer.refusal = segment ? Refusal::none : refusal;
        std::snprintf(answer.reason, sizeof(answer.reason), "%s", why.c_str());
        // libfabric when shared memory is out and both ranks want it.
        std::shared_ptr<transport::ofi::Endpoint> endpoint;
        if (!segment && offer.ofi != 0 && ofi_wanted && offer.ofi_name_length <= sizeof(offer.ofi_name)) {
          endpoint = open_endpoint(peer, answer.ofi_name, answer.ofi_name_length);
        }
        answer.use_ofi = endpoint ? 1 : 0;
        answer.sockets = !segment && !endpoint && !direct ? std::clamp(offer.sockets, 1u, nsocks) : 1;
        err = in.send_all(&answer, sizeof(answer), deadline);
        if (err != 0) {
          auto f = bootstrap->failure(Stage::transport_connect, fmt::format("rank {} left while connecting", peer));
          f.peer_rank = peer;
          f.errno_text = net::errno_text(err);
          f.hint = "Rank " + std::to_string(peer) + " failed while opening its connections; check its log.";
          throw StageError(f);
        }
        transport::Peer* slot = direct ? &mesh[hello[1]] : &channels[hello[2]]->link.prev;
        const std::string name = direct ? "p2p" : fmt::format("Channel {:02d}", hello[2]);
        const bool shm = segment != nullptr;
        if (shm) {
          slot->connection = std::make_unique<transport::shm::ShmConnection>(std::move(segment), 1, std::move(in));
        } else if (endpoint) {
          std::string ofi_why;
          slot->connection = transport::ofi::connect(endpoint, std::string(offer.ofi_name, offer.ofi_name_length),
                                                     std::move(in), ofi_why);
          if (!slot->connection) {
            auto f = bootstrap->failure(Stage::transport_connect,
                                        fmt::format("libfabric connection from rank {} failed: {}", peer, ofi_why));
            f.peer_rank = peer;
            f.hint = "Set NCCL_NET=Socket to run over sockets, or FI_PROVIDER to try another provider.";
            throw StageError(f);
          }
        } else {
          if (!direct) in.set_buffer_sizes(4 << 20);
          auto c = std::make_unique<transport::SocketConnection>(std::move(in));
          if (answer.sockets > 1) striped.push_back({peer, hello[2], c.get(), answer.sockets});
          slot->connection = std::move(c);
        }
        slot->rank = peer;
        slot->address = b.peers[peer].address;
        connection_infos.push_back({direct ? -1 : static_cast<int>(hello[2]), peer, false,
                                    std::string(transport::name_of(slot->kind())), b.peers[peer].address,
                                    answer.refusal == Refusal::different_hosts || shm ? std::string() : why,
                                    static_cast<int>(answer.sockets)});
        accepted.push_back(
            fmt::format("{} : {} <- {} via {}", name, where(rank), where(peer), transport::name_of(slot->kind())));
      }
      return fmt::format("{} channel(s) from rank {}, direct connections from {} lower rank(s)", channels.size(), prev,
                         rank);
    });
    // A ring connection's socket number `index` (RINGMASTER_NSOCKS_PER_CHANNEL),
    // to the same listener as its first.
    auto open_extra_socket = [&](int peer, std::uint32_t connection, std::uint32_t index) {
      const auto address = net::SocketAddress::parse(b.peers[peer].address);
      net::Socket s;
      store::ConnectAttempts report;
      int err = store::connect_with_backoff({*address}, deadline, s, report);
      const std::uint32_t hello[4] = {kExtraSocketHelloMagic, static_cast<std::uint32_t>(rank), connection, index};
      if (err == 0) err = s.send_all(hello, sizeof(hello), deadline);
      if (err != 0) {
        auto f =
            bootstrap->failure(Stage::transport_connect,
                               fmt::format("channel {}: cannot open socket {} to rank {}", connection, index, peer));
        f.peer_rank = peer;
        f.remote_address = b.peers[peer].address;
        f.errno_text = net::errno_text(err);
        f.hint = "The channel's first socket to this rank connected moments ago; rank " + std::to_string(peer) +
                 " probably died during init. Check its log.";
        throw StageError(f);
      }
      s.set_nodelay();
      s.set_buffer_sizes(4 << 20);
      return s;
    };
    // The answers to this rank's offers: the transport of each connection
    // it opened, logged as NCCL does.
    bootstrap->run_stage(Stage::transport_connect, [&] {
      std::string detail;
      for (auto& o : opened) {
        transport::Answer answer;
        int err = o.socket.recv_all(&answer, sizeof(answer), deadline);
        if (err == 0 && answer.magic != transport::kAnswerMagic) err = EPROTO;
        if (err != 0) {
          auto f = bootstrap->failure(Stage::transport_connect,
                                      fmt::format("rank {} did not answer the connection offer", o.peer));
          f.peer_rank = o.peer;
          f.remote_address = b.peers[o.peer].address;
          f.errno_text = err == EPROTO ? "unexpected answer" : net::errno_text(err);
          f.hint = "Rank " + std::to_string(o.peer) + " failed while accepting its connections; check its log.";
          throw StageError(f);
        }
        answer.reason[sizeof(answer.reason) - 1] = '\0';
        const std::string why = answer.reason;
        const bool shm = answer.use_shm != 0 && o.segment != nullptr;
        if (o.segment) o.segment->unlink();  // mapped on both sides, or not wanted
        if (shm) {
          o.slot->connection =
              std::make_unique<transport::shm::ShmConnection>(std::move(o.segment), 0, std::move(o.socket));
        } else if (answer.use_ofi != 0 && o.endpoint && answer.ofi_name_length <= sizeof(answer.ofi_name)) {
          std::string ofi_why;
          o.slot->connection = transport::ofi::connect(o.endpoint, std::string(answer.ofi_name, answer.ofi_name_length),
                                                       std::move(o.socket), ofi_why);
          if (!o.slot->connection) {
            auto f = bootstrap->failure(Stage::transport_connect,
                                        fmt::format("libfabric connection to rank {} failed: {}", o.peer, ofi_why));
            f.peer_rank = o.peer;
            f.hint = "Set NCCL_NET=Socket to run over sockets, or FI_PROVIDER to try another provider.";
            throw StageError(f);
          }
        } else {
          o.segment.reset();
          auto c = std::make_unique<transport::SocketConnection>(std::move(o.socket));
          for (std::uint32_t i = 1; i < std::min(answer.sockets, 8u); ++i)
            c->add_socket(open_extra_socket(o.peer, o.connection, i));
          o.slot->connection = std::move(c);
        }
        o.slot->rank = o.peer;
        o.slot->address = b.peers[o.peer].address;
        const std::string line = fmt::format("{} : {} -> {} via {}", connection_name(o.connection), where(rank),
                                             where(o.peer), transport::name_of(o.slot->kind()));
        const auto refusal = shm ? transport::Refusal::none : answer.refusal;
        const bool same_host = refusal != transport::Refusal::different_hosts;
        if (shm) {
          RM_INFO(init, "{}", line);
        } else if (refusal == transport::Refusal::failed) {
          RM_WARN(init, "{}/{} (shared memory not used: {})", line, b.peers[o.peer].address, why);
        } else if (same_host) {
          RM_INFO(init, "{}/{} (shared memory not used: {})", line, b.peers[o.peer].address, why);
        } else {
          RM_INFO(init, "{}/{}", line, b.peers[o.peer].address);
        }
        connection_infos.push_back(
            {o.connection == kMeshConnection ? -1 : static_cast<int>(o.connection), o.peer, true,
             std::string(transport::name_of(o.slot->kind())), b.peers[o.peer].address,
             shm || !same_host ? std::string() : why,
             static_cast<int>(o.slot->kind() == transport::TransportKind::socket ? answer.sockets : 1)});
        detail += (detail.empty() ? "" : "; ") + line + (shm ? "" : "/" + b.peers[o.peer].address) +
                  (!shm && same_host ? " (shared memory not used: " + why + ")" : "");
      }
      for (const auto& a : accepted)
        detail += "; " + a;
      return detail;
    });
    // The further sockets of the ring connections accepted here, added in
    // their order whatever order they arrive in.
    std::size_t extra = 0;
    for (const auto& c : striped)
      extra += c.sockets - 1;
    if (extra == 0) return;
    bootstrap->run_stage(Stage::transport_connect, [&] {
      std::vector<std::vector<net::Socket>> sockets(striped.size());
      for (std::size_t i = 0; i < striped.size(); ++i)
        sockets[i].resize(striped[i].sockets);
      for (std::size_t got = 0; got < extra; ++got) {
        int err = 0;
        std::array<std::uint32_t, 4> hello{};
        net::Socket in;
        if (got < early_sockets.size()) {
          hello = early_sockets[got].hello;
          in = std::move(early_sockets[got].socket);
        } else {
          in = b.listener.accept(deadline, err);
          if (err != 0) {
            accept_failed(fmt::format("rank {} did not open all {} sockets of its channels to this rank{}", prev,
                                      striped.front().sockets, stray.note()),
                          err);
          }
          err = in.recv_all(hello.data(), sizeof(hello), std::min(deadline, net::Clock::now() + kHelloWait));
        }
        std::size_t which = striped.size();
        for (std::size_t i = 0; err == 0 && i < striped.size(); ++i) {
          if (static_cast<int>(hello[1]) == striped[i].peer && hello[2] == striped[i].connection) which = i;
        }
        if (err == 0 && (hello[0] != kExtraSocketHelloMagic || which == striped.size() || hello[3] == 0 ||
                         hello[3] >= striped[which].sockets || sockets[which][hello[3]].valid())) {
          err = EPROTO;
        }
        if (err != 0) {
          stray.drop(in, err);
          --got;
          continue;
        }
        in.set_nodelay();
        in.set_buffer_sizes(4 << 20);
        sockets[which][hello[3]] = std::move(in);
      }
      for (std::size_t i = 0; i < striped.size(); ++i) {
        for (std::uint32_t k = 1; k < striped[i].sockets; ++k)
          striped[i].socket->add_socket(std::move(sockets[i][k]));
      }
      return fmt::format("{} further socket(s) from rank {} (RINGMASTER_NSOCKS_PER_CHANNEL={})", extra, prev, nsocks);
    });
  }
};

Communicator::Communicator(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Communicator::~Communicator() = default;

std::unique_ptr<Communicator> Communicator::create(const Config& config, const CommOptions& options) {
  transport::set_before_sleep(start_waiting_work);
  auto impl = std::make_unique<Impl>();
  // Checked before anything connects; the ranks agree on them once every
  // rank's are known (comm/settings.h).
  const auto settings = comm::LocalSettings::resolve(options);
  impl->timeout = options.timeout.value_or(std::chrono::milliseconds(param_int(Param::CollTimeout) * 1000));
  impl->on_collective = options.on_collective;
  impl->shared_memory = options.shared_memory;
  impl->net = options.net.value_or(param_string(Param::Net));
  std::transform(impl->net.begin(), impl->net.end(), impl->net.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (!impl->net.empty() && impl->net != "socket" && impl->net != "ofi") {
    throw Error(ErrorCategory::config, "NCCL_NET=" + impl->net + ": must be Socket or OFI");
  }
  impl->inline_bytes = static_cast<std::size_t>(std::max<std::int64_t>(0, param_int(Param::InlineBytes)));
  impl->spin = std::chrono::microseconds(std::max<std::int64_t>(0, param_int(Param::SocketSpin)));
  // The reduction kernels' level is settled here: a RINGMASTER_CPU_KERNEL
  // the CPU lacks is a configuration error before anything connects, not a
  // failure in the middle of init.
  (void)kernels::active_level();

  {
    // The links are not known yet: only what the overrides leave is
    // checked here (LL128 counts as possible until calibration says).
    tune::Shape any;
    any.intra.ll128 = any.inter.ll128 = true;
    (void)tune::Tuner(any, settings.algorithms, settings.protocols);
  }

  impl->bootstrap = Bootstrap::run(config, options.on_stage, /*finish=*/false, settings.encode());
  impl->rank = config.rank;
  impl->nranks = config.world_size;
  impl->p2p_sent.assign(static_cast<std::size_t>(config.world_size), 0);
  impl->p2p_received.assign(static_cast<std::size_t>(config.world_size), 0);
  // Every rank computes the same agreement from what all of them asked.
  const auto agreed = comm::agree(impl->bootstrap->peers());
  {
    impl->min_channels = agreed.min_channels;
    impl->max_channels = agreed.max_channels;
    impl->buffsize = agreed.buffsize;
    impl->pair_bytes = agreed.pair_bytes;
    for (const auto& line : agreed.reconciled)
      RM_INFO(init, "Settings agreed: {}", line);
  }
  for (int c = 0; c < impl->max_channels; ++c) {
    auto channel = std::make_unique<Channel>();
    channel->index = c;
    channel->run_parked = &Impl::Job::run_parked;
    impl->channels.push_back(std::move(channel));
  }
  // The trees span ranks, or hosts with their ranks chained.
  const std::string& tree_nodes = settings.tree_nodes;
  impl->describe_topology();
  {
    const auto& peers = impl->bootstrap->peers();
    std::vector<std::string> hosts;
    for (int r = 0; r < impl->nranks; ++r) {
      const auto& host = peers[static_cast<std::size_t>(r)].host;
      auto it = std::find(hosts.begin(), hosts.end(), host);
      if (it == hosts.end()) it = hosts.insert(hosts.end(), host);
      impl->tree_node_of.push_back(tree_nodes == "host" ? static_cast<int>(it - hosts.begin()) : r);
    }
  }
  impl->connect_channels();
  if (impl->nranks == 2 && !agreed.pair_bytes_given &&
      impl->channels[0]->link.next.connection->kind() != transport::TransportKind::shm) {
    // Over the network the kernel's copies, not the reduction, bound a
    // 2-rank all_reduce, and one step costs a wake-up less than two: whole
    // inputs win up to 512 KiB (1.4x there; from 1 MiB the ring on two
    // channels does). Shared memory's ring reads the FIFO in place and
    // keeps the default. Both ends of the one connection see its kind.
    impl->pair_bytes = std::max<std::size_t>(impl->pair_bytes, 512 * 1024);
  }
  {
    // The socket model with the RINGMASTER_TUNE_* figures; calibrate()
    // measures the real ones.
    double gbs = 0;
    try {
      gbs = std::stod(param_string(Param::TuneGbs));
    } catch (const std::exception&) {
      throw Error(ErrorCategory::config, "RINGMASTER_TUNE_GBS=" + param_string(Param::TuneGbs) + ": not a number");
    }
    tune::Shape shape =
        tune::socket_shape(impl->nranks, static_cast<double>(param_int(Param::TuneHopUs)), gbs, impl->max_channels);
    std::vector<int> nodes = impl->tree_node_of;
    std::sort(nodes.begin(), nodes.end());
    shape.nnodes = static_cast<int>(std::unique(nodes.begin(), nodes.end()) - nodes.begin());
    shape.min_channels = impl->min_channels;
    const auto& tree = impl->tree_for(-1);
    shape.tree_depth_intra = tree.depth_intra;
    shape.tree_depth_inter = tree.depth_inter;
    shape.slot_bytes = impl->buffsize / 8;
    shape.pair_bytes = impl->pair_bytes;
    // The calibration is part of TRANSPORT_CONNECT (its last segment on
    // the timeline), so no init time goes unaccounted.
    impl->bootstrap->run_stage(Stage::transport_connect, [&] {
      try {
        shape.intra = shape.inter = impl->calibrate(shape);
        // Each channel beyond the first is a progress thread to wake and a
        // step of its own on every hop; on a VM the wake alone costs tens
        // of microseconds (a 64 KiB all_reduce over sockets on two
        // channels took 3x as long as on one). Three hops' worth keeps
        // small sizes on one channel.
        shape.channel_latency_us = std::max(shape.channel_latency_us,
                                            3 * shape.intra.hop_latency_us[static_cast<std::size_t>(Protocol::simple)]);
        impl->channels[0]->link.flush();
      } catch (const Error& e) {
        auto f =
            impl->bootstrap->failure(Stage::transport_connect, "calibrating the links failed: " + e.status().message());
        f.category = e.category();
        throw StageError(f);
      }
      return "tuner: " + shape.source;
    });
    impl->algorithms = settings.algorithms;
    impl->protocols = settings.protocols;
    impl->tuner.emplace(std::move(shape), settings.algorithms, settings.protocols);
    if (impl->rank == 0) RM_INFO(tuning, "Tuner: {}", impl->tuner->describe());
  }
  impl->on_decision = options.on_decision;
  for (auto& channel : impl->channels) {
    channel->thread = std::thread([ch = channel.get(), rank = impl->rank] { ch->run(rank); });
  }
  impl->bootstrap->finish();
  return std::unique_ptr<Communicator>(new Communicator(std::move(impl)));
}

int Communicator::rank() const noexcept {
  return impl_->rank;
}
int Communicator::size() const noexcept {
  return impl_->nranks;
}
int Communicator::max_channels() const noexcept {
  return impl_->max_channels;
}
std::vector<int> Communicator::tree_parents(int tree) const {
  if (tree < 0 || tree > 1) throw Error(ErrorCategory::config, fmt::format("tree {}: 0 or 1", tree));
  std::vector<int> parents;
  for (int r = 0; r < impl_->nranks; ++r)
    parents.push_back(algo::build_double_tree(r, impl_->tree_node_of).parent[static_cast<std::size_t>(tree)]);
  return parents;
}

const tune::Tuner& Communicator::tuner() const noexcept {
  return *impl_->tuner;
}

void Communicator::select(std::optional<Algorithm> algorithm, std::optional<Protocol> protocol) {
  Impl& impl = *impl_;
  impl.last_choice.reset();
  if (!algorithm && !protocol) {
    impl.selected = nullptr;
    return;
  }
  const std::pair<int, int> key{algorithm ? static_cast<int>(*algorithm) + 1 : 0,
                                protocol ? static_cast<int>(*protocol) + 1 : 0};
  auto it = impl.narrowed.find(key);
  if (it == impl.narrowed.end()) {
    using Kind = tune::Selection::Kind;
    Impl::Narrowed narrowed;
    narrowed.tuner.emplace(
        impl.tuner->shape(),
        algorithm ? tune::Selection::parse(Kind::algorithm, "--algo", name_of(*algorithm)) : impl.algorithms,
        protocol ? tune::Selection::parse(Kind::protocol, "--proto", name_of(*protocol)) : impl.protocols);
    it = impl.narrowed.emplace(key, std::move(narrowed)).first;
  }
  impl.selected = &it->second;
}

tune::Decision Communicator::decide(Collective collective, std::size_t bytes) const {
  return (impl_->selected ? *impl_->selected->tuner : *impl_->tuner).decide(collective, bytes);
}

namespace {

struct Range {
  std::size_t begin, end;
  std::size_t size() const { return end - begin; }
};
Range channel_range(std::size_t count, int c, int nch) {
  return {count * static_cast<std::size_t>(c) / static_cast<std::size_t>(nch),
          count * static_cast<std::size_t>(c + 1) / static_cast<std::size_t>(nch)};
}

void check_root(int root, int n) {
  if (root < 0 || root >= n) {
    throw Error(ErrorCategory::config, fmt::format("root {} is not a rank of this communicator (size {})", root, n));
  }
}

}  // namespace

Request Communicator::all_reduce(const void* send, void* recv, std::size_t count, DataType type, RedOp op) {
  const std::size_t es = size_of(type);
  const auto choice = impl_->choose(Collective::all_reduce, count * es);
  if (choice.algorithm == Algorithm::tree) {
    const algo::DoubleTree* tree = &impl_->tree_for(-1);
    return impl_->submit(Collective::all_reduce, count * es, type, op, 0,
                         [=, this](Channel& ch, int, int, const algo::RingOp& rop) {
                           auto ctx = impl_->context(ch);
                           auto* out = static_cast<std::byte*>(recv);
                           algo::tree_all_reduce(ctx, *tree, rop, static_cast<const std::byte*>(send), out, count);
                           if (op == RedOp::avg) kernels::finish_avg(out, count, type, impl_->nranks);
                         });
  }
  if (impl_->nranks == 2 && count * es <= impl_->pair_bytes) {
    return impl_->submit(
        Collective::all_reduce, count * es, type, op, 0,
        [=, this](Channel& ch, int, int, const algo::RingOp& rop) {
          auto ctx = impl_->context(ch);
          algo::pair_all_reduce(ctx, rop, static_cast<const std::byte*>(send), static_cast<std::byte*>(recv), count);
        },
        /*forced_channels=*/1);
  }
  return impl_->submit(Collective::all_reduce, count * es, type, op, 0,
                       [=, this](Channel& ch, int c, int nch, const algo::RingOp& rop) {
                         const Range range = channel_range(count, c, nch);
                         auto* out = static_cast<std::byte*>(recv) + range.begin * es;
                         const auto* in = static_cast<const std::byte*>(send) + range.begin * es;
                         auto ctx = impl_->context(ch);
                         algo::all_reduce(ctx, rop, in, out, range.size());
                         if (op == RedOp::avg) kernels::finish_avg(out, range.size(), type, impl_->nranks);
                       });
}

Request Communicator::all_gather(const void* send, void* recv, std::size_t count, DataType type) {
  const std::size_t es = size_of(type);
  const std::size_t stride = count * es;
  return impl_->submit(Collective::all_gather, count * es * static_cast<std::size_t>(impl_->nranks), type, RedOp::sum,
                       0, [=, this](Channel& ch, int c, int nch, const algo::RingOp& rop) {
                         const Range range = channel_range(count, c, nch);
                         auto* base = static_cast<std::byte*>(recv) + range.begin * es;
                         auto* mine = base + static_cast<std::size_t>(impl_->rank) * stride;
                         const auto* src = static_cast<const std::byte*>(send) + range.begin * es;
                         if (mine != src) copy_bytes(mine, src, range.size() * es);
                         auto ctx = impl_->context(ch);
                         algo::all_gather(ctx, rop, base, range.size(), stride);
                       });
}

Request Communicator::reduce_scatter(const void* send, void* recv, std::size_t count, DataType type, RedOp op) {
  const std::size_t es = size_of(type);
  const int n = impl_->nranks;
  return impl_->submit(
      Collective::reduce_scatter, count * es * static_cast<std::size_t>(n), type, op, 0,
      [=, this](Channel& ch, int c, int nch, const algo::RingOp& rop) {
        const Range range = channel_range(count, c, nch);
        const std::size_t len = range.size() * es;
        // A packed copy of this channel's share of every block: the ring
        // reduces into it, then our block is copied out.
        std::vector<std::byte> work(len * static_cast<std::size_t>(n));
        for (int b = 0; b < n; ++b) {
          copy_bytes(work.data() + static_cast<std::size_t>(b) * len,
                     static_cast<const std::byte*>(send) + (static_cast<std::size_t>(b) * count + range.begin) * es,
                     len);
        }
        auto ctx = impl_->context(ch);
        algo::reduce_scatter(ctx, rop, work.data(), range.size(), len);
        auto* out = static_cast<std::byte*>(recv) + range.begin * es;
        copy_bytes(out, work.data() + static_cast<std::size_t>(impl_->rank) * len, len);
        if (op == RedOp::avg) kernels::finish_avg(out, range.size(), type, n);
      });
}

Request Communicator::broadcast(const void* send, void* recv, std::size_t count, DataType type, int root) {
  check_root(root, impl_->nranks);
  const std::size_t es = size_of(type);
  const algo::DoubleTree* tree = &impl_->tree_for(root);
  return impl_->submit(Collective::broadcast, count * es, type, RedOp::sum, root,
                       [=, this](Channel& ch, int c, int nch, const algo::RingOp& rop) {
                         const Range range = channel_range(count, c, nch);
                         auto* out = static_cast<std::byte*>(recv) + range.begin * es;
                         if (impl_->rank == root && send != recv) {
                           copy_bytes(out, static_cast<const std::byte*>(send) + range.begin * es, range.size() * es);
                         }
                         auto ctx = impl_->context(ch);
                         if (rop.algorithm == Algorithm::tree) {
                           algo::tree_broadcast(ctx, *tree, rop, out, range.size());
                         } else {
                           algo::broadcast(ctx, rop, out, range.size());
                         }
                       });
}

Request Communicator::reduce(const void* send, void* recv, std::size_t count, DataType type, RedOp op, int root) {
  check_root(root, impl_->nranks);
  const std::size_t es = size_of(type);
  const algo::DoubleTree* tree = &impl_->tree_for(root);
  return impl_->submit(Collective::reduce, count * es, type, op, root,
                       [=, this](Channel& ch, int c, int nch, const algo::RingOp& rop) {
                         const Range range = channel_range(count, c, nch);
                         const auto* src = static_cast<const std::byte*>(send) + range.begin * es;
                         // Only the root's recv buffer is significant; others reduce in a copy.
                         std::vector<std::byte> copy;
                         std::byte* buf = nullptr;
                         if (impl_->rank == root) {
                           buf = static_cast<std::byte*>(recv) + range.begin * es;
                           if (buf != src) copy_bytes(buf, src, range.size() * es);
                         } else {
                           copy.assign(src, src + range.size() * es);
                           buf = copy.data();
                         }
                         auto ctx = impl_->context(ch);
                         if (rop.algorithm == Algorithm::tree) {
                           algo::tree_reduce(ctx, *tree, rop, buf, range.size());
                         } else {
                           algo::reduce(ctx, rop, buf, range.size());
                         }
                         if (impl_->rank == root && op == RedOp::avg) {
                           kernels::finish_avg(buf, range.size(), type, impl_->nranks);
                         }
                       });
}

Request Communicator::barrier() {
  return impl_->submit(Collective::barrier, 0, DataType::uint8, RedOp::sum, 0,
                       [this](Channel& ch, int, int, const algo::RingOp& rop) {
                         std::byte token{0};
                         auto ctx = impl_->context(ch);
                         // A zero-byte all-reduce still takes 2(n-1) steps around the ring:
                         // nobody leaves before everybody arrived.
                         algo::RingOp op = rop;
                         op.collective = Collective::barrier;
                         algo::all_reduce(ctx, op, &token, &token, 0);
                       });
}

Request Communicator::all_to_all(const void* send, void* recv, std::size_t count, DataType type) {
  const std::size_t es = size_of(type);
  const std::size_t block = count * es;
  const int n = impl_->nranks;
  return impl_->submit_single(Collective::all_to_all, block * static_cast<std::size_t>(n), type,
                              [=, this](Channel& ch, const algo::RingOp& rop) {
                                const int r = impl_->rank;
                                const auto* in = static_cast<const std::byte*>(send);
                                auto* out = static_cast<std::byte*>(recv);
                                copy_bytes(out + static_cast<std::size_t>(r) * block,
                                           in + static_cast<std::size_t>(r) * block, block);
                                // A header-only step on the ring first: a neighbour that called
                                // some other collective is caught here by name, instead of both
                                // sides waiting on different connections until the timeout.
                                if (n > 1) {
                                  const transport::StepHeader announce = algo::step_header(rop, 0);
                                  std::byte none{};
                                  ch.link.exchange(announce, &none, 0, &none, 0);
                                }
                                // Pairwise exchange: at step s send block r+s to rank r+s and
                                // receive block r-s from rank r-s, both over direct connections.
                                for (int s = 1; s < n; ++s) {
                                  const int to = (r + s) % n, from = (r - s + n) % n;
                                  const transport::StepHeader h = algo::step_header(rop, s);
                                  ch.link.exchange_mesh(h, to, in + static_cast<std::size_t>(to) * block, block, h,
                                                        from, out + static_cast<std::size_t>(from) * block, block);
                                }
                              });
}

namespace {
// A point-to-point peer: another rank of the communicator.
void check_peer(const char* call, int peer, int rank, int n) {
  if (peer < 0 || peer >= n || peer == rank) {
    throw Error(
        ErrorCategory::config,
        fmt::format("{}: peer {} is not another rank of this communicator (rank {}, size {})", call, peer, rank, n));
  }
}
}  // namespace

Request Communicator::send(const void* buf, std::size_t count, DataType type, int peer) {
  check_peer("send", peer, impl_->rank, impl_->nranks);
  return point_to_point(buf, peer, nullptr, -1, count, type);
}

Request Communicator::recv(void* buf, std::size_t count, DataType type, int peer) {
  check_peer("recv", peer, impl_->rank, impl_->nranks);
  return point_to_point(nullptr, -1, buf, peer, count, type);
}

Request Communicator::sendrecv(const void* send, int to, void* recv, int from, std::size_t count, DataType type) {
  check_peer("sendrecv", to, impl_->rank, impl_->nranks);
  check_peer("sendrecv", from, impl_->rank, impl_->nranks);
  return point_to_point(send, to, recv, from, count, type);
}

// to or from is -1 when that direction is not used.
Request Communicator::point_to_point(const void* send, int to, void* recv, int from, std::size_t count, DataType type) {
  const std::size_t bytes = count * size_of(type);
  transport::StepHeader out, in;
  out.collective = in.collective = static_cast<std::uint8_t>(Collective::send_recv);
  if (to >= 0) out.seq = impl_->p2p_sent[static_cast<std::size_t>(to)]++;
  if (from >= 0) in.seq = impl_->p2p_received[static_cast<std::size_t>(from)]++;
  return impl_->submit_single(
      Collective::send_recv, bytes, type,
      [=](Channel& ch, const algo::RingOp& rop) {
        transport::StepHeader o = out, i = in;
        o.protocol = i.protocol = static_cast<std::uint8_t>(rop.protocol);
        ch.link.exchange_mesh(o, to, send, bytes, i, from, recv, bytes);
      },
      /*numbered=*/false);
}

void Communicator::abort() {
  impl_->abort();
}

std::vector<PeerLinkCounters> Communicator::peer_links() const {
  std::vector<PeerLinkCounters> out;
  for (int p = 0; p < impl_->nranks; ++p) {
    PeerLinkCounters l;
    l.peer = p;
    for (const auto& c : impl_->channels) {
      if (p >= c->stats.peers) continue;
      l.bytes += c->stats.from_peer[static_cast<std::size_t>(p)].bytes.load(std::memory_order_relaxed);
      l.active_ns += c->stats.from_peer[static_cast<std::size_t>(p)].active_ns.load(std::memory_order_relaxed);
      l.total_bytes += c->stats.from_peer[static_cast<std::size_t>(p)].total.load(std::memory_order_relaxed);
    }
    if (l.total_bytes > 0) out.push_back(l);
  }
  return out;
}

std::vector<ConnectionInfo> Communicator::connections() const {
  return impl_->connection_infos;
}

ChannelCounters Communicator::counters(int channel) const {
  const auto& s = impl_->channels.at(static_cast<std::size_t>(channel))->stats;
  return {s.bytes_sent.load(std::memory_order_relaxed), s.bytes_received.load(std::memory_order_relaxed),
          s.busy_ns.load(std::memory_order_relaxed), s.steps.load(std::memory_order_relaxed)};
}

}  // namespace ringmaster

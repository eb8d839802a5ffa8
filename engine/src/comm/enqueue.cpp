// Enqueue: how a call is chosen (algorithm, protocol, channels), split
// across channels and queued, or parked for its caller to run; and how
// each part runs and completes its request.
#include <algorithm>
#include <exception>
#include <memory>
#include <thread>
#include <utility>

#include "base/log.h"
#include "comm/communicator_impl.h"
#include "transport/direct.h"

namespace ringmaster {

using Clock = std::chrono::steady_clock;

Communicator::Impl::~Impl() {
  comm::stop_watching(this);
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
  keep_store_for_failure_readers();
}

void Communicator::Impl::abort() {
  if (aborted.exchange(true)) return;
  for (auto& c : channels)
    c->link.shutdown();
}

Communicator::Impl::Choice Communicator::Impl::choose(Collective collective, std::size_t bytes) {
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

const algo::DoubleTree& Communicator::Impl::tree_for(int root) {
  auto it = trees.find(root);
  if (it == trees.end())
    it = trees.emplace(root, algo::build_double_tree(rank, tree_node_of, root, tree_chain_key)).first;
  return it->second;
}

void Communicator::Impl::Job::run_parked(void* job) {
  auto* parked = static_cast<Job*>(job);
  parked->run(*parked->impl->channels[0], 0);
}

void Communicator::Impl::Job::run(Channel& channel, int c) {
  Status status;
  if (recorded) impl->recorder.started(task.seq);
  try {
    if (impl->aborted) throw Error(ErrorCategory::peer, "the communicator was aborted");
    execute(channel, c);
    channel.link.flush();
  } catch (const Error& e) {
    status = impl->attribute(e.status(), recorded ? std::optional(task.seq) : std::nullopt);
    if (!impl->failure_logged.exchange(true, std::memory_order_relaxed)) {
      RM_WARN(coll, "channel {}: {} #{} failed: {}", c, name_of(task.collective), task.seq, status.to_string());
    } else {
      impl->failures_unlogged.fetch_add(1, std::memory_order_relaxed);
    }
    impl->abort();
  } catch (const std::exception& e) {
    status = impl->attribute(Status(ErrorCategory::internal, e.what()));
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

void Communicator::Impl::hold_before_call() {
  RM_WARN(coll, "rank {} holds before collective #{} (RINGMASTER_FAULT_HOLD_AT_CALL): its peers will stall there", rank,
          next_seq);
  const auto until = Clock::now() + 2 * timeout;
  while (Clock::now() < until && !aborted.load())
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  throw Error(ErrorCategory::internal,
              fmt::format("rank {} was held before collective #{} (RINGMASTER_FAULT_HOLD_AT_CALL)", rank, next_seq));
}

Request Communicator::Impl::start(std::shared_ptr<Job> job, const Call& call, int forced_channels) {
  if (hold_at_call && call.numbered && next_seq == *hold_at_call) {
    hold_at_call.reset();
    hold_before_call();
  }
  const Collective collective = call.collective;
  const std::size_t bytes = call.bytes;
  algo::Task& task = job->task;
  task.collective = collective;
  task.seq = call.numbered ? next_seq++ : next_seq;
  task.type = call.type;
  task.op = call.op;
  task.root = call.root;
  task.count = call.count;
  Choice choice = call.choice ? *call.choice : choose(collective, bytes);
  if (forced_channels > 0) choice.channels = forced_channels;
  task.algorithm = choice.algorithm;
  const Protocol protocol = choice.protocol;
  task.protocol = protocol;
  const std::size_t es = size_of(call.type);
  // LL moves a ring step in one piece. A tree's halves go in slots under
  // every protocol: a tree level under LL in one piece (megabytes in one
  // frame to each child) left loopback TCP reordering and retransmitting
  // for the calls after it.
  const bool whole = protocol == Protocol::ll && choice.algorithm != Algorithm::tree;
  task.slot_bytes = whole ? 0 : std::max(es, (buffsize / 8) / es * es);
  // Trees run on channel 0, over its direct connections.
  const int nch = choice.algorithm == Algorithm::tree ? 1 : choice.channels;
  task.channels = nch;
  job->impl = this;
  job->nch = nch;
  if (call.numbered) {
    recorder.begin(task.seq, collective, bytes, task.algorithm, protocol, nch);
    job->recorded = true;
    // Before the waiters wake: a caller may destroy the communicator as
    // soon as its last call is done.
    job->before_wake = [](Request::State& state, const Status& status) {
      auto& done = static_cast<Job&>(state);
      done.impl->recorder.ended(done.task.seq, status.ok());
    };
  }
  job->remaining = nch;
  job->self = job;
  // The telemetry record, when someone takes it (a clock read and a
  // closure less per call otherwise).
  if (on_collective) {
    const auto start = Clock::now();
    job->on_done = [this, task, bytes, protocol, nch, start](const Status& status) {
      if (status.ok()) {
        on_collective({task.seq, task.collective, bytes, task.algorithm, protocol, nch, Clock::now() - start});
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
    if (channel.park(raw)) return Request(std::move(job));
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

}  // namespace ringmaster

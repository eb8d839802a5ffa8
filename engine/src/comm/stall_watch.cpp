// The hang wavefront. A collective that stops moving on one rank usually
// waits on another: a rank that never called it (the application's ranks
// went out of step), a rank that is stopped or dead, or a link that
// carries nothing. The rank waiting cannot tell which; every rank's recent
// calls together can.
//
// One thread per process watches every communicator. A communicator whose
// oldest collective has moved no byte and no step for stall_after
// (RINGMASTER_STALL_S) claims the next round in the store (one claim
// wins, whatever call each rank is stuck in; a rank that finds a round it
// has not answered answers it instead) and opens it. Every rank's watcher
// looks at the round counter twice a second and appends its frontier to
// each round it has not answered; the reporter waits until every rank has
// answered or kGatherWindow has passed, then names the laggards of the
// oldest call any rank is in (diagnose) and calls on_stall.
//
// Store traffic: one ADD per rank per poll while nothing stalls, a handful
// of operations per rank per stall. Polls slow down beyond 1,024 ranks so
// the store sees at most about 2,000 of them a second.
#include "comm/stall_watch.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <condition_variable>
#include <exception>
#include <map>
#include <mutex>
#include <optional>
#include <stop_token>
#include <thread>

#include "base/log.h"
#include "bootstrap/views.h"
#include "comm/communicator_impl.h"
#include "net/path_probe.h"
#include "ringmaster/store.h"
#include "store/store.h"

namespace ringmaster {

using Clock = std::chrono::steady_clock;

std::vector<CallRecord> Communicator::Impl::recent_calls() const {
  std::vector<CallRecord> calls = recorder.snapshot();
  for (const auto& c : channels) {
    const std::uint64_t waiting = c->stats.waiting_seq.load(std::memory_order_acquire);
    if (waiting == 0) continue;
    const std::uint64_t at = c->stats.waiting_at.load(std::memory_order_relaxed);
    for (auto& call : calls) {
      if (call.seq != waiting - 1 || call.waits_on >= 0) continue;
      call.step = static_cast<int>(at >> 33 & 0xffff);
      call.waits_to_send = (at >> 32 & 1) != 0;
      call.waits_on = static_cast<int>(static_cast<std::int32_t>(at & 0xffffffff));
    }
  }
  return calls;
}

namespace comm {
namespace {

constexpr auto kGatherWindow = std::chrono::milliseconds(1500);
constexpr auto kTick = std::chrono::milliseconds(250);
constexpr auto kGatherTick = std::chrono::milliseconds(100);
constexpr auto kStoreRetry = std::chrono::seconds(5);

std::chrono::milliseconds poll_interval(int nranks) {
  return std::chrono::milliseconds(std::max(500, nranks / 2));
}

struct Watched {
  Communicator::Impl* impl = nullptr;
  std::uint64_t signature = 0;
  Clock::time_point last_progress;
  std::optional<std::uint64_t> claimed;  // the stalled collective this rank has tried to claim
  std::int64_t answered_round = 0;
  Clock::time_point next_poll;
  Clock::time_point store_retry_at;  // after a store error, nothing before this
  struct Gather {
    std::int64_t round = 0;
    Clock::time_point opened;
    Clock::time_point deadline;
    std::uint64_t seq = 0;
    Collective collective = Collective::all_reduce;
    std::chrono::milliseconds stalled_for{0};
  };
  std::optional<Gather> gathering;
};

// Everything a rank has moved: bytes and steps on every channel, calls
// begun and ended. Unchanged between two looks: no progress.
std::uint64_t progress_signature(const Communicator::Impl& impl) {
  std::uint64_t sum = impl.recorder.begun() * 7 + impl.recorder.ended_count() * 13;
  for (const auto& c : impl.channels) {
    sum += c->stats.bytes_sent.load(std::memory_order_relaxed) +
           c->stats.bytes_received.load(std::memory_order_relaxed) + c->stats.steps.load(std::memory_order_relaxed);
  }
  return sum;
}

// What the host of a rank that did not answer says, when this rank has a
// socket to it: nothing at all (the path or the host is down), a reset
// (its process exited), or a handshake (its process is stopped, which the
// caller already says): a fraction of a second of small probes to its
// bootstrap listener.
std::string probe_silent(const Communicator::Impl& impl, int rank) {
  for (const auto& channel : impl.channels) {
    for (const transport::Peer* p : {&channel->link.next, &channel->link.prev}) {
      if (p->rank != rank || !p->valid() || p->kind() != transport::TransportKind::socket) continue;
      const auto address = net::SocketAddress::parse(p->address);
      if (!address) return {};
      const net::PathSizes sizes = net::probe_path_sizes(*address, 576);
      if (sizes.refused) return fmt::format("nothing listens at {} any more: its process has exited", p->address);
      if (!sizes.small_pass) {
        return fmt::format(
            "{} answers nothing, not even a new connection's handshake: the path to that host is "
            "down (a link or a switch port) or the host is gone",
            address->host());
      }
      return {};
    }
  }
  return {};
}

RankWavefront own_wavefront(const Communicator::Impl& impl) {
  RankWavefront w;
  w.rank = impl.rank;
  w.answered = true;
  w.last_called = static_cast<std::int64_t>(impl.recorder.begun()) - 1;
  w.calls = around_frontier(impl.recent_calls());
  return w;
}

class StallWatcher {
 public:
  static StallWatcher& instance() {
    static StallWatcher watcher;
    return watcher;
  }

  void add(Communicator::Impl* impl) {
    std::lock_guard lock(mutex_);
    Watched w;
    w.impl = impl;
    w.signature = progress_signature(*impl);
    w.last_progress = Clock::now();
    w.next_poll = w.last_progress + poll_interval(impl->nranks);
    watched_.push_back(w);
    if (!thread_.joinable()) thread_ = std::jthread([this](std::stop_token stop) { loop(stop); });
    wake_.notify_one();
  }

  // Waits for a look at this communicator in progress to end.
  void remove(Communicator::Impl* impl) {
    std::lock_guard lock(mutex_);
    std::erase_if(watched_, [&](const Watched& w) { return w.impl == impl; });
  }

 private:
  StallWatcher() = default;

  void loop(std::stop_token stop) {
    std::unique_lock lock(mutex_);
    while (!stop.stop_requested()) {
      bool gathering = false;
      for (Watched& w : watched_) {
        try {
          look(w);
        } catch (const std::exception& e) {
          RM_WARN(coll, "stall watch: {}", e.what());
        }
        gathering = gathering || w.gathering.has_value();
      }
      wake_.wait_for(lock, stop, gathering ? kGatherTick : kTick, [] { return false; });
    }
  }

  void look(Watched& w) {
    Communicator::Impl& impl = *w.impl;
    if (impl.stall_after.count() == 0 || impl.aborted.load(std::memory_order_relaxed)) return;
    const auto now = Clock::now();
    const std::uint64_t signature = progress_signature(impl);
    const bool in_progress = impl.recorder.begun() > impl.recorder.ended_count();
    if (signature != w.signature || !in_progress) {
      w.signature = signature;
      w.last_progress = now;
    }
    if (now < w.store_retry_at) return;
    try {
      if (in_progress && now - w.last_progress >= impl.stall_after) claim(w, now);
      if (w.gathering) gather(w, now);
      if (now >= w.next_poll) poll(w, now);
    } catch (const std::exception& e) {
      RM_INFO(coll, "stall watch: the store did not answer ({}); trying again in {} s", e.what(), kStoreRetry.count());
      w.store_retry_at = now + kStoreRetry;
      if (w.gathering) report(w, {}, fmt::format("the store did not answer ({}): no other rank was asked", e.what()));
    }
  }

  static std::string key(const Communicator::Impl& impl, const std::string& name) {
    return store_key(impl.bootstrap->config(), name);
  }

  template <class F>
  static auto with_store(Communicator::Impl& impl, F&& f) {
    store::Store* store = store_of(*impl.bootstrap).client;
    if (!store) throw Error(ErrorCategory::internal, "no store connection");
    std::lock_guard lock(impl.store_mutex);
    return f(*store);
  }

  // This rank's oldest unfinished collective stopped moving: the rank
  // that opens the next round reports the stall.
  void claim(Watched& w, Clock::time_point now) {
    Communicator::Impl& impl = *w.impl;
    const auto calls = impl.recent_calls();
    const auto stuck =
        std::find_if(calls.begin(), calls.end(), [](const CallRecord& c) { return !has_ended(c.state); });
    if (stuck == calls.end() || (w.claimed && *w.claimed == stuck->seq)) return;
    w.claimed = stuck->seq;
    const std::string me = std::to_string(impl.rank);
    const std::int64_t round = with_store(impl, [&](auto& store) -> std::int64_t {
      const std::int64_t current = store.add(key(impl, "stall_round"), 0);
      // A round this rank has not answered is open: the stall is being
      // reported already, and this rank's answer goes there.
      if (current > w.answered_round) {
        answer(store, w, current);
        return 0;
      }
      // One claim opens the next round, whatever call each rank is stuck
      // in: a rank whose part of #50 ended waits in #51 while its peers
      // are still in #50, and one stall makes one report.
      if (store.compare_set(key(impl, fmt::format("stall_open_{}", current + 1)), "", me) != me) return 0;
      const std::int64_t r = store.add(key(impl, "stall_round"), 1);
      answer(store, w, r);
      return r;
    });
    if (round == 0) return;  // another rank reports it; this one has answered or will at its next poll
    w.gathering = Watched::Gather{round,
                                  now,
                                  now + kGatherWindow,
                                  stuck->seq,
                                  stuck->collective,
                                  std::chrono::duration_cast<std::chrono::milliseconds>(now - w.last_progress)};
  }

  void gather(Watched& w, Clock::time_point now) {
    Communicator::Impl& impl = *w.impl;
    const auto& g = *w.gathering;
    const std::int64_t answers = with_store(
        impl, [&](auto& store) { return store.add(key(impl, fmt::format("stall_{}_answers", g.round)), 0); });
    if (answers < impl.nranks && now < g.deadline) return;
    const std::string text =
        with_store(impl, [&](auto& store) { return store.get_existing(key(impl, fmt::format("stall_{}", g.round))); });
    const std::uint64_t own_seq = g.seq;
    const StallReport r = report(w, decode_wavefronts(text), {});
    // For the ranks whose call times out later (Impl::attribute): the
    // stalled call, and the reporter's own when it had moved on.
    with_store(impl, [&](auto& store) {
      store.set(key(impl, fmt::format("stall_diagnosis_{}", r.seq)), r.diagnosis);
      if (own_seq != r.seq) store.set(key(impl, fmt::format("stall_diagnosis_{}", own_seq)), r.diagnosis);
    });
  }

  // A new round opened by another rank: this rank answers it.
  void poll(Watched& w, Clock::time_point now) {
    Communicator::Impl& impl = *w.impl;
    w.next_poll = now + poll_interval(impl.nranks);
    with_store(impl, [&](auto& store) {
      const std::int64_t round = store.add(key(impl, "stall_round"), 0);
      if (round > w.answered_round) answer(store, w, round);
    });
  }

  // Appends this rank's calls to every round it has not answered up to
  // `upto` (the last few: older ones are long reported).
  static void answer(store::Store& store, Watched& w, std::int64_t upto) {
    Communicator::Impl& impl = *w.impl;
    const std::string mine = encode_wavefront(own_wavefront(impl));
    for (std::int64_t r = std::max(w.answered_round, upto - 4) + 1; r <= upto; ++r) {
      store.append(key(impl, fmt::format("stall_{}", r)), mine);
      store.add(key(impl, fmt::format("stall_{}_answers", r)), 1);
    }
    w.answered_round = upto;
  }

  // The reporter's answer to on_stall, with what came (nothing when the
  // store failed: then `trouble` says why).
  StallReport report(Watched& w, std::vector<RankWavefront> answers, const std::string& trouble) {
    Communicator::Impl& impl = *w.impl;
    const auto g = *std::exchange(w.gathering, std::nullopt);
    StallReport r;
    r.reporter = impl.rank;
    r.seq = g.seq;
    r.collective = g.collective;
    r.stalled_for = g.stalled_for;
    r.gathered_in = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - g.opened);
    std::map<int, RankWavefront> by_rank;
    for (auto& a : answers) {
      if (a.rank >= 0 && a.rank < impl.nranks) by_rank[a.rank] = std::move(a);
    }
    if (!by_rank.count(impl.rank)) by_rank[impl.rank] = own_wavefront(impl);
    for (int rank = 0; rank < impl.nranks; ++rank) {
      auto it = by_rank.find(rank);
      if (it != by_rank.end()) {
        r.ranks.push_back(std::move(it->second));
      } else {
        RankWavefront silent;
        silent.rank = rank;
        silent.silence = probe_silent(impl, rank);
        r.ranks.push_back(std::move(silent));
      }
    }
    // The call that stalled is the oldest any rank is still in: the
    // reporter may have finished its part of it and moved on.
    for (const auto& wave : r.ranks) {
      for (const auto& c : wave.calls) {
        if (!has_ended(c.state) && c.seq < r.seq) {
          r.seq = c.seq;
          r.collective = c.collective;
        }
      }
    }
    r.diagnosis = trouble.empty() ? diagnose(r) : diagnose(r) + "; " + trouble;
    RM_WARN(coll, "stall: {} #{} has made no progress for {:.1f} s: {}", name_of(r.collective), r.seq,
            r.stalled_for.count() / 1000.0, r.diagnosis);
    if (impl.on_stall) {
      try {
        impl.on_stall(r);
      } catch (const std::exception& e) {
        RM_WARN(coll, "the on_stall callback threw ({})", e.what());
      }
    }
    return r;
  }

  std::mutex mutex_;
  std::condition_variable_any wake_;
  std::vector<Watched> watched_;
  std::jthread thread_;  // last: stopped and joined before the rest goes
};

}  // namespace

void watch_for_stalls(Communicator::Impl* impl) {
  StallWatcher::instance().add(impl);
}

void stop_watching(Communicator::Impl* impl) {
  StallWatcher::instance().remove(impl);
}

std::vector<CallRecord> around_frontier(std::vector<CallRecord> calls) {
  const auto frontier =
      std::find_if(calls.begin(), calls.end(), [](const CallRecord& c) { return !has_ended(c.state); });
  const auto at = static_cast<std::size_t>(frontier - calls.begin());
  const std::size_t after = std::min(calls.size() - at, kWavefrontCalls / 2);
  const std::size_t before = std::min(at, kWavefrontCalls - after);
  return {calls.begin() + static_cast<std::ptrdiff_t>(at - before),
          calls.begin() + static_cast<std::ptrdiff_t>(at + std::min(calls.size() - at, kWavefrontCalls - before))};
}

std::string encode_wavefront(const RankWavefront& w) {
  std::string out = fmt::format("R {} {} {}\n", w.rank, w.last_called, w.calls.size());
  for (const auto& c : w.calls) {
    out +=
        fmt::format("{} {} {} {} {} {} {} {} {} {} {} {}\n", c.seq, static_cast<int>(c.collective), c.bytes,
                    static_cast<int>(c.algorithm), static_cast<int>(c.protocol), c.channels, static_cast<int>(c.state),
                    c.age.count(), c.duration.count(), c.step, c.waits_on, c.waits_to_send ? 1 : 0);
  }
  return out;
}

std::vector<RankWavefront> decode_wavefronts(std::string_view text) {
  std::vector<RankWavefront> out;
  auto numbers = [](std::string_view line, auto&... into) {
    bool ok = true;
    auto one = [&](auto& v) {
      while (!line.empty() && line.front() == ' ')
        line.remove_prefix(1);
      const auto [end, ec] = std::from_chars(line.data(), line.data() + line.size(), v);
      ok = ok && ec == std::errc() && (end == line.data() + line.size() || *end == ' ');
      line.remove_prefix(static_cast<std::size_t>(end - line.data()));
    };
    (one(into), ...);
    return ok && line.empty();
  };
  std::size_t expected = 0;
  RankWavefront* current = nullptr;
  while (!text.empty()) {
    const auto eol = text.find('\n');
    const std::string_view line = text.substr(0, eol);
    text.remove_prefix(eol == std::string_view::npos ? text.size() : eol + 1);
    if (line.starts_with("R ")) {
      int rank = -1;
      std::int64_t last_called = -1;
      std::size_t n = 0;
      current = nullptr;
      if (!numbers(line.substr(2), rank, last_called, n) || rank < 0 || last_called < -1 || n > 256) continue;
      std::erase_if(out, [&](const RankWavefront& w) { return w.rank == rank; });
      out.push_back(RankWavefront{rank, true, last_called, {}, {}});
      current = &out.back();
      expected = n;
      continue;
    }
    if (current == nullptr || current->calls.size() >= expected) continue;
    CallRecord c;
    int collective = 0, algorithm = 0, protocol = 0, state = 0, to_send = 0;
    std::int64_t age = 0, duration = 0;
    if (!numbers(line, c.seq, collective, c.bytes, algorithm, protocol, c.channels, state, age, duration, c.step,
                 c.waits_on, to_send) ||
        collective < 0 || collective > static_cast<int>(Collective::scatter) || algorithm < 0 || algorithm > 1 ||
        protocol < 0 || protocol > 2 || state < 0 || state > 3) {
      continue;
    }
    c.collective = static_cast<Collective>(collective);
    c.algorithm = static_cast<Algorithm>(algorithm);
    c.protocol = static_cast<Protocol>(protocol);
    c.state = static_cast<CallState>(state);
    c.age = std::chrono::microseconds(age);
    c.duration = std::chrono::microseconds(duration);
    c.waits_to_send = to_send != 0;
    current->calls.push_back(c);
  }
  return out;
}

std::string diagnose(const StallReport& report) {
  const std::string call = fmt::format("{} #{}", name_of(report.collective), report.seq);
  // Who waits on whom in the stalled call.
  // Each rank's earliest call waiting on a peer (the stalled call, or the
  // one after it on a rank whose part of the stalled one ended).
  std::map<int, std::pair<int, const CallRecord*>> waiter_of;  // laggard -> (waiting rank, its record)
  for (const auto& w : report.ranks) {
    for (const auto& c : w.calls) {
      if (c.waits_on < 0 || has_ended(c.state)) continue;
      waiter_of.try_emplace(c.waits_on, w.rank, &c);
      break;
    }
  }
  auto waits = [&](int laggard) -> std::string {
    const auto it = waiter_of.find(laggard);
    if (it == waiter_of.end()) return {};
    const auto& [waiter, c] = it->second;
    return fmt::format("rank {} waits on rank {} at {} #{} step {}{}; ", waiter, laggard, name_of(c->collective),
                       c->seq, c->step, c->waits_to_send ? " (to send)" : "");
  };
  std::vector<std::string> said;
  int more = 0;
  auto say = [&](std::string s) {
    if (said.size() < 4) {
      said.push_back(std::move(s));
    } else {
      ++more;
    }
  };
  for (const auto& w : report.ranks) {
    if (!w.answered) {
      say(waits(w.rank) + (w.silence.empty()
                               ? fmt::format("rank {} did not answer: its process is stopped, dead or "
                                             "stuck outside Ringmaster (or runs with RINGMASTER_STALL_S=0)",
                                             w.rank)
                               : fmt::format("rank {} did not answer: {}", w.rank, w.silence)));
      continue;
    }
    const std::int64_t last = w.last_called;
    if (last < static_cast<std::int64_t>(report.seq)) {
      say(waits(w.rank) + (last < 0
                               ? fmt::format("rank {} has not called any collective, nor {}", w.rank, call)
                               : fmt::format("rank {} is at #{} and has not called #{}", w.rank, last, report.seq)));
    }
  }
  std::string out;
  if (said.empty()) {
    // Every rank is in the call: nobody is missing, something between
    // them carries nothing.
    out = fmt::format(
        "every rank has called {} and none moves, so no rank is out of step: a network or transport "
        "stall",
        call);
    std::vector<std::string> edges;
    for (const auto& [laggard, who] : waiter_of) {
      if (edges.size() == 4) break;
      edges.push_back(fmt::format("rank {} waits on rank {} (step {})", who.first, laggard, who.second->step));
    }
    for (std::size_t i = 0; i < edges.size(); ++i)
      out += (i == 0 ? "; " : ", ") + edges[i];
    return out;
  }
  for (std::size_t i = 0; i < said.size(); ++i)
    out += (i == 0 ? "" : "; ") + said[i];
  if (more > 0) out += fmt::format("; and {} more rank(s) likewise", more);
  return out;
}

}  // namespace comm
}  // namespace ringmaster

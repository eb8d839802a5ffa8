#include "transport/link.h"

#include <poll.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <iterator>
#include <optional>
#include <string>

#include "base/cycles.h"
#include "base/log.h"
#include "ringmaster/status.h"

namespace ringmaster::transport {

std::string call_name(Collective collective, std::uint64_t seq) {
  if (seq >= kFirstCalibrationSeq) return fmt::format("the tuner's calibration ({})", name_of(collective));
  return fmt::format("{} #{}", name_of(collective), seq);
}

namespace {

using Clock = net::Clock;

// Filler between a step's header and its data is less than a page.
constexpr std::size_t kMaxPad = 4096;
// How long a receive waits before it looks for its step on the peer's
// other connections (see look_elsewhere), and then between looks.
constexpr auto kLookElsewhereAfter = std::chrono::milliseconds(20);
constexpr std::array<std::byte, kMaxPad> kFiller{};

std::string describe(const StepHeader& h) {
  return fmt::format("{} of {} bytes (step {}, {})", call_name(static_cast<Collective>(h.collective), h.seq), h.bytes,
                     h.step, name_of(static_cast<Protocol>(h.protocol)));
}

// The operation without a byte count: for errors that are not about sizes.
std::string describe_op(const StepHeader& h) {
  return fmt::format("{} (step {})", call_name(static_cast<Collective>(h.collective), h.seq), h.step);
}

// Why `peer` went silent, when its host's answers say so (about 2 s of
// probes over TCP to its bootstrap listener, packets up to the size this
// connection's segments fill): nothing listens there any more (its
// process exited), nothing answers at all (the path or the host is gone),
// or only packets smaller than the path's MTU pass (a path-MTU black
// hole). Empty when packets of every size pass: then the peer's process
// stopped, or waits for something else.
std::string path_cause(const Peer& peer) {
  if (!peer.valid() || peer.kind() != TransportKind::socket) return {};
  const auto state = peer.connection->send_state();
  const auto address = net::SocketAddress::parse(peer.address);
  if (!state || !address) return {};
  const int full = state->path_mtu > 0 ? state->path_mtu : state->mss + 40;
  const net::PathSizes sizes = net::probe_path_sizes(*address, full);
  if (sizes.refused) {
    return fmt::format("; nothing listens at {} any more: rank {}'s process has exited", peer.address, peer.rank);
  }
  if (!sizes.small_pass) {
    return fmt::format(
        "; {} answers nothing, not even a new connection's handshake: the path to it is down or its "
        "host is gone",
        address->host());
  }
  if (sizes.largest_passing >= full) return {};
  return fmt::format(
      "; packets of {4}{0} bytes reach {1} but larger ones vanish, and this connection's segments fill {2}-byte "
      "packets (the MTU its interface has){3}. A path-MTU black hole: a hop between the hosts carries smaller "
      "packets than the interfaces and drops larger ones without the ICMP 'fragmentation needed' that would lower "
      "the MTU. Set the MTU of the ranks' interfaces to {0} (ip link set dev IFACE mtu {0}), let the hop send ICMP, "
      "or set net.ipv4.tcp_mtu_probing=1",
      sizes.largest_passing, address->host(), full,
      state->stuck() ? fmt::format(", unacknowledged after {} retransmissions", state->retransmits) : "",
      sizes.exact ? "up to " : "at least ");
}

// The first field of the call's signature (StepHeader) where a peer's
// step differs from this rank's, as "op=max" on each side.
struct FieldMismatch {
  std::string theirs, mine;
  std::string message(const StepHeader& call, int from, int rank) const {
    return fmt::format(
        "collective mismatch at {}: rank {} called it with {} but rank {} with {}; every rank must make the same "
        "calls in the same order with the same arguments (and the same NCCL_ALGO and NCCL_PROTO)",
        call_name(static_cast<Collective>(call.collective), call.seq), from, theirs, rank, mine);
  }
};
std::optional<FieldMismatch> signature_mismatch(const StepHeader& theirs, const StepHeader& mine) {
  auto named = [](const char* field, auto a, auto b) {
    return FieldMismatch{fmt::format("{}={}", field, a), fmt::format("{}={}", field, b)};
  };
  auto type_name = [](std::uint8_t t) {
    return t < std::size(kAllDataTypes) ? std::string(name_of(static_cast<DataType>(t))) : fmt::format("#{}", t);
  };
  auto op_name = [](std::uint8_t o) {
    return o < std::size(kAllRedOps) ? std::string(name_of(static_cast<RedOp>(o))) : fmt::format("#{}", o);
  };
  auto algorithm_name = [](std::uint8_t a) {
    return a <= static_cast<std::uint8_t>(Algorithm::pair) ? std::string(name_of(static_cast<Algorithm>(a)))
                                                           : fmt::format("#{}", a);
  };
  if (theirs.count != mine.count) return named("count", theirs.count, mine.count);
  if (theirs.type != mine.type) return named("datatype", type_name(theirs.type), type_name(mine.type));
  if (theirs.op != mine.op) return named("op", op_name(theirs.op), op_name(mine.op));
  if (theirs.root != mine.root) return named("root", theirs.root, mine.root);
  if (theirs.algorithm != mine.algorithm) {
    return named("algorithm", algorithm_name(theirs.algorithm), algorithm_name(mine.algorithm));
  }
  if (theirs.protocol != mine.protocol) {
    return named("protocol", name_of(static_cast<Protocol>(theirs.protocol % 3)),
                 name_of(static_cast<Protocol>(mine.protocol % 3)));
  }
  if (theirs.channels != mine.channels) return named("channels", int{theirs.channels}, int{mine.channels});
  return std::nullopt;
}

// A channel's counters have one writer at a time (the thread running the
// channel's task), so they add without a locked instruction.
void bump(std::atomic<std::uint64_t>& counter, std::uint64_t by) {
  counter.store(counter.load(std::memory_order_relaxed) + by, std::memory_order_relaxed);
}

int sleep_poll(pollfd* fds, int nfds, int sleep_us) {
  const timespec limit{sleep_us / 1'000'000, (sleep_us % 1'000'000) * 1000L};
  return ::ppoll(fds, static_cast<nfds_t>(nfds), &limit, nullptr);
}

}  // namespace

void ChannelLink::transfer(const StepHeader& header_out, const StepHeader& expect, const Peer* to, const void* send,
                           std::size_t send_bytes, const Peer* from, void* recv, std::size_t recv_bytes,
                           std::size_t slot, std::size_t unit, const SlotRead* on_read, const std::byte* toward) {
  const std::uint64_t started = cycles::now();  // for the busy counter
  const bool do_send = to != nullptr, do_recv = from != nullptr;
  const Peer& next = do_send ? *to : *from;
  const Peer& prev = do_recv ? *from : *to;
  StepHeader out_header = header_out;
  out_header.magic = kStepMagic;
  out_header.bytes = send_bytes;
  StepHeader in_header{};
  if (!do_send) send_bytes = 0;
  if (!do_recv) recv_bytes = 0;
  if (do_send) to->connection->set_send_protocol(static_cast<Protocol>(header_out.protocol));
  if (do_recv) from->connection->set_recv_protocol(static_cast<Protocol>(expect.protocol));
  // A step's head is its header and the filler after it (pad_before).
  out_header.pad =
      do_send ? static_cast<std::uint16_t>(to->connection->pad_before(send, send_bytes, sizeof(StepHeader))) : 0;
  const std::size_t head_out = sizeof(StepHeader) + out_header.pad;
  std::size_t head_in = sizeof(StepHeader);  // plus the filler, once the header says how much
  std::size_t header_sent = do_send ? 0 : head_out;
  std::size_t data_sent = 0;
  std::size_t header_received = do_recv ? 0 : head_in;
  std::size_t data_received = 0;
  // The link's own pace: from the end of the first read that returned data
  // (whatever had already arrived while this rank was busy elsewhere) to
  // the last byte, over the bytes that came after.
  Clock::time_point first_data{};
  std::size_t first_read = 0;
  std::size_t slots_done = 0;  // bytes handed to on_read
  if (slot == 0) slot = recv_bytes == 0 ? 1 : recv_bytes;
  // Both clocks start when the step first finds nothing to move (a read
  // of the clock costs as much as a small step's copy): the timeout counts
  // from there, the spin lasts `spin` from there.
  // In cycles::now() ticks: the spin reads that clock on every try.
  std::uint64_t deadline = 0, spin_until = 0, look_elsewhere_at = 0;
  bool idle = false;
  // This transfer has put itself in the counters as waiting (cleared on
  // the way out, whichever way that is).
  bool marked_waiting = false;
  struct ClearWaiting {
    const bool& marked;
    ChannelStats* counters;
    ~ClearWaiting() {
      if (marked) counters->waiting_seq.store(0, std::memory_order_relaxed);
    }
  } clear_waiting{marked_waiting, counters};

  auto peer_error = [&](const Peer& peer, int err, const char* doing) {
    if (aborted != nullptr && aborted->load()) throw Error(ErrorCategory::peer, "the communicator was aborted");
    const bool closed = err == net::kPeerClosed || err == ECONNRESET || err == EPIPE;
    throw Error(closed ? ErrorCategory::peer : ErrorCategory::network,
                fmt::format("rank {}: {} rank {} at {} failed during {}: {}{}", rank, doing, peer.rank, peer.address,
                            describe_op(expect), net::errno_text(err), closed ? " (the peer probably died)" : ""));
  };

  // Counters and the link's pace for `bytes` of data just received.
  auto count_received = [&](std::size_t bytes) {
    if (bytes == 0) return;
    if (data_received == 0 && recv_bytes >= ChannelStats::kRateBytes) {
      first_data = Clock::now();
      first_read = bytes;
    }
    if (counters != nullptr) {
      bump(counters->bytes_received, bytes);
      if (from->rank >= 0 && from->rank < counters->peers) {
        bump(counters->from_peer[static_cast<std::size_t>(from->rank)].total, bytes);
      }
    }
  };

  auto check_header = [&] {
    if (in_header.magic != kStepMagic || in_header.pad >= kMaxPad ||
        (in_header.pad != 0 && in_header.bytes < kPaddedFromBytes)) {
      throw Error(ErrorCategory::protocol, fmt::format("rank {}: rank {} at {} sent data that is not a collective step",
                                                       rank, from->rank, from->address));
    }
    if (in_header.collective == expect.collective && in_header.seq == expect.seq) {
      if (const auto field = signature_mismatch(in_header, expect)) {
        throw Error(ErrorCategory::peer, field->message(expect, from->rank, rank));
      }
    }
    if (in_header.collective != expect.collective || in_header.seq != expect.seq || in_header.bytes != recv_bytes ||
        in_header.step != expect.step || in_header.protocol != expect.protocol) {
      StepHeader mine = expect;
      mine.bytes = recv_bytes;
      throw Error(ErrorCategory::peer,
                  fmt::format("collective mismatch: rank {} sent {} but rank {} expected {}; every rank must call the "
                              "same collectives in the same order with the same counts (and the same NCCL_ALGO and "
                              "NCCL_PROTO)",
                              from->rank, describe(in_header), rank, describe(mine)));
    }
  };

  // A collective with a tree runs its steps over the direct connections,
  // a ring over the ring's: a peer that picked the other algorithm for
  // this very collective (different counts, or different NCCL_ALGO or
  // NCCL_PROTO) sends where this rank does not read, and both would wait
  // out the timeout. While this step has received nothing, the peer's
  // other connections of this link are looked at now and then; a step of
  // this collective waiting there is a mismatch.
  const bool has_tree = expect.collective == static_cast<std::uint8_t>(Collective::all_reduce) ||
                        expect.collective == static_cast<std::uint8_t>(Collective::broadcast) ||
                        expect.collective == static_cast<std::uint8_t>(Collective::reduce);
  auto look_elsewhere = [&] { look_for_step_elsewhere(expect, from->rank, from, recv_bytes); };

  // A peer whose liveness socket closed may have sent its last data just
  // before (still in the FIFO, or in libfabric, which may need several
  // progress calls to surface it): that is read first, and the error comes
  // once nothing has moved for kGoneGrace.
  const Peer* peer_gone = nullptr;
  constexpr auto kGoneGrace = std::chrono::milliseconds(250);
  Clock::time_point gone_deadline{};
  int gone_error = 0;
  // Try both directions without waiting; poll only when neither can move.
  // Header and data travel in one call each way when the peer is ready.
  for (;;) {
    if (aborted != nullptr && aborted->load()) throw Error(ErrorCategory::peer, "the communicator was aborted");
    const bool sending = header_sent < head_out || data_sent < send_bytes;
    const bool receiving = header_received < head_in || data_received < recv_bytes;
    // What was handed over but still needs this side's progress keeps
    // getting it while the step waits for its other half.
    if (do_send && !sending) keep_flushing(next);
    progress_unflushed();
    if (!sending && !receiving) break;
    if (!sending && !next.connection->flushed()) next.connection->progress();
    bool progressed = false;
    if (sending) {
      iovec iov[3];
      int n = 0;
      if (header_sent < sizeof(StepHeader)) {
        iov[n++] = {reinterpret_cast<char*>(&out_header) + header_sent, sizeof(StepHeader) - header_sent};
      }
      if (header_sent < head_out) {
        const std::size_t filled = std::max(header_sent, sizeof(StepHeader)) - sizeof(StepHeader);
        iov[n++] = {const_cast<std::byte*>(kFiller.data()), head_out - sizeof(StepHeader) - filled};
      }
      if (data_sent < send_bytes) {
        iov[n++] = {const_cast<char*>(static_cast<const char*>(send)) + data_sent, send_bytes - data_sent};
      }
      const std::int64_t w = next.connection->send_some(iov, n);
      if (w < 0) peer_error(next, w == net::kPeerClosed ? net::kPeerClosed : static_cast<int>(-w), "sending to");
      if (w > 0) {
        std::size_t left = static_cast<std::size_t>(w);
        const std::size_t h = std::min(left, head_out - header_sent);
        header_sent += h;
        data_sent += left - h;
        if (counters != nullptr) {
          bump(counters->bytes_sent, static_cast<std::uint64_t>(w));
        }
        progressed = true;
      }
    }
    if (receiving) {
      // A lending connection hands whole units over in place once the
      // header is in; only a unit it cannot lend whole is copied.
      const bool lending = on_read != nullptr && prev.connection->lends(recv_bytes);
      const bool header_in = header_received >= sizeof(StepHeader);
      const bool have_header = header_received == head_in;  // and the filler
      bool lent = false;
      if (lending && have_header && data_received < recv_bytes && data_received % unit == 0) {
        const std::byte* at = nullptr;
        std::size_t len = std::min(prev.connection->peek(recv_bytes - data_received, &at,
                                                         toward != nullptr ? toward + data_received : nullptr),
                                   recv_bytes - data_received);
        len -= len % unit;
        if (len > 0) {
          if (slots_done < data_received) {
            (*on_read)(slots_done, static_cast<const std::byte*>(recv) + slots_done, data_received - slots_done);
          }
          (*on_read)(data_received, at, len);
          prev.connection->consume(len);
          count_received(len);
          data_received += len;
          slots_done = data_received;
          progressed = lent = true;
        }
      }
      iovec iov[2];
      int n = 0;
      if (!header_in) {
        iov[n++] = {reinterpret_cast<char*>(&in_header) + header_received, sizeof(StepHeader) - header_received};
      } else if (!have_header) {
        thread_local std::array<std::byte, kMaxPad> sink;
        iov[n++] = {sink.data(), head_in - header_received};
      }
      // A large step's data waits for its header: filler may come first.
      const bool data_next = lending ? have_header : header_in || recv_bytes < kPaddedFromBytes;
      if (data_received < recv_bytes && !lent && data_next) {
        const std::size_t want = lending ? unit - data_received % unit : recv_bytes - data_received;
        iov[n++] = {static_cast<char*>(recv) + data_received, std::min(want, recv_bytes - data_received)};
      }
      const std::int64_t r = n == 0 ? 0 : prev.connection->recv_some(iov, n);
      if (r < 0) peer_error(prev, r == net::kPeerClosed ? net::kPeerClosed : static_cast<int>(-r), "receiving from");
      if (r > 0) {
        std::size_t left = static_cast<std::size_t>(r);
        const std::size_t h = std::min(left, head_in - header_received);
        header_received += h;
        if (!header_in && header_received == sizeof(StepHeader)) {
          check_header();
          head_in += in_header.pad;
        }
        count_received(left - h);
        data_received += left - h;
        if (on_read != nullptr) {
          const auto* got = static_cast<const std::byte*>(recv);
          while (data_received - slots_done >= slot || (data_received == recv_bytes && slots_done < recv_bytes) ||
                 (lending && data_received % unit == 0 && data_received > slots_done)) {
            const std::size_t len = std::min(slot, data_received - slots_done);
            (*on_read)(slots_done, got + slots_done, len);
            slots_done += len;
          }
        }
        progressed = true;
      }
    }
    if (progressed) {
      idle = false;
      continue;
    }
    const std::uint64_t tick = cycles::now();
    if (!idle) {
      idle = true;
      deadline = tick + cycles::ticks_in(timeout);
      spin_until = tick + cycles::ticks_in(spin);
      look_elsewhere_at = tick + cycles::ticks_in(kLookElsewhereAfter);
    }
    if (peer_gone != nullptr && Clock::now() >= gone_deadline) {
      peer_error(*peer_gone, gone_error == net::kPeerClosed ? net::kPeerClosed : -gone_error, "waiting for");
    }
    // Retry without sleeping for a short while first: a peer's reply to a
    // small step usually arrives within microseconds, and waking a thread
    // costs tens of them on a VM.
    if (tick < spin_until) {
      // With more ranks than CPUs the peer this step waits on may be the
      // one this rank keeps off its CPU: let it run rather than spin out
      // the scheduler's time slice.
      if (yield_while_spinning) sched_yield();
      continue;
    }
    if (has_tree && do_recv && header_received == 0 && tick >= look_elsewhere_at) {
      look_elsewhere_at = tick + cycles::ticks_in(kLookElsewhereAfter);
      look_elsewhere();
    }
    // libfabric moves only when asked: a connection's first message (its
    // set-up) or a rendezvous waits for the peer to progress its end. A
    // rank about to sleep here keeps its other libfabric connections
    // going, so a peer blocked on one of them gets through and can then
    // serve this step. (A broadcast's closing step once waited on a fresh
    // connection whose other end was busy sending data to this rank.)
    progress_idle_connections(next, prev);
    // Shared memory: ask the peers to ring, unless data moved meanwhile.
    const bool same = sending && receiving && next.connection == prev.connection;
    if (sending && !next.connection->data_pollable() && next.connection->arm_wait(true, same)) continue;
    if (receiving && !same && !prev.connection->data_pollable() && prev.connection->arm_wait(false, true)) continue;
    if (arm_unflushed()) continue;
    pollfd fds[kMaxWatched];
    const Peer* polled[kMaxWatched];
    int nfds = 0;
    auto watch = [&](const Peer& p, short events) {
      const bool data = p.connection->data_pollable();
      if (!data) events = POLLIN;  // a ring, or the peer going away
      const int fd = data ? p.connection->wait_fd(events == POLLOUT) : p.connection->fd();
      for (int i = 0; i < nfds; ++i) {
        if (fds[i].fd == fd) {
          fds[i].events |= events;
          return;
        }
      }
      if (nfds == kMaxWatched) return;  // the rest are seen after the sleep's bound
      polled[nfds] = &p;
      fds[nfds++] = {fd, events, 0};
    };
    if (sending) watch(next, POLLOUT);
    if (receiving) watch(prev, POLLIN);
    for (const Peer* p : unflushed_)
      watch(*p, POLLIN);
    int sleep_us = 100'000;
    for (int i = 0; i < nfds; ++i)
      sleep_us = std::min(sleep_us, polled[i]->connection->max_sleep_us());
    if (nfds == kMaxWatched) sleep_us = std::min(sleep_us, 1000);
    if (counters != nullptr && !marked_waiting) {
      marked_waiting = true;
      const Peer& waited = receiving ? prev : next;
      counters->waiting_at.store(ChannelStats::wait_mark(expect.step, !receiving, waited.rank),
                                 std::memory_order_relaxed);
      counters->waiting_seq.store(expect.seq + 1, std::memory_order_release);
    }
    const int ready = sleep_poll(fds, nfds, sleep_us);
    if (ready < 0 && errno != EINTR) throw Error(ErrorCategory::internal, "poll failed: " + net::errno_text(errno));
    for (int i = 0; ready > 0 && i < nfds; ++i) {
      if (!polled[i]->connection->data_pollable() && (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) != 0) {
        const int err = polled[i]->connection->drain_rings();
        if (err != 0 && peer_gone == nullptr) {
          peer_gone = polled[i], gone_error = err;
          gone_deadline = Clock::now() + kGoneGrace;
        }
      }
    }
    if (ready == 0 && cycles::now() >= deadline) throw no_progress(receiving ? prev : next, receiving, expect);
  }
  if (do_send) keep_flushing(next);
  if (counters != nullptr && do_recv && recv_bytes - first_read >= ChannelStats::kRateBytes && from->rank >= 0 &&
      from->rank < counters->peers) {
    auto& p = counters->from_peer[static_cast<std::size_t>(from->rank)];
    bump(p.bytes, recv_bytes - first_read);
    bump(p.active_ns, static_cast<std::uint64_t>(
                          std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - first_data).count()));
  } else if (counters != nullptr && do_recv && recv_bytes >= ChannelStats::kRateBytes && from->rank >= 0 &&
             from->rank < counters->peers) {
    bump(counters->from_peer[static_cast<std::size_t>(from->rank)].ahead, 1);
  }
  if (counters != nullptr) {
    bump(counters->steps, 1);
    bump(counters->busy_ns, cycles::elapsed_ns(started));
  }
}

Error ChannelLink::no_progress(const Peer& silent, bool receiving, const StepHeader& expect) const {
  // What the kernel can tell: this rank's data to the silent peer (or
  // to the next, which it sent before waiting) unacknowledged.
  std::string cause;
  for (const Peer* p : {&silent, &next}) {
    if (cause.empty() && (p == &silent || p->rank != silent.rank)) cause = path_cause(*p);
  }
  return Error(
      ErrorCategory::timeout,
      fmt::format("rank {}: no progress {} rank {} at {} for {:.1f} s during {} (RINGMASTER_COLL_TIMEOUT){}", rank,
                  receiving ? "receiving from" : "sending to", silent.rank, silent.address, timeout.count() / 1000.0,
                  describe_op(expect), cause.empty() ? "; the peer is stuck, dead, or running something else" : cause));
}

void ChannelLink::progress_unflushed(bool peers_may_leave) {
  for (std::size_t i = 0; i < unflushed_.size();) {
    const Peer& p = *unflushed_[i];
    const std::int64_t rc = p.connection->send_some(nullptr, 0);
    if (rc < 0 && !peers_may_leave) {
      throw Error(
          ErrorCategory::peer,
          fmt::format("rank {}: sending to rank {} at {} failed: {}", rank, p.rank, p.address,
                      rc == net::kPeerClosed ? "the connection closed" : net::errno_text(static_cast<int>(-rc))));
    }
    if (rc < 0 || p.connection->flushed()) {
      unflushed_.erase(unflushed_.begin() + static_cast<std::ptrdiff_t>(i));
    } else {
      ++i;
    }
  }
}

void ChannelLink::look_for_step_elsewhere(const StepHeader& expect, int peer, const Peer* from,
                                          std::size_t recv_bytes) const {
  const Peer* others[3] = {&this->prev, &this->next, nullptr};
  if (peer >= 0 && static_cast<std::size_t>(peer) < mesh.size()) {
    others[2] = &mesh[static_cast<std::size_t>(peer)];
  }
  const bool from_mesh = from == others[2];
  for (const Peer* other : others) {
    if (other == nullptr || !other->valid() || other->rank != peer ||
        (from != nullptr && other->connection == from->connection))
      continue;
    StepHeader there{};
    if (!other->connection->look_ahead(&there, sizeof there)) continue;
    if (there.magic != kStepMagic || there.seq != expect.seq || there.collective != expect.collective) continue;
    // The same call by the same algorithm is this rank's own traffic on
    // that connection (a rooted call's closing step on the ring).
    const auto field = signature_mismatch(there, expect);
    if (!field) continue;
    if (!field->theirs.starts_with("algorithm=")) {
      throw Error(ErrorCategory::peer, field->message(expect, peer, rank));
    }
    StepHeader mine = expect;
    mine.bytes = recv_bytes;
    throw Error(ErrorCategory::peer,
                fmt::format("collective mismatch: rank {} sent {} over {} but rank {} expected {} over {}: the "
                            "two ranks run it with different algorithms; every rank must call the same "
                            "collectives in the same order with the same counts (and the same NCCL_ALGO and "
                            "NCCL_PROTO)",
                            peer, describe(there), from_mesh ? "the ring (Ring)" : "a direct connection (Tree)", rank,
                            describe(mine), from_mesh ? "a direct connection (Tree)" : "the ring (Ring)"));
  }
}

void ChannelLink::progress_idle_connections(const Peer& busy_next, const Peer& busy_prev) {
  auto nudge = [&](const Peer& p) {
    if (p.valid() && &p != &busy_next && &p != &busy_prev && p.connection->kind() == TransportKind::ofi) {
      p.connection->progress();
    }
  };
  nudge(next);
  nudge(prev);
  for (const auto& p : mesh)
    nudge(p);
}

void ChannelLink::keep_flushing(const Peer& peer) {
  if (!peer.connection->flushed() && std::find(unflushed_.begin(), unflushed_.end(), &peer) == unflushed_.end()) {
    unflushed_.push_back(&peer);
  }
}

bool ChannelLink::arm_unflushed() {
  for (const Peer* p : unflushed_) {
    if (!p->connection->data_pollable() && p->connection->arm_wait(true, false)) return true;
  }
  return false;
}

void ChannelLink::flush() {
  if (unflushed_.empty()) return;
  const auto deadline = Clock::now() + timeout;
  auto spin_until = Clock::now() + spin;
  for (;;) {
    if (aborted != nullptr && aborted->load()) throw Error(ErrorCategory::peer, "the communicator was aborted");
    // Once a collective is over here, a peer that closes has taken what
    // it needed (the provider may still have wanted its acknowledgement)
    // or died, which its next collective reports.
    progress_unflushed(true);
    if (unflushed_.empty()) return;
    // The peers may need this rank's part of their own transfers to
    // finish (libfabric's connection set-up, a rendezvous) before ours can.
    for (const Peer* p : {&next, &prev}) {
      if (p->valid()) p->connection->progress();
    }
    for (const auto& p : mesh) {
      if (p.valid()) p.connection->progress();
    }
    if (Clock::now() >= deadline) {
      const Peer& p = *unflushed_.front();
      throw Error(ErrorCategory::timeout,
                  fmt::format("rank {}: rank {} at {} did not take the last data sent to it for {:.1f} s "
                              "(RINGMASTER_COLL_TIMEOUT)",
                              rank, p.rank, p.address, timeout.count() / 1000.0));
    }
    if (Clock::now() < spin_until) {
      if (yield_while_spinning) sched_yield();
      continue;
    }
    if (arm_unflushed()) continue;
    pollfd fds[kMaxWatched];
    int nfds = 0;
    int sleep_us = 100'000;
    for (const Peer* p : unflushed_) {
      if (nfds == kMaxWatched) {
        sleep_us = 1000;
        break;
      }
      fds[nfds++] = {p->connection->fd(), POLLIN, 0};
      sleep_us = std::min(sleep_us, p->connection->max_sleep_us());
    }
    if (sleep_poll(fds, nfds, sleep_us) < 0 && errno != EINTR) {
      throw Error(ErrorCategory::internal, "poll failed: " + net::errno_text(errno));
    }
    std::vector<const Peer*> gone;
    for (int i = 0; i < nfds; ++i) {
      if ((fds[i].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
      const Peer* p = unflushed_[static_cast<std::size_t>(i)];
      if (p->connection->drain_rings() != 0) gone.push_back(p);
    }
    for (const Peer* p : gone) {
      RM_TRACE(net, "rank {}: rank {} closed its connection before acknowledging the last data sent to it", rank,
               p->rank);
      std::erase(unflushed_, p);
    }
  }
}

void ChannelLink::attach_mesh(int p, Peer peer) {
  std::lock_guard lock(mesh_mutex_);
  mesh.at(static_cast<std::size_t>(p)) = std::move(peer);
}

void ChannelLink::connect_missing(int to, int from, const StepHeader& call) {
  if (connector == nullptr) {
    const int missing = to >= 0 && !mesh.at(static_cast<std::size_t>(to)).valid() ? to : from;
    throw Error(ErrorCategory::internal, fmt::format("rank {}: no direct connection to rank {}", rank, missing));
  }
  connector->connect(*this, {to, from}, call);
}

void ChannelLink::shutdown() noexcept {
  if (next.valid()) next.connection->shutdown();
  if (prev.valid()) prev.connection->shutdown();
  std::lock_guard lock(mesh_mutex_);
  for (auto& peer : mesh) {
    if (peer.valid()) peer.connection->shutdown();
  }
}

}  // namespace ringmaster::transport

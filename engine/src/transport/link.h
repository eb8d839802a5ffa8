// One channel's connections: to the next rank on the ring (we send), from
// the previous rank (we receive), and on channel 0 to every peer directly.
// Each is a Connection of whatever transport reaches that peer (shared
// memory on the same host, libfabric, or a socket).
//
// Every transfer starts with a StepHeader carrying the collective, its
// sequence number and byte count, so ranks that disagree on what they are
// running fail with an error naming both, instead of hanging or reducing
// the wrong bytes. exchange() sends and receives at the same time on
// non-blocking connections, so neither side can deadlock on full buffers, and
// calls back per received slot so reductions overlap the transfer (the
// Simple protocol); with one slot the size of the message it is LL. Used
// by one progress thread; abort() may come from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "base/function_ref.h"
#include "net/socket.h"
#include "ringmaster/status.h"
#include "ringmaster/types.h"
#include "transport/connection.h"

namespace ringmaster::transport {

// Sequence numbers from here up are the tuner's calibration calls at init
// (tune/calibrate.cpp), far above any call's, which count from 0.
constexpr std::uint64_t kFirstCalibrationSeq = ~std::uint64_t{0} - 15;

// "all_reduce #12", or "the tuner's calibration (all_reduce)" for one of
// its calls: what a message names a call by.
std::string call_name(Collective collective, std::uint64_t seq);

struct StepHeader {
  std::uint16_t magic = 0;
  // Filler bytes between this header and the data (Connection::pad_before);
  // only steps of kPaddedFromBytes or more have any.
  std::uint16_t pad = 0;
  std::uint8_t collective = 0;
  std::uint8_t protocol = static_cast<std::uint8_t>(Protocol::simple);
  std::uint16_t step = 0;
  std::uint64_t seq = 0;
  std::uint64_t bytes = 0;  // this step's
  // The call's signature: what every rank must have called alike. A step
  // whose signature differs from the receiver's fails naming the field.
  std::uint8_t type = 0;  // DataType
  std::uint8_t op = 0;    // RedOp
  std::uint8_t algorithm = 0;
  std::uint8_t channels = 1;  // the call's parts
  std::int32_t root = 0;
  std::uint64_t count = 0;  // elements, as the call was given
};
static_assert(sizeof(StepHeader) == 40);

inline constexpr std::uint16_t kStepMagic = 0x5253;  // "RS"

// A channel's counters: written by its progress thread, read by samplers,
// relaxed atomics so neither side takes a lock.
struct ChannelStats {
  std::atomic<std::uint64_t> bytes_sent{0};
  std::atomic<std::uint64_t> bytes_received{0};
  std::atomic<std::uint64_t> busy_ns{0};
  std::atomic<std::uint64_t> steps{0};
  // While a transfer sleeps for want of progress (the flight recorder's
  // "waits on"): its collective's seq + 1, 0 when none sleeps; and where
  // it waits, packed by wait_mark(). Set before each sleep, cleared when
  // the transfer ends.
  std::atomic<std::uint64_t> waiting_seq{0};
  std::atomic<std::uint64_t> waiting_at{0};
  static std::uint64_t wait_mark(std::uint16_t step, bool sending, int peer) noexcept {
    return std::uint64_t{step} << 33 | std::uint64_t{sending} << 32 | static_cast<std::uint32_t>(peer);
  }
  // Per source rank, what transfers received after their first read (at
  // least kRateBytes of it): those bytes and the time from that read to
  // the last byte. That is the link's own pace: neither waiting for a late
  // sender nor data that piled up while this rank was busy counts, so a
  // slow link shows at its receiver. A transfer that had (nearly) all
  // arrived by its first read counts in `ahead`: the link outran this rank.
  struct FromPeer {
    std::atomic<std::uint64_t> bytes{0};
    std::atomic<std::uint64_t> active_ns{0};
    std::atomic<std::uint64_t> ahead{0};
    std::atomic<std::uint64_t> total{0};  // every data byte from this peer, any size
  };
  std::unique_ptr<FromPeer[]> from_peer;
  int peers = 0;
  static constexpr std::size_t kRateBytes = 64 * 1024;
};

struct Peer {
  std::unique_ptr<Connection> connection;
  int rank = -1;
  std::string address;
  bool valid() const { return connection != nullptr; }
  TransportKind kind() const { return connection ? connection->kind() : TransportKind::socket; }
};

class ChannelLink;

// Makes direct connections when a call first needs them (transport/direct.h).
class MeshConnector {
 public:
  virtual ~MeshConnector() = default;
  // Connects link.mesh to each rank in `peers` (-1 and this rank skipped)
  // that it has no connection to yet. Each of those ranks makes its part
  // of the same call, which needs this rank: `call` is the step header of
  // this rank's part. Throws Error naming the peer (timeout, a peer that
  // runs the call over the ring, abort).
  virtual void connect(ChannelLink& link, std::initializer_list<int> peers, const StepHeader& call) = 0;
};

class ChannelLink {
 public:
  Peer next;  // we send to it
  Peer prev;  // we receive from it
  int rank = 0;
  std::chrono::milliseconds timeout{60000};  // without progress
  std::chrono::microseconds spin{0};         // busy-retry this long before sleeping in poll()
  bool yield_while_spinning = false;         // more ranks than CPUs here: hand the CPU over on each retry
  const std::atomic<bool>* aborted = nullptr;
  ChannelStats* counters = nullptr;

  // Received bytes [offset, offset + length) of a step, at `data`: in the
  // receive buffer, or still in the connection's FIFO (valid for the call).
  using SlotRead = FunctionRef<void(std::size_t offset, const std::byte* data, std::size_t length)>;

  // Sends `send_bytes` of `send` to next while receiving `recv_bytes` into
  // `recv` from prev. `expect` is what this rank runs; the received header
  // must match it. Throws Error(peer | timeout | protocol) naming the peer.
  // Zero-byte transfers still exchange headers, so every rank takes every
  // step.
  void exchange(const StepHeader& expect, const void* send, std::size_t send_bytes, void* recv,
                std::size_t recv_bytes) {
    transfer(expect, expect, &next, send, send_bytes, &prev, recv, recv_bytes, 0);
  }
  // As exchange, but on_read gets each received slot of `slot` bytes, in
  // order, where it lies: a connection that can lend its FIFO (shared memory's byte ring) hands
  // the bytes over in place, whole `unit`s at a time, so a reduction reads
  // them there instead of from a copy in `recv` (which then only takes
  // what cannot be lent: a unit split by the FIFO's wrap). `toward` is
  // where on_read writes what it computes from the step's first byte: a
  // connection that places lent bytes itself keeps them apart from there
  // (core/bytes.h: offset_apart).
  void exchange_reading(const StepHeader& expect, const void* send, std::size_t send_bytes, void* recv,
                        std::size_t recv_bytes, std::size_t slot, std::size_t unit, const std::byte* toward,
                        const SlotRead& on_read) {
    transfer(expect, expect, &next, send, send_bytes, &prev, recv, recv_bytes, slot, unit, &on_read, toward);
  }
  void send_only(const StepHeader& expect, const void* send, std::size_t bytes) {
    transfer(expect, expect, &next, send, bytes, nullptr, nullptr, 0, 0);
  }
  void recv_only(const StepHeader& expect, void* recv, std::size_t bytes) {
    transfer(expect, expect, nullptr, nullptr, 0, &prev, recv, bytes, 0);
  }

  // Direct connections (channel 0 only), for trees, all_to_all and
  // point-to-point: mesh[p] to rank p once connected; mesh[rank] is empty.
  // The tree neighbours of all_reduce are connected at init, any other
  // peer by `connector` when a call first needs it.
  std::vector<Peer> mesh;
  MeshConnector* connector = nullptr;
  // Puts a connection made here in mesh[p] (shutdown may look at mesh
  // from another thread meanwhile).
  void attach_mesh(int p, Peer peer);

  // Sends to mesh peer `to` while receiving from mesh peer `from` (either
  // may be -1: no transfer that way). The outgoing header is `out`; the
  // incoming one must match `in`.
  void exchange_mesh(const StepHeader& out, int to, const void* send, std::size_t send_bytes, const StepHeader& in,
                     int from, void* recv, std::size_t recv_bytes) {
    connect_mesh(to, from, in);
    transfer(out, in, to >= 0 ? &mesh.at(static_cast<std::size_t>(to)) : nullptr, send, send_bytes,
             from >= 0 ? &mesh.at(static_cast<std::size_t>(from)) : nullptr, recv, recv_bytes, 0);
  }

  // Receives from mesh peer `from` alone, handing the bytes to on_read as
  // exchange_reading does.
  void recv_mesh_reading(const StepHeader& in, int from, void* recv, std::size_t recv_bytes, std::size_t unit,
                         const std::byte* toward, const SlotRead& on_read) {
    connect_mesh(-1, from, in);
    transfer(in, in, nullptr, nullptr, 0, &mesh.at(static_cast<std::size_t>(from)), recv, recv_bytes, 0, unit, &on_read,
             toward);
  }

  // Waits until every connection has sent what it took (libfabric needs
  // this side's progress calls until then); at the end of each collective,
  // while the peers still receive.
  void flush();

  // Wakes a blocked exchange; it then throws.
  void shutdown() noexcept;

  // A tree's step waits on `peer` (from: the connection it waits on, or
  // an unconnected mesh slot): when that rank has sent this very call's
  // step on another of this link's connections with a different
  // signature (another algorithm), throws the mismatch naming both ranks.
  void look_for_step_elsewhere(const StepHeader& expect, int peer, const Peer* from, std::size_t recv_bytes) const;

 private:
  // The error of a transfer that made no progress for the timeout,
  // with what the path says of why when it can tell.
  Error no_progress(const Peer& silent, bool receiving, const StepHeader& expect) const;
  std::mutex mesh_mutex_;  // attach_mesh against shutdown
  void connect_mesh(int to, int from, const StepHeader& call) {
    if ((to >= 0 && !mesh.at(static_cast<std::size_t>(to)).valid()) ||
        (from >= 0 && !mesh.at(static_cast<std::size_t>(from)).valid())) {
      connect_missing(to, from, call);
    }
  }
  void connect_missing(int to, int from, const StepHeader& call);
  // Connections whose sends still need progress (see flush); every
  // transfer drives them, so a later step never waits on an earlier one.
  std::vector<const Peer*> unflushed_;
  static constexpr int kMaxWatched = 8;  // descriptors one wait polls
  void progress_unflushed(bool peers_may_leave = false);
  void keep_flushing(const Peer& peer);
  // Progress for this link's libfabric connections other than the two a
  // stalled step uses (transfer, before it sleeps).
  void progress_idle_connections(const Peer& busy_next, const Peer& busy_prev);
  // arm_wait on every unflushed connection: true when one moved meanwhile.
  bool arm_unflushed();
  void transfer(const StepHeader& header_out, const StepHeader& expect, const Peer* to, const void* send,
                std::size_t send_bytes, const Peer* from, void* recv, std::size_t recv_bytes, std::size_t slot,
                std::size_t unit = 1, const SlotRead* on_read = nullptr, const std::byte* toward = nullptr);
};

}  // namespace ringmaster::transport

// A communicator: a group of ranks and the collectives they run together.
//
// Created from a Config (torchrun's environment or explicit), it walks the
// init stages up to TRANSPORT_CONNECT and READY, then runs collectives over
// per-channel connections (shared memory, libfabric or sockets, the first
// that reaches each peer) along the rings or trees the tuner picks. Every
// collective call returns at once with a Request; the work runs on the
// channels' progress threads, in call order. Like NCCL, every rank must issue the same collectives in the
// same order with matching counts; a mismatch is detected and reported as
// an error naming both ranks. Calls on one communicator must come from one
// thread at a time; abort() may be called from any thread.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ringmaster/config.h"
#include "ringmaster/stage.h"
#include "ringmaster/status.h"
#include "ringmaster/types.h"

namespace ringmaster {

namespace tune {
class Tuner;
struct Decision;
}  // namespace tune

// The outcome of one collective call. Copyable; all copies share the state.
class Request {
 public:
  struct State;
  Request() = default;
  explicit Request(std::shared_ptr<State> state) : state_(std::move(state)) {}

  // Blocks until done; throws Error when the collective failed.
  void wait() const;
  // True when done (successfully or not); never blocks.
  bool test() const;
  // The error, once done; ok() while running or after success.
  Status status() const;

 private:
  std::shared_ptr<State> state_;
};

// One record per completed collective, for telemetry.
struct CollectiveRecord {
  std::uint64_t seq = 0;
  Collective collective = Collective::all_reduce;
  std::size_t bytes = 0;
  Algorithm algorithm = Algorithm::ring;
  Protocol protocol = Protocol::simple;
  int nchannels = 0;
  std::chrono::nanoseconds time{0};
};

// Where a collective is in its life on this rank.
enum class CallState : std::uint8_t {
  queued,   // submitted, not started
  running,  // a part has started
  done,
  failed,
};
std::string_view name_of(CallState state) noexcept;

// One collective as this rank's flight recorder holds it
// (Communicator::recent_calls): always on, the last 256 collectives
// (point-to-point calls are not numbered and not kept), as NCCL's RAS and
// PyTorch's Flight Recorder keep theirs. Times are relative to when the
// record was read, so records from different hosts compare.
struct CallRecord {
  std::uint64_t seq = 0;  // the collective's number on this communicator, from 0
  Collective collective = Collective::all_reduce;
  std::size_t bytes = 0;
  Algorithm algorithm = Algorithm::ring;
  Protocol protocol = Protocol::simple;
  int channels = 1;
  CallState state = CallState::queued;
  std::chrono::microseconds age{0};       // since it was submitted
  std::chrono::microseconds duration{0};  // submitted to done (or failed), or to now while not
  // While a part waits in a transfer (running, nothing moving): the step
  // it is at and the peer it waits on, to receive from or to send to.
  // -1 when no part is waiting.
  int step = -1;
  int waits_on = -1;
  bool waits_to_send = false;
};

// How many collectives this rank has submitted, and how many of them have
// ended (done or failed).
struct CallCounts {
  std::uint64_t started = 0;
  std::uint64_t ended = 0;
};

// One rank's place when a stall was seen: the last collective it called
// and, oldest first, a few calls around its frontier (its last ones done
// and its first ones not).
struct RankWavefront {
  int rank = -1;
  // False when the rank said nothing while the report was gathered: its
  // process is stopped or dead, or it never comes back to Ringmaster (its
  // store connection is still there but its watcher is not answering).
  bool answered = false;
  std::int64_t last_called = -1;  // the highest sequence number it has called (-1: none yet)
  std::vector<CallRecord> calls;
  // When it did not answer and the reporter has a socket to it: what a
  // probe of its host found ("its host answers nothing ...: the path to
  // it is down"); empty when the host answers, or was not probed.
  std::string silence;
};

// What the rank that first saw a collective stop moving gathered from
// every rank (CommOptions::on_stall).
struct StallReport {
  int reporter = -1;      // the rank that saw the stall
  std::uint64_t seq = 0;  // its oldest collective that stopped moving
  Collective collective = Collective::all_reduce;
  std::chrono::milliseconds stalled_for{0};  // without progress on the reporter when seen
  std::chrono::milliseconds gathered_in{0};  // then asking every rank took this long
  std::vector<RankWavefront> ranks;          // every rank, in rank order
  // Who lags and why, in sentences: "rank 5 waits on rank 6 at all_reduce
  // #1234 step 3; rank 6 is at #1233 and has not called #1234".
  std::string diagnosis;
};

// Counters of one channel. Written only by its progress thread and read by
// any sampler without locks.
struct ChannelCounters {
  std::uint64_t bytes_sent = 0;
  std::uint64_t bytes_received = 0;
  std::uint64_t busy_ns = 0;
  std::uint64_t steps = 0;
};

// What this rank received from one peer over all channels, counting what
// arrived after the first read of each transfer (64 KiB and more): bytes,
// and the time from that first read to the last byte. bytes / active time is the link's rate as
// this rank saw it; a slow link shows as an outlier at its receiver.
struct PeerLinkCounters {
  int peer = -1;
  std::uint64_t bytes = 0;
  std::uint64_t active_ns = 0;
  // Transfers of 64 KiB and more that had (nearly) all arrived before this
  // rank read them: the link outran its reader and set no pace to measure.
  std::uint64_t ahead = 0;
  std::uint64_t total_bytes = 0;  // every byte received from the peer (for live per-peer bandwidth)
  // What this rank sent to the peer on its ring connections as TCP counts
  // it (sockets only): segments sent and resent. A lossy link resends.
  std::uint64_t segments_sent = 0;
  std::uint64_t segments_resent = 0;
};

// One connection of this rank and what carries it, as NCCL's
// "Channel 00 : 0[host] -> 1[host] via SHM" lines say.
struct ConnectionInfo {
  int channel = -1;       // ring channel; -1: the direct connection (trees, all_to_all, point-to-point)
  int peer = -1;          // the rank at the other end
  bool outgoing = true;   // this rank opened it (on a ring: the peer is the next rank)
  std::string transport;  // "SHM", "OFI" or "SOCKET"
  std::string address;    // the peer's bootstrap address
  std::string fallback;   // why not shared memory, when both ranks are on one host and it was not used
  int sockets = 1;        // over SOCKET: how many carry it (RINGMASTER_NSOCKS_PER_CHANNEL)
};

// The devices each channel's ring goes through on this rank's node: its
// GPU, and the NIC by which the ring enters or leaves the node at this
// rank, as the topology search placed them (NCCL_TOPO_FILE read alike by
// every rank, each host's ranks its GPUs 0, 1, ... in rank order). Without
// a topology the GPU is unknown and the NIC is the interface of this
// rank's network connections.
struct ChannelDevices {
  int channel = 0;
  int nic = -1;         // NIC number on the node; -1 when unknown or when the ring stays on the node here
  std::string device;   // its network device ("rdmap79s0", "eth0"); empty when the ring stays on the node here
  bool leaves = false;  // this rank sends to the next node through it
  bool enters = false;  // this rank receives from the previous node through it
};
struct RankDevices {
  int gpu = -1;  // GPU number on the node; -1 unknown
  std::vector<ChannelDevices> channels;
};

// Whether a transport can carry connections from this host, as far as can
// be told without a peer: shared memory needs a writable /dev/shm with room
// for a segment and NCCL_SHM_DISABLE unset; libfabric a provider on
// `interface` (empty: any); sockets are always there. In priority order.
struct TransportAvailability {
  std::string name;  // "SHM", "OFI", "SOCKET"
  bool usable = false;
  std::string why;  // when not usable
};
std::vector<TransportAvailability> transport_availability(const std::string& interface = {});

struct CommOptions {
  // Overrides of NCCL_MIN_NCHANNELS / NCCL_MAX_NCHANNELS / NCCL_ALGO /
  // NCCL_PROTO / NCCL_BUFFSIZE / RINGMASTER_COLL_TIMEOUT. A forced
  // algorithm or protocol applies to every collective that has it.
  std::optional<int> min_channels, max_channels;
  std::optional<Algorithm> algorithm;
  std::optional<Protocol> protocol;
  std::optional<std::size_t> buffsize;
  std::optional<std::chrono::milliseconds> timeout;
  // Overrides NCCL_SHM_DISABLE: false keeps this rank's connections to
  // ranks on its host on sockets.
  std::optional<bool> shared_memory;
  // Overrides NCCL_NET: "Socket" or "OFI" (libfabric) to other hosts.
  std::optional<std::string> net;
  // CUDA device buffers (docs/gpu.md): a call whose send or recv is device
  // memory first waits for the work queued on this stream (a cudaStream_t;
  // nullptr: the legacy default stream), then stages the buffers through
  // pinned host memory, and returns once recv holds the result, so work
  // queued afterwards on any stream sees it. The Request it returns is
  // complete (wait() reports a failure). Every device buffer of the
  // communicator is on the device current at its first such call.
  void* cuda_stream = nullptr;
  // Overrides RINGMASTER_CUDA_IPC: all_reduce, all_gather,
  // reduce_scatter, broadcast and reduce of device buffers between ranks
  // of one host read the peers' buffers on the GPU (their pointers
  // when they share this process, CUDA IPC when they do not) instead of
  // staging them through host memory. Taken only when every rank asks for
  // it and every rank can map every peer's buffers; the call falls back
  // to staging otherwise (docs/gpu.md).
  std::optional<bool> cuda_ipc;
  StageCallback on_stage;
  std::function<void(const CollectiveRecord&)> on_collective;
  // The tuner's table the first time a (collective, size) is decided.
  std::function<void(const tune::Decision&)> on_decision;
  // A collective that has made no progress on this rank for stall_after
  // (else RINGMASTER_STALL_S, default 10 s; zero: never) is a stall: the
  // rank that sees it first asks every rank for its recent calls through
  // the store and calls on_stall with the answers, from a watcher thread,
  // within about 2 s. The collective itself goes on waiting (until
  // RINGMASTER_COLL_TIMEOUT). The watcher serves every communicator of the
  // process: on_stall must return soon and must not create or destroy a
  // communicator.
  std::optional<std::chrono::milliseconds> stall_after;
  std::function<void(const StallReport&)> on_stall;
};

class Communicator {
 public:
  // Runs the init stages; throws StageError naming the failing stage.
  static std::unique_ptr<Communicator> create(const Config& config, const CommOptions& options = {});
  ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  int rank() const noexcept;
  int size() const noexcept;
  int max_channels() const noexcept;

  // In place when send == recv. Counts are elements.
  Request all_reduce(const void* send, void* recv, std::size_t count, DataType type, RedOp op);
  // recv holds size() * count elements, rank r's block at r * count.
  Request all_gather(const void* send, void* recv, std::size_t count, DataType type);
  // send holds size() * count elements; recv gets this rank's count.
  Request reduce_scatter(const void* send, void* recv, std::size_t count, DataType type, RedOp op);
  Request broadcast(const void* send, void* recv, std::size_t count, DataType type, int root);
  Request reduce(const void* send, void* recv, std::size_t count, DataType type, RedOp op, int root);
  Request barrier();
  // send holds size() blocks of count elements, block p for rank p; recv
  // gets block q from rank q. Pairwise exchange over direct connections.
  Request all_to_all(const void* send, void* recv, std::size_t count, DataType type);
  // The root's recv gets size() blocks of count elements, block q from rank
  // q; the others' recv is not used. Direct connections to the root.
  Request gather(const void* send, void* recv, std::size_t count, DataType type, int root);
  // The root's send holds size() blocks of count elements; rank q's recv
  // gets block q. The others' send is not used.
  Request scatter(const void* send, void* recv, std::size_t count, DataType type, int root);
  // Point-to-point over the direct connection to `peer`. Matched in call
  // order per pair of ranks; other ranks need not take part. A peer that is
  // not another rank of the communicator throws Error(config).
  Request send(const void* buf, std::size_t count, DataType type, int peer);
  Request recv(void* buf, std::size_t count, DataType type, int peer);
  // Both at once (as an NCCL group of one send and one recv), so a ring of
  // ranks each sending to the next cannot deadlock on full buffers.
  Request sendrecv(const void* send, int to, void* recv, int from, std::size_t count, DataType type);

  // Fails every pending and future collective with an error and wakes every
  // waiter; returns at once. The communicator is unusable afterwards.
  void abort();

  // The double binary trees all_reduce uses: per rank its parent in tree
  // 0 or 1 (-1 at that tree's root).
  std::vector<int> tree_parents(int tree) const;

  // The model this communicator decides with (calibrated at init).
  const tune::Tuner& tuner() const noexcept;

  // Narrows the tuner's choice from the next call on, as --algo / --proto
  // do at init (nullopt: what the init options and NCCL_ALGO / NCCL_PROTO
  // left); the calibrated model stays. `perf --candidates` times every
  // candidate at each size in turn with it. Every rank must call it at the
  // same point of its sequence of calls. Throws Error(config) when the
  // choice leaves a collective nothing.
  void select(std::optional<Algorithm> algorithm, std::optional<Protocol> protocol);
  // Runs `calls` with the tuner's whole choice, whatever NCCL_ALGO /
  // NCCL_PROTO, the init options or select() narrowed it to, then puts the
  // narrowing back: for a caller's own bookkeeping between the user's
  // collectives (gathering where the ranks run, agreeing on timings),
  // which NCCL would run over its bootstrap. `NCCL_ALGO=tree perf
  // all_reduce` thus times Tree while its placement all_gather runs on a
  // ring. Every rank must call it at the same point of its sequence.
  void unfiltered(const std::function<void()>& calls);
  // The tuner's table for a collective of `bytes` under the current
  // selection (what the next such call runs).
  tune::Decision decide(Collective collective, std::size_t bytes) const;

  // Per peer that sent this rank anything (see PeerLinkCounters); lock-free.
  std::vector<PeerLinkCounters> peer_links() const;

  // Every connection this rank has, with its transport.
  std::vector<ConnectionInfo> connections() const;

  // Each channel's ring, its ranks in ring order: rank order, or the
  // topology search's (GPU-NIC affinity) when every rank read the same
  // NCCL_TOPO_FILE.
  std::vector<std::vector<int>> rings() const;
  // The GPU and NICs each rank's channels use (every rank's, from the
  // same search every rank made).
  std::vector<RankDevices> devices() const;

  // A snapshot of channel c's counters.
  ChannelCounters counters(int channel) const;

  // This rank's flight recorder: its last collectives, oldest first, the
  // one in progress with the step and peer it waits on. Lock-free.
  std::vector<CallRecord> recent_calls() const;
  CallCounts call_counts() const noexcept;

  struct Impl;

 private:
  explicit Communicator(std::unique_ptr<Impl> impl);
  Request point_to_point(const void* send, int to, void* recv, int from, std::size_t count, DataType type);
  std::unique_ptr<Impl> impl_;
};

}  // namespace ringmaster

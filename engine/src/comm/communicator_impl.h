// Internal: what a communicator holds (Communicator::Impl) and the pieces
// that work on it, one file each:
//
//   communicator.cpp     the facade: create() runs init in order, accessors
//   settings.cpp         settings resolved per rank and agreed by all
//   topology_stage.cpp   the TOPOLOGY stage: hosts, hardware, ring order
//   transport/setup.cpp  TRANSPORT_CONNECT: the rings' connections and their transports
//   transport/direct.cpp direct connections, at init for the trees, later on first use
//   tune/calibrate.cpp   the links measured for the tuner
//   enqueue.cpp          choosing, splitting and queueing a call (submit)
//   channel.cpp          channels' progress threads and parked work
//   request.cpp          waiting for a call
//   collectives.cpp      every collective's and point-to-point call's work
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "algo/ring.h"
#include "algo/tree.h"
#include "comm/channel.h"
#include "comm/device_staging.h"
#include "comm/flight_recorder.h"
#include "comm/request.h"
#include "comm/settings.h"
#include "gpu/gpu.h"
#include "ringmaster/comm.h"
#include "ringmaster/tools/tuner.h"

namespace ringmaster {

namespace topo {
class Topology;
struct ChannelPlan;
}  // namespace topo
namespace transport {
class DirectConnections;
struct SetupOptions;
struct RingNeighbours;
}  // namespace transport

using comm::Channel;

struct Communicator::Impl {
  std::unique_ptr<Bootstrap> bootstrap;
  // Direct connections made when first used (channel 0's mesh); outlives
  // the channels, whose threads use it.
  std::unique_ptr<transport::DirectConnections> direct;
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
  std::string tree_nodes;  // "rank" or "host" (RINGMASTER_TREE_NODES resolved)
  std::vector<int> tree_node_of;
  std::vector<int> tree_chain_key;  // per rank: its place in its node's chain; empty: rank order
  std::map<int, algo::DoubleTree> trees;
  std::size_t buffsize = 4 << 20;
  std::chrono::milliseconds timeout{60000};
  std::size_t inline_bytes = 65536;  // collectives up to this size may run on the calling thread
  std::size_t pair_bytes = 16384;    // 2-rank all_reduce up to this size: one whole-input exchange
  std::function<void(const CollectiveRecord&)> on_collective;
  std::vector<std::unique_ptr<Channel>> channels;
  std::vector<algo::RingOrder> ring_orders;  // per channel: rank order, or the topology search's
  // Where the topology search put the ranks, when it ordered the rings
  // (devices() names interfaces otherwise).
  struct SearchedPlacement {
    std::vector<int> node_of, gpu_of;     // per rank; gpu_of -1 on nodes without GPUs
    std::vector<std::vector<int>> nic;    // per channel, per node: the NIC number its ring crosses by (-1 none)
    std::vector<std::string> nic_device;  // per NIC number: its network device
  };
  std::optional<SearchedPlacement> searched;
  std::vector<ConnectionInfo> connection_infos;
  std::atomic<bool> aborted{false};
  // The first failed collective part is logged; once it has been, every
  // later one (after an abort: each queued call) is only counted, and the
  // count logged once at the end. Millions of queued calls made millions
  // of lines and a slow exit.
  std::atomic<bool> failure_logged{false};
  std::atomic<std::uint64_t> failures_unlogged{0};
  // The communicator's failure as every part reports it (failure.cpp).
  std::mutex failure_mutex;
  std::optional<Status> failure;
  std::uint64_t next_seq = 0;
  // The last collectives and where they are (comm/flight_recorder.h).
  comm::FlightRecorder recorder;
  // Stall reports (comm/stall_watch.cpp); zero stall_after: none.
  std::chrono::milliseconds stall_after{10000};
  std::function<void(const StallReport&)> on_stall;
  // RINGMASTER_FAULT_HOLD_AT_CALL: the caller of this collective is held
  // before it takes its number (enqueue.cpp).
  std::optional<std::uint64_t> hold_at_call;
  void hold_before_call();
  // The store connection is one connection, used from one thread at a
  // time: a failing part (attribute) and the stall watcher share it.
  std::mutex store_mutex;
  // Point-to-point messages are numbered per pair and direction, so they
  // are checked without involving the other ranks' sequence.
  std::vector<std::uint64_t> p2p_sent, p2p_received;
  // CUDA device buffers (comm/device_calls.cpp): checked on every call
  // only where a device is usable; staged through pinned memory.
  bool cuda_usable = false;
  void* cuda_stream = nullptr;
  // RINGMASTER_CUDA_STAGE_CHUNK. On an H200 with two ranks, paired
  // medians against host buffers: 8 MiB chunks 0.53x at 16 MiB, 0.88x at
  // 64 MiB, 0.98x at 256 MiB; 2 MiB 0.44/0.99/0.70x, 16 MiB 0.47/0.78/0.83x
  // (docs/gpu.md).
  std::size_t stage_chunk = std::size_t{8} << 20;
  std::unique_ptr<comm::DeviceStaging> staging;
  // RINGMASTER_CUDA_IPC as the ranks agreed (peer_view and its callers).
  bool cuda_ipc = false;

  ~Impl();

  // Fails every pending and future call; returns at once.
  void abort();

  // The status a failed part reports, given its own error: the first
  // failure of any rank, learnt through the store (failure.cpp). Call
  // before abort(): a rank that fails on its own account is on record
  // before its peers see its connections close.
  // A collective (`seq`) that timed out after a stall report on it carries
  // the report's diagnosis: the rank that times out first is seldom the
  // one that lags.
  Status attribute(const Status& own, std::optional<std::uint64_t> seq = std::nullopt);

  // On the rank that hosts the store, after a failure: waits until every
  // other rank has read the first failure or left (failure.cpp).
  static constexpr std::chrono::seconds kFailureReadersWait{5};
  void keep_store_for_failure_readers();
  // On the rank that hosts the store, after its init failed: waits until
  // the other ranks have left the store, or kFailureReadersWait.
  void keep_store_while_ranks_connected() noexcept;

  // The flight recorder's calls with the steps their channels wait at.
  std::vector<CallRecord> recent_calls() const;

  // The tuner's pick for a call, remembered per (collective, bytes).
  Choice choose(Collective collective, std::size_t bytes);

  // The double binary tree with `root` first (-1: rank 0).
  const algo::DoubleTree& tree_for(int root);

  // The TOPOLOGY stage (topology_stage.cpp): with a topology every rank
  // shares, the rings follow the topology search.
  void describe_topology(bool same_topology);
  std::string order_rings(const topo::Topology& t);
  SearchedPlacement placement_of(const topo::ChannelPlan& plan, const topo::Topology& t,
                                 const std::vector<int>& rank_of_index) const;

  // TRANSPORT_CONNECT: how the channels wait, and their connections
  // (transport/setup.cpp makes them).
  void connect_channels(const comm::LocalSettings& settings);
  // TRANSPORT_CONNECT's first step: the descriptors the connections will
  // hold fit under RLIMIT_NOFILE (its soft limit raised when the hard one
  // allows), or the stage fails with the count and the limit.
  std::string room_for_connections(const transport::SetupOptions& options,
                                   const std::vector<transport::RingNeighbours>& neighbours,
                                   const std::vector<int>& tree_peers);
  // Those made at init and the direct ones made since.
  std::vector<ConnectionInfo> connections() const;

  // The links measured for the tuner (tune/calibrate.cpp does the work);
  // the channels' counters start from zero afterwards.
  tune::LinkModel calibrate(tune::Shape& shape);
  // Communicator::create's steps: the trees announced, and the CALIBRATE
  // stage with the tuner it leaves.
  void announce_trees();
  void make_tuner(const comm::LocalSettings& settings);

  // A collective's request state and its bookkeeping; JobOf adds its work
  // in the same allocation. Its queued parts hold it by a plain pointer (a
  // closure small enough for std::function to keep without allocating):
  // the job keeps itself alive until its last part has finished.
  struct Job : Request::State {
    Impl* impl = nullptr;
    algo::Task task;
    int nch = 1;
    bool recorded = false;  // a numbered collective, in the flight recorder
    std::shared_ptr<Job> self;

    // A parked job (see submit) is a small collective: channel 0 alone.
    static void run_parked(void* job);

    // Part c on `channel`; completes the request when it is the last part.
    void run(Channel& channel, int c);

   protected:
    Job() = default;
    ~Job() = default;
    // Part c of nch of the collective, on `channel`.
    virtual void execute(Channel& channel, int c) = 0;
  };

  // Work is called as work(channel, index, nchannels, task).
  template <class Work>
  struct JobOf final : Job {
    explicit JobOf(Work&& w) : work(std::move(w)) {}
    Work work;
    void execute(Channel& channel, int c) override { work(channel, c, nch, task); }
  };

  // A call as the caller made it: its signature (which every rank's must
  // match, StepHeader) and the bytes the tuner decides by.
  struct Call {
    Collective collective = Collective::all_reduce;
    std::size_t bytes = 0;
    std::uint64_t count = 0;
    DataType type = DataType::uint8;
    RedOp op = RedOp::sum;
    int root = 0;
    // Collectives take the next sequence number; point-to-point calls do
    // not (other ranks need not make them) and are not recorded.
    bool numbered = true;
    // Where the caller chose already (its schedule depends on the choice):
    // start() takes it as it is instead of choosing again.
    std::optional<Choice> choice = std::nullopt;
  };

  // Splits a call across channels and queues work(channel, index,
  // nchannels, task) on each: one allocation a call.
  template <class Work>
  Request submit(const Call& call, Work work, int forced_channels = 0) {
    return start(std::make_shared<JobOf<Work>>(std::move(work)), call, forced_channels);
  }

  Request start(std::shared_ptr<Job> job, const Call& call, int forced_channels);

  // Work that runs whole on channel 0 (direct connections). Point-to-point
  // calls do not take a collective sequence number: other ranks need not
  // make them.
  template <class Work>
  Request submit_single(Call call, Work work, bool numbered = true) {
    call.numbered = numbered;
    return submit(
        call, [work = std::move(work)](Channel& ch, int, int, const algo::Task& task) { work(ch, task); },
        /*channels=*/1);
  }

  // Whether a call's buffers include device memory.
  bool on_device(const void* a, const void* b) const {
    return cuda_usable && (gpu::is_device_pointer(a) || gpu::is_device_pointer(b));
  }
  // Runs host_call(host_send, host_recv) on pinned copies of device (or
  // host) buffers of send_bytes and recv_bytes (0: that buffer is not used
  // on this rank, and is passed on as it is) and copies recv back; blocks
  // until done. A failure is in the returned (complete) request.
  using HostCall = std::function<Request(const void* host_send, void* host_recv)>;
  Request staged(const void* send, std::size_t send_bytes, void* recv, std::size_t recv_bytes,
                 const HostCall& host_call);
  // all_reduce of device buffers, pipelined: each chunk's host all_reduce
  // starts when its bytes have reached the host, and each result goes back
  // while later chunks are still being reduced.
  Request staged_all_reduce(Communicator& comm, const void* send, void* recv, std::size_t count, DataType type,
                            RedOp op);
  // Collectives of device buffers on the GPU between ranks of one host
  // (cuda_ipc): each rank reads the others' buffers where they are.
  // Nothing when the ranks cannot all map each other's buffers (the
  // caller stages); avg is always staged.
  std::optional<Request> peer_all_reduce(Communicator& comm, const void* send, void* recv, std::size_t count,
                                         DataType type, RedOp op);
  std::optional<Request> peer_all_gather(Communicator& comm, const void* send, void* recv, std::size_t count,
                                         DataType type);
  std::optional<Request> peer_reduce_scatter(Communicator& comm, const void* send, void* recv, std::size_t count,
                                             DataType type, RedOp op);
  std::optional<Request> peer_broadcast(Communicator& comm, const void* send, void* recv, std::size_t count,
                                        DataType type, int root);
  std::optional<Request> peer_reduce(Communicator& comm, const void* send, void* recv, std::size_t count, DataType type,
                                     RedOp op, int root);
  // Every rank's buffers of a call, addressable here (null where a rank
  // does not use that buffer; peers' recv only when `reads_peers_recv`).
  struct PeerView {
    std::vector<const std::byte*> sends;
    std::vector<std::byte*> recvs;
  };
  // The ranks swap their buffers' addresses and CUDA IPC handles (a host
  // all_gather) after waiting for cuda_stream, map the peers' and agree
  // that every rank could; nothing when one could not (logged once per
  // collective with why). Every rank must call it with the same `what`.
  std::optional<PeerView> peer_view(Communicator& comm, std::string_view what, const void* send, std::size_t send_bytes,
                                    void* recv, std::size_t recv_bytes, bool reads_peers_recv);
  // peer_view, then body(view) when every rank can take the path: a
  // complete request (with any failure), or nothing when the call is to
  // be staged (cuda_ipc off, one rank, no bytes, or a rank that could not
  // map its peers).
  std::optional<Request> peer_call(Communicator& comm, std::string_view what, const void* send, std::size_t send_bytes,
                                   void* recv, std::size_t recv_bytes, bool reads_peers_recv,
                                   const std::function<void(const PeerView&)>& body);
  // Runs each phase's work on `stream`, waits for it, then a barrier of
  // all ranks, so no rank goes on while a peer still reads its buffers. A
  // rank whose phase failed skips its later phases but joins every
  // barrier, so none waits in vain; the first failure is rethrown.
  void peer_phases(Communicator& comm, std::initializer_list<std::function<void(void* stream)>> phases);

  algo::Context context(Channel& c) {
    return algo::Context{c.link, rank, nranks, c.scratch, &ring_orders[static_cast<std::size_t>(c.index)]};
  }
};

namespace comm {

// The process's stall watcher (comm/stall_watch.cpp), one thread for every
// communicator: created ones are watched until destroyed.
void watch_for_stalls(Communicator::Impl* impl);
void stop_watching(Communicator::Impl* impl);

}  // namespace comm

}  // namespace ringmaster

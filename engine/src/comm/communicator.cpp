// Communicator: the facade. create() runs init in order (settings, the
// bootstrap, the agreed shape, topology, connections, calibration, the
// progress threads); the calls themselves are in collectives.cpp and the
// machinery in the files comm/communicator_impl.h lists.
//
// Each channel is a ring of connections (shared memory to ranks on the
// same host, libfabric or sockets to the others) served by its own
// progress thread with a FIFO of work. A collective is split evenly across
// the channels it uses; its Request completes when the last of them
// finishes. The first error on any channel aborts the communicator, so no
// channel (and no peer) waits for a partner that has already failed.
#include <algorithm>
#include <cctype>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "base/log.h"
#include "base/params.h"
#include "bootstrap/views.h"
#include "comm/communicator_impl.h"
#include "comm/settings.h"
#include "kernels/reduce.h"
#include "ringmaster/tools/tuner.h"
#include "ringmaster/version.h"
#include "transport/direct.h"
#include "transport/link.h"
#include "tune/calibrate.h"

namespace ringmaster {

tune::LinkModel Communicator::Impl::calibrate(tune::Shape& shape) {
  tune::CalibrationRun run;
  run.rank = rank;
  run.nranks = nranks;
  for (auto& c : channels)
    run.rings.push_back(context(*c));
  run.tree = &tree_for(-1);
  // What carries this rank's links ("shm", "ofi", "socket" or a mix).
  const auto made = connections();
  for (const char* kind : {"SHM", "OFI", "SOCKET"}) {
    const bool used = std::any_of(made.begin(), made.end(), [&](const auto& c) { return c.transport == kind; });
    if (!used) continue;
    if (!run.transport.empty()) run.transport += '+';
    for (const char* k = kind; *k != '\0'; ++k)
      run.transport += static_cast<char>(std::tolower(*k));
  }
  run.placement = fmt::format("{}:{:016x}", bootstrap->host_count(), bootstrap->placement());
  run.buffsize = buffsize;
  run.tree_nodes = tree_nodes;
  auto link = tune::calibrate(run, shape);
  // Counters show the application's traffic, not calibration's.
  for (auto& c : channels) {
    c->stats.bytes_sent = 0;
    c->stats.bytes_received = 0;
    c->stats.busy_ns = 0;
    c->stats.steps = 0;
    for (int p = 0; p < c->stats.peers; ++p) {
      auto& from = c->stats.from_peer[static_cast<std::size_t>(p)];
      from.bytes = 0;
      from.active_ns = 0;
      from.ahead = 0;
      from.total = 0;
    }
  }
  return link;
}

namespace {

// CALIBRATE failed: the link's error, and where to look.
StageFailure calibration_failure(const Bootstrap& bootstrap, const Error& e) {
  auto f = bootstrap.failure(Stage::calibrate, "calibrating the links failed: " + e.status().message());
  f.category = e.category();
  f.hint =
      "Calibration moves the first full-size transfers between the ranks, so a path that passes only small packets, "
      "or a peer that went away, fails here first: the error above names the link and what a probe of its path "
      "found. ringmaster-cli linkcheck measures each pair alone.";
  return f;
}

}  // namespace

Communicator::Communicator(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Communicator::~Communicator() = default;

// Each rank's tree node (its host's or its own), and NCCL's line of the
// trees: per tree, the children (three, -1 for none), this rank, its
// parent.
void Communicator::Impl::announce_trees() {
  for (int r = 0; r < nranks; ++r)
    tree_node_of.push_back(tree_nodes == "host" ? bootstrap->host_of(r) : r);
  const auto& tree = tree_for(-1);
  std::string line;
  for (std::size_t t = 0; t < 2; ++t) {
    std::vector<int> down = tree.children[t];
    down.resize(std::max<std::size_t>(down.size(), 3), -1);
    line += fmt::format(" [{}] {}->{}->{}", t, fmt::join(down, "/"), rank, tree.parent[t]);
  }
  RM_INFO(graph, "Trees{}", line);
}

// The CALIBRATE stage and the tuner: the socket model with the
// RINGMASTER_TUNE_* figures, the links measured (or the cache's figures
// kept), then the tuner over them with the user's overrides.
void Communicator::Impl::make_tuner(const comm::LocalSettings& settings) {
  // The socket model with the RINGMASTER_TUNE_* figures; calibrate()
  // measures the real ones.
  double gbs = 0;
  try {
    gbs = std::stod(param_string(Param::TuneGbs));
  } catch (const std::exception&) {
    throw Error(ErrorCategory::config, "RINGMASTER_TUNE_GBS=" + param_string(Param::TuneGbs) + ": not a number");
  }
  tune::Shape shape = tune::socket_shape(nranks, static_cast<double>(param_int(Param::TuneHopUs)), gbs, max_channels);
  std::vector<int> nodes = tree_node_of;
  std::sort(nodes.begin(), nodes.end());
  shape.nnodes = static_cast<int>(std::unique(nodes.begin(), nodes.end()) - nodes.begin());
  shape.min_channels = min_channels;
  const auto& tree = tree_for(-1);
  shape.tree_depth_intra = tree.depth_intra;
  shape.tree_depth_inter = tree.depth_inter;
  shape.slot_bytes = buffsize / 8;
  shape.pair_bytes = pair_bytes;
  // A stage of its own: on a slow link the calibration is most of init,
  // and its failure is not a connection's.
  bootstrap->run_stage(Stage::calibrate, [&] {
    try {
      shape.intra = shape.inter = calibrate(shape);
      // Each channel beyond the first is a progress thread to wake and a
      // step of its own on every hop; on a VM the wake alone costs tens
      // of microseconds (a 64 KiB all_reduce over sockets on two
      // channels took 3x as long as on one). Three hops' worth keeps
      // small sizes on one channel.
      shape.channel_latency_us = std::max(shape.channel_latency_us,
                                          3 * shape.intra.hop_latency_us[static_cast<std::size_t>(Protocol::simple)]);
      channels[0]->link.flush();
    } catch (const Error& e) {
      throw StageError(calibration_failure(*bootstrap, e));
    }
    return "tuner: " + shape.source;
  });
  algorithms = settings.algorithms;
  protocols = settings.protocols;
  tuner.emplace(std::move(shape), settings.algorithms, settings.protocols);
  if (rank == 0) RM_INFO(tuning, "Tuner: {}", tuner->describe());
}

std::unique_ptr<Communicator> Communicator::create(const Config& config, const CommOptions& options) {
  auto impl = std::make_unique<Impl>();
  // Checked before anything connects; the ranks agree on them once every
  // rank's are known (comm/settings.h).
  const auto settings = comm::LocalSettings::resolve(options);
  impl->timeout = settings.timeout;
  impl->on_collective = options.on_collective;
  impl->cuda_stream = options.cuda_stream;
  impl->cuda_usable = gpu::availability().usable;
  if (impl->cuda_usable) {
    const auto chunk = param_int(Param::CudaStageChunk);
    if (chunk < 0)
      throw Error(ErrorCategory::config, fmt::format("RINGMASTER_CUDA_STAGE_CHUNK={}: must be 0 or more bytes", chunk));
    if (chunk > 0) impl->stage_chunk = static_cast<std::size_t>(chunk);
  }
  impl->stall_after = settings.stall_after;
  impl->hold_at_call = settings.hold_at_call;
  impl->on_stall = options.on_stall;
  // The reduction kernels' level is settled here: a RINGMASTER_CPU_KERNEL
  // the CPU lacks is a configuration error before anything connects, not a
  // failure in the middle of init.
  (void)kernels::active_level();

  {
    // The links are not known yet: only what the overrides leave is
    // checked here (LL128 counts as possible until calibration says).
    tune::Shape any;
    any.intra.ll128 = any.inter.ll128 = true;
    any.nranks = 2;  // and the pair exchange as well
    any.pair_bytes = 1024;
    (void)tune::Tuner(any, settings.algorithms, settings.protocols);
  }

  if (config.rank == 0) log::version_banner(RINGMASTER_VERSION_STRING);
  impl->bootstrap = Bootstrap::run(config, options.on_stage, /*finish=*/false, settings.encode());
  // Should the rest of init fail here, the store's host keeps the store
  // until the others have left it: they may still read from it what
  // their own error names (another rank's settings).
  struct KeepStoreOnFailure {
    Impl* impl;
    bool failed = true;
    ~KeepStoreOnFailure() {
      if (failed) impl->keep_store_while_ranks_connected();
    }
  } keep_store{impl.get()};
  impl->rank = config.rank;
  impl->nranks = config.world_size;
  impl->p2p_sent.assign(static_cast<std::size_t>(config.world_size), 0);
  impl->p2p_received.assign(static_cast<std::size_t>(config.world_size), 0);
  // Every rank computes the same agreement from what all of them asked.
  const auto agreed = comm::agree(*impl->bootstrap);
  {
    impl->min_channels = agreed.min_channels;
    impl->max_channels = agreed.max_channels;
    impl->buffsize = agreed.buffsize;
    impl->pair_bytes = agreed.pair_bytes;
    impl->cuda_ipc = agreed.cuda_ipc;
    for (const auto& line : agreed.reconciled)
      RM_INFO(init, "Settings agreed: {}", line);
  }
  for (int c = 0; c < impl->max_channels; ++c) {
    auto channel = std::make_unique<Channel>();
    channel->index = c;
    channel->run_parked = &Impl::Job::run_parked;
    impl->channels.push_back(std::move(channel));
    impl->ring_orders.push_back(algo::RingOrder::identity(impl->nranks));
  }
  // The trees span ranks, or hosts with their ranks chained: by default
  // hosts when the topology is known (the search chains each host's GPUs
  // from its NIC), ranks otherwise.
  impl->tree_nodes = settings.tree_nodes != "auto" ? settings.tree_nodes : agreed.same_topology ? "host" : "rank";
  impl->describe_topology(agreed.same_topology);
  impl->announce_trees();
  impl->connect_channels(settings);
  if (impl->nranks == 2 && !agreed.pair_bytes_given &&
      impl->channels[0]->link.next.connection->kind() != transport::TransportKind::shm) {
    // Over the network the kernel's copies, not the reduction, bound a
    // 2-rank all_reduce, and one step costs a wake-up less than two: whole
    // inputs win up to 512 KiB (1.4x there; from 1 MiB the ring on two
    // channels does). Shared memory's ring reads the FIFO in place and
    // keeps the default. Both ends of the one connection see its kind.
    impl->pair_bytes = std::max<std::size_t>(impl->pair_bytes, 512 * 1024);
  }
  impl->make_tuner(settings);
  impl->on_decision = options.on_decision;
  for (auto& channel : impl->channels) {
    channel->thread = std::thread([ch = channel.get(), rank = impl->rank] { ch->run(rank); });
  }
  impl->bootstrap->finish();
  comm::watch_for_stalls(impl.get());
  keep_store.failed = false;
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
    parents.push_back(algo::build_double_tree(r, impl_->tree_node_of, -1, impl_->tree_chain_key)
                          .parent[static_cast<std::size_t>(tree)]);
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

void Communicator::unfiltered(const std::function<void()>& calls) {
  Impl& impl = *impl_;
  const std::pair<int, int> whole{-1, -1};  // select()'s keys are >= 0
  auto it = impl.narrowed.find(whole);
  if (it == impl.narrowed.end()) {
    Impl::Narrowed narrowed;
    narrowed.tuner.emplace(impl.tuner->shape(), tune::Selection{}, tune::Selection{});
    it = impl.narrowed.emplace(whole, std::move(narrowed)).first;
  }
  Impl::Narrowed* const before = impl.selected;
  impl.selected = &it->second;
  impl.last_choice.reset();
  struct Restore {
    Impl& impl;
    Impl::Narrowed* before;
    ~Restore() {
      impl.selected = before;
      impl.last_choice.reset();
    }
  } restore{impl, before};
  calls();
}

tune::Decision Communicator::decide(Collective collective, std::size_t bytes) const {
  return (impl_->selected ? *impl_->selected->tuner : *impl_->tuner).decide(collective, bytes);
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
      l.ahead += c->stats.from_peer[static_cast<std::size_t>(p)].ahead.load(std::memory_order_relaxed);
      l.total_bytes += c->stats.from_peer[static_cast<std::size_t>(p)].total.load(std::memory_order_relaxed);
      // The ring connection to `next` is set at init and kept: its
      // sockets' counters can be read while the channel moves data.
      const auto& next = c->link.next;
      if (next.rank != p || !next.valid()) continue;
      if (const auto tcp = next.connection->tcp_segments()) {
        l.segments_sent += tcp->sent;
        l.segments_resent += tcp->resent;
      }
    }
    if (l.total_bytes > 0 || l.segments_sent > 0) out.push_back(l);
  }
  return out;
}

std::vector<std::vector<int>> Communicator::rings() const {
  std::vector<std::vector<int>> out;
  for (const auto& order : impl_->ring_orders)
    out.push_back(order.rank_at);
  return out;
}

std::vector<RankDevices> Communicator::devices() const {
  // A channel crosses the node boundary at a rank whose ring neighbour is
  // on another node: by the search's NIC for the channel on that node, or
  // without a search by the interface of the rank's network connections
  // (the bootstrap's, NCCL_SOCKET_IFNAME).
  const auto& bootstrap = *impl_->bootstrap;
  const auto& searched = impl_->searched;
  const int n = impl_->nranks;
  auto apart = [&](int a, int b) {
    return searched ? searched->node_of[static_cast<std::size_t>(a)] != searched->node_of[static_cast<std::size_t>(b)]
                    : bootstrap.host_of(a) != bootstrap.host_of(b);
  };
  // Without a search, the interfaces of the ranks whose ring leaves the
  // node: their records, read from the store in one round trip (this rank
  // read only its neighbours' at init).
  std::map<int, std::string> ifname_of;
  if (!searched) {
    std::vector<int> wanted;
    for (const auto& order : impl_->ring_orders) {
      for (int r = 0; r < n; ++r) {
        const int p = order.position_of[static_cast<std::size_t>(r)];
        const int next = order.rank_at[static_cast<std::size_t>((p + 1) % n)];
        const int prev = order.rank_at[static_cast<std::size_t>((p + n - 1) % n)];
        if (apart(r, next) || apart(r, prev)) wanted.push_back(r);
      }
    }
    std::sort(wanted.begin(), wanted.end());
    wanted.erase(std::unique(wanted.begin(), wanted.end()), wanted.end());
    try {
      std::lock_guard lock(impl_->store_mutex);
      for (auto& info : bootstrap.read_peers(wanted))
        ifname_of[info.rank] = std::move(info.ifname);
    } catch (const Error& e) {
      RM_INFO(init, "the ranks' interfaces are unknown: {}", e.what());
    }
  }
  std::vector<RankDevices> out(static_cast<std::size_t>(n));
  for (int r = 0; r < n; ++r) {
    if (searched) out[static_cast<std::size_t>(r)].gpu = searched->gpu_of[static_cast<std::size_t>(r)];
  }
  for (std::size_t c = 0; c < impl_->ring_orders.size(); ++c) {
    const auto& order = impl_->ring_orders[c];
    for (int r = 0; r < n; ++r) {
      const int p = order.position_of[static_cast<std::size_t>(r)];
      const int next = order.rank_at[static_cast<std::size_t>((p + 1) % n)];
      const int prev = order.rank_at[static_cast<std::size_t>((p + n - 1) % n)];
      ChannelDevices d{static_cast<int>(c), -1, {}, apart(r, next), apart(r, prev)};
      if (d.leaves || d.enters) {
        if (searched) {
          d.nic = searched->nic[c][static_cast<std::size_t>(searched->node_of[static_cast<std::size_t>(r)])];
          if (d.nic >= 0 && d.nic < static_cast<int>(searched->nic_device.size()))
            d.device = searched->nic_device[static_cast<std::size_t>(d.nic)];
        } else {
          if (const auto found = ifname_of.find(r); found != ifname_of.end()) d.device = found->second;
        }
      }
      out[static_cast<std::size_t>(r)].channels.push_back(std::move(d));
    }
  }
  return out;
}

std::vector<ConnectionInfo> Communicator::connections() const {
  return impl_->connections();
}

std::vector<CallRecord> Communicator::recent_calls() const {
  return impl_->recent_calls();
}

CallCounts Communicator::call_counts() const noexcept {
  return {impl_->recorder.begun(), impl_->recorder.ended_count()};
}

ChannelCounters Communicator::counters(int channel) const {
  const auto& s = impl_->channels.at(static_cast<std::size_t>(channel))->stats;
  return {s.bytes_sent.load(std::memory_order_relaxed), s.bytes_received.load(std::memory_order_relaxed),
          s.busy_ns.load(std::memory_order_relaxed), s.steps.load(std::memory_order_relaxed)};
}

}  // namespace ringmaster

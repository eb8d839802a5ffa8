// TRANSPORT_CONNECT from the communicator's side: how its channels wait
// for their peers (spinning, yielding, work on the caller's thread) given
// how many ranks share this host's CPUs, then the rings' connections
// (transport/setup.cpp) and all_reduce's tree neighbours (the direct
// connections' connector, transport/direct.h, makes any others on first
// use), recorded as ConnectionInfo.
#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <string>
#include <vector>

#include "base/cpus.h"
#include "base/cycles.h"
#include "base/descriptors.h"
#include "base/log.h"
#include "bootstrap/views.h"
#include "comm/communicator_impl.h"
#include "transport/direct.h"
#include "transport/setup.h"

namespace ringmaster {

void Communicator::Impl::connect_channels(const comm::LocalSettings& settings) {
  // More ranks on this host than CPUs to run them: a rank spinning on a
  // step keeps the rank it waits for off the CPU, so spinning yields.
  int ranks_here = 0;
  for (int r = 0; r < nranks; ++r)
    ranks_here += bootstrap->host_of(r) == bootstrap->host_of(rank) ? 1 : 0;
  const bool crowded = ranks_here > base::host_cpus();
  const bool yield_while_spinning = settings.spin_yield == "auto" ? crowded : settings.spin_yield == "1";
  // A rank that yields while it spins gives its CPU to whoever can use
  // it, so it may spin for longer before it sleeps: a step that waits on
  // two ranks sharing a CPU often takes over 50 us, and each sleep costs
  // a wake-up of 20 us or more. With 4 ranks on 2 CPUs, 8 B all_reduce
  // single calls fell into modes 20 us apart (25, 33, 47, 67 us) and
  // their median jumped between them from one run to the next; spinning
  // for 1 ms, they sit at 31-33 us.
  const std::chrono::microseconds link_spin =
      yield_while_spinning && !settings.spin_given ? std::chrono::microseconds(1000) : settings.spin;
  // Nor is a CPU free for a progress thread to overlap a collective
  // with the caller's work: waking one only makes it wait for a CPU (and
  // preempt a rank that has one), so unless RINGMASTER_INLINE_BYTES says
  // otherwise every collective on one channel waits for its caller
  // (4 ranks on 2 CPUs, 256 KiB: 180-310 us a call handed over, 100 here).
  inline_bytes =
      crowded && !settings.inline_bytes_given ? std::numeric_limits<std::size_t>::max() : settings.inline_bytes;
  (void)cycles::ns_per_tick();  // the steps' timer, measured now rather than in the first step
  std::vector<transport::ChannelLink*> links;
  for (auto& channel : channels) {
    channel->link.rank = rank;
    channel->link.timeout = timeout;
    channel->link.spin = link_spin;
    channel->link.yield_while_spinning = yield_while_spinning;
    channel->link.aborted = &aborted;
    channel->link.counters = &channel->stats;
    channel->stats.from_peer = std::make_unique<transport::ChannelStats::FromPeer[]>(static_cast<std::size_t>(nranks));
    channel->stats.peers = nranks;
    links.push_back(&channel->link);
  }
  if (nranks == 1) return;
  transport::SetupOptions options;
  options.shared_memory = settings.shared_memory;
  options.net = settings.net;
  options.sockets_per_channel = settings.sockets_per_channel;
  options.fifo_bytes = settings.shm_fifo_bytes;
  std::vector<transport::RingNeighbours> neighbours;
  for (const auto& order : ring_orders) {
    const int p = order.position_of[static_cast<std::size_t>(rank)];
    neighbours.push_back({order.rank_at[static_cast<std::size_t>((p + 1) % nranks)],
                          order.rank_at[static_cast<std::size_t>((p + nranks - 1) % nranks)]});
  }
  // all_reduce's trees (and calibration's) are connected at once; every
  // other direct connection when a call first needs it (transport/direct.h).
  const auto& tree = tree_for(-1);
  std::vector<int> tree_peers;
  for (std::size_t t = 0; t < 2; ++t) {
    tree_peers.push_back(tree.parent[t]);
    tree_peers.insert(tree_peers.end(), tree.children[t].begin(), tree.children[t].end());
  }
  bootstrap->run_stage(Stage::transport_connect, [&] { return room_for_connections(options, neighbours, tree_peers); });
  auto& first = channels.front()->link;
  first.mesh.resize(static_cast<std::size_t>(nranks));
  direct = std::make_unique<transport::DirectConnections>(*bootstrap, options, store_mutex);
  direct->start();
  first.connector = direct.get();
  for (const auto& c : transport::connect(*bootstrap, links, neighbours, options, *direct)) {
    connection_infos.push_back(
        {c.channel, c.peer, c.outgoing, std::string(transport::name_of(c.kind)), c.address, c.fallback, c.sockets});
  }
  bootstrap->run_stage(Stage::transport_connect, [&] {
    direct->connect_at_init(first, tree_peers);
    return "direct connections to all_reduce's tree neighbours" + direct->stray_note();
  });
}

std::string Communicator::Impl::room_for_connections(const transport::SetupOptions& options,
                                                     const std::vector<transport::RingNeighbours>& neighbours,
                                                     const std::vector<int>& tree_peers) {
  // What stays open once connected, counted low: a connection between
  // hosts holds `sockets_per_channel` sockets (one through libfabric,
  // whose own descriptors are not counted), one within a host through
  // shared memory holds none once mapped, a tree neighbour's direct
  // connection one.
  const int here = bootstrap->host_of(rank);
  auto held_by = [&](int peer) -> std::uint64_t {
    if (peer < 0 || peer == rank) return 0;
    if (options.shared_memory && bootstrap->host_of(peer) == here) return 0;
    return options.net == "ofi" ? 1 : options.sockets_per_channel;
  };
  std::uint64_t ring = 0;
  for (const auto& n : neighbours)
    ring += held_by(n.next) + held_by(n.prev);
  std::vector<int> trees;
  for (const int peer : tree_peers) {
    if (peer >= 0 && peer != rank && std::find(trees.begin(), trees.end(), peer) == trees.end()) trees.push_back(peer);
  }
  const int open = base::open_descriptors();
  if (open < 0) return "descriptors: /proc/self/fd unreadable, not counted";
  // A few more while they form: an accepted connection before its hello
  // is read, a retry's socket, a refused duplicate.
  constexpr std::uint64_t kForming = 4;
  const std::uint64_t needed = static_cast<std::uint64_t>(open) + ring + trees.size() + kForming;
  const auto room = base::make_room_for_descriptors(needed);
  if (room.raised) {
    RM_INFO(init, "RLIMIT_NOFILE raised from below {} to {} (hard limit {}) for this rank's connections", needed,
            room.soft, room.hard);
  }
  if (room.enough) return fmt::format("room for {} descriptors (limit {})", needed, room.soft);
  auto f = bootstrap->failure(
      Stage::transport_connect,
      fmt::format("rank {} needs about {} file descriptors and may open {} (RLIMIT_NOFILE, hard limit {}): {} open "
                  "now, {} socket(s) for its {} channel(s)' ring connections ({} per connection between hosts), {} "
                  "for its tree neighbours, {} while they form",
                  rank, needed, room.soft, room.hard, open, ring, neighbours.size(),
                  options.net == "ofi" ? 1U : options.sockets_per_channel, trees.size(), kForming));
  f.category = ErrorCategory::config;
  f.hint = fmt::format(
      "Raise the descriptor limit for the ranks (ulimit -n; LimitNOFILE= in a systemd unit; --ulimit nofile=N:N for a "
      "container; nofile in /etc/security/limits.conf) to at least {}, or make fewer connections: fewer channels "
      "(NCCL_MAX_NCHANNELS) or fewer sockets per connection (NCCL_NSOCKS_PERTHREAD x NCCL_SOCKET_NTHREADS, now {}).",
      room.advised, options.sockets_per_channel);
  throw StageError(f);
}

std::vector<ConnectionInfo> Communicator::Impl::connections() const {
  std::vector<ConnectionInfo> all = connection_infos;
  if (direct) {
    for (const auto& c : direct->made()) {
      all.push_back(
          {c.channel, c.peer, c.outgoing, std::string(transport::name_of(c.kind)), c.address, c.fallback, c.sockets});
    }
  }
  return all;
}

}  // namespace ringmaster

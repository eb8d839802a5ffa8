// Collectives on CUDA device buffers: staged through pinned host memory
// and run by the host collectives (CommOptions::cuda_stream says what a
// caller can rely on). all_reduce is pipelined in chunks: the copies to
// the host, the host all_reduce of each chunk and the copies back overlap.
// With CommOptions::cuda_ipc, all_reduce, all_gather, reduce_scatter,
// broadcast and reduce between ranks of one host stay on the GPU: each
// rank reads the others' buffers where they are.
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <type_traits>
#include <vector>

#include "comm/communicator_impl.h"
#include "ringmaster/status.h"

namespace ringmaster {

namespace {

// A request that is already complete, with `status`.
Request completed(const Status& status) {
  auto state = std::make_shared<Request::State>();
  state->status = status;
  state->finished.store(1, std::memory_order_release);
  return Request(std::move(state));
}

// The status of running `body`: an Error's own, anything else internal.
template <class Body>
Status status_of(Body body) {
  try {
    body();
    return {};
  } catch (const Error& e) {
    return e.status();
  } catch (const std::exception& e) {
    return {ErrorCategory::internal, e.what()};
  }
}

bool overlaps(const std::byte* a, std::size_t a_bytes, const std::byte* b, std::size_t b_bytes) {
  return a_bytes > 0 && b_bytes > 0 && a < b + b_bytes && b < a + a_bytes;
}

constexpr std::size_t kAlign = 256;
std::size_t round_up(std::size_t n) {
  return (n + kAlign - 1) / kAlign * kAlign;
}

// all_reduce's pipeline keeps this many chunks on their way to the host
// ahead of the one being reduced: few enough that a chunk is reduced soon
// after it lands, while it is still in the CPU's cache (PCIe writes land
// in the last-level cache on most servers), which saves a trip through
// memory that the host reduction is short of.
constexpr std::size_t kChunksAhead = 4;

// What a rank tells the others about its buffers for peer_all_reduce.
struct PeerRecord {
  std::uint64_t process = 0;  // this process, told apart from one with its pid in another pid namespace
  std::int32_t device = -1;   // both buffers' device; -1: not both on one device
  std::int32_t exported = 0;  // the handles are valid (cudaMalloc'd memory)
  std::uint64_t send = 0, recv = 0;
  std::uint64_t send_offset = 0, recv_offset = 0;
  std::array<unsigned char, 64> send_handle{}, recv_handle{};
};
static_assert(std::is_trivially_copyable_v<PeerRecord>);

std::uint64_t this_process() {
  static const std::uint64_t id = [] {
    std::random_device random;
    return (static_cast<std::uint64_t>(random()) << 32) ^ random() ^ static_cast<std::uint64_t>(::getpid());
  }();
  return id;
}

}  // namespace

std::optional<Communicator::Impl::PeerView> Communicator::Impl::peer_view(Communicator& comm, std::string_view what,
                                                                          const void* send, std::size_t send_bytes,
                                                                          void* recv, std::size_t recv_bytes,
                                                                          bool reads_peers_recv) {
  if (!staging) staging = std::make_unique<comm::DeviceStaging>();
  ++staging->peer_calls;
  if (send_bytes == 0) send = nullptr;
  if (recv_bytes == 0) recv = nullptr;

  PeerRecord mine;
  mine.process = this_process();
  mine.send = reinterpret_cast<std::uintptr_t>(send);
  mine.recv = reinterpret_cast<std::uintptr_t>(recv);
  std::string why_not;  // this rank's reason to stage, for the log
  {
    const int s_dev = send != nullptr ? gpu::device_of(send) : -2;
    const int r_dev = recv != nullptr ? gpu::device_of(recv) : -2;
    const int device = s_dev == -2 ? r_dev : s_dev;
    mine.device = device >= 0 && (r_dev == -2 || r_dev == device) ? device : -1;
  }
  if (mine.device < 0) why_not = "the buffers are not all on one device";
  try {
    if (send != nullptr) {
      const gpu::IpcHandle h = gpu::export_memory(send);
      mine.send_handle = h.bytes;
      mine.send_offset = h.offset;
    }
    if (recv != nullptr) {
      const gpu::IpcHandle h = gpu::export_memory(recv);
      mine.recv_handle = h.bytes;
      mine.recv_offset = h.offset;
    }
    mine.exported = 1;
  } catch (const Error& e) {
    mine.exported = 0;  // peers in this process still read them
    if (why_not.empty()) why_not = e.status().message();
  }
  // The work that wrote send comes first: once the records are all in,
  // every rank's send is ready to read.
  gpu::synchronize(cuda_stream);
  std::vector<PeerRecord> all(static_cast<std::size_t>(nranks));
  comm.unfiltered([&] { comm.all_gather(&mine, all.data(), sizeof mine, DataType::uint8).wait(); });

  // Where each rank's buffers are from here.
  PeerView view;
  view.sends.resize(all.size());
  view.recvs.resize(all.size());
  int in_process = 0;
  int reachable = mine.device >= 0 ? 1 : 0;
  for (std::size_t q = 0; q < all.size() && reachable; ++q) {
    const PeerRecord& p = all[q];
    if (p.device < 0 || !gpu::can_access_peer(mine.device, p.device)) {
      if (why_not.empty())
        why_not = fmt::format("rank {}'s device {} cannot be reached from device {}", q, p.device, mine.device);
      reachable = 0;
      break;
    }
    const bool wanted_recv = p.recv != 0 && (reads_peers_recv || q == static_cast<std::size_t>(rank));
    if (p.process == mine.process) {
      if (p.device != mine.device) gpu::enable_peer_access(p.device);
      view.sends[q] = reinterpret_cast<const std::byte*>(p.send);
      if (wanted_recv) view.recvs[q] = reinterpret_cast<std::byte*>(p.recv);
      in_process += static_cast<int>(q != static_cast<std::size_t>(rank));
      continue;
    }
    if (!p.exported) {
      why_not = fmt::format("rank {}'s buffers have no CUDA IPC handle", q);
      reachable = 0;
      break;
    }
    try {
      if (p.send != 0) view.sends[q] = static_cast<const std::byte*>(staging->map(p.send_handle)) + p.send_offset;
      if (wanted_recv) view.recvs[q] = static_cast<std::byte*>(staging->map(p.recv_handle)) + p.recv_offset;
    } catch (const Error& e) {
      why_not = fmt::format("rank {}'s buffers: {}", q, e.status().message());
      reachable = 0;
    }
  }
  int everyone = 0;
  comm.unfiltered([&] { comm.all_reduce(&reachable, &everyone, 1, DataType::int32, RedOp::min).wait(); });
  const std::string path = everyone ? fmt::format(
                                          "read on the GPU from the peers ({} in this process, {} through "
                                          "CUDA IPC)",
                                          in_process, nranks - 1 - in_process)
                                    : "staged through host memory: " +
                                          (why_not.empty() ? std::string("a peer cannot map this rank's") : why_not);
  std::string& said = staging->peer_path_said[std::string(what)];
  if (path != said) {
    RM_INFO(coll, "{} of device buffers: {}", what, path);
    said = path;
  }
  if (!everyone) return std::nullopt;
  return view;
}

void Communicator::Impl::peer_phases(Communicator& comm, std::initializer_list<std::function<void(void*)>> phases) {
  void* stream = staging->to_device.get();
  std::optional<Error> failed;
  for (const auto& phase : phases) {
    try {
      if (!failed) {
        phase(stream);
        staging->to_device.synchronize();
      }
    } catch (const Error& e) {
      failed = e;
    }
    comm.barrier().wait();
  }
  if (failed) throw *failed;
}

std::optional<Request> Communicator::Impl::peer_call(Communicator& comm, std::string_view what, const void* send,
                                                     std::size_t send_bytes, void* recv, std::size_t recv_bytes,
                                                     bool reads_peers_recv,
                                                     const std::function<void(const PeerView&)>& body) {
  // The same on every rank (agreed settings, the call's arguments), so
  // all take this path or none.
  if (!cuda_ipc || nranks < 2 || (send_bytes == 0 && recv_bytes == 0)) return std::nullopt;
  bool took = false;
  const Status status = status_of([&] {
    const auto view = peer_view(comm, what, send, send_bytes, recv, recv_bytes, reads_peers_recv);
    if (!view) return;
    took = true;
    body(*view);
  });
  if (!took && status.ok()) return std::nullopt;
  return completed(status);
}

namespace {

// The element range [first, first + elements) that rank q of n computes
// of `count`: 16-byte multiples, so the vector loads stay aligned.
struct Slice {
  std::size_t at = 0;  // bytes
  std::size_t elements = 0;
};
Slice slice_of(std::size_t q, std::size_t n, std::size_t count, std::size_t es) {
  const std::size_t unit = std::max<std::size_t>(16 / es, 1);
  const std::size_t per = ((count + n - 1) / n + unit - 1) / unit * unit;
  const std::size_t first = std::min(count, q * per);
  return {first * es, std::min(count, first + per) - first};
}

}  // namespace

std::optional<Request> Communicator::Impl::peer_all_reduce(Communicator& comm, const void* send, void* recv,
                                                           std::size_t count, DataType type, RedOp op) {
  if (op == RedOp::avg) return std::nullopt;  // its scaling is left to the staged path
  const std::size_t es = size_of(type);
  const std::size_t bytes = count * es;
  return peer_call(comm, "all_reduce", send, bytes, recv, bytes, /*reads_peers_recv=*/true, [&](const PeerView& view) {
    // Rank q reduces slice q, starting from its own send: in place, its
    // send is read only by that first kernel before the slice is
    // overwritten. One rank computes each slice, so every rank ends with
    // the same bits. Then each copies the others' slices.
    const std::size_t n = view.sends.size();
    const auto me = static_cast<std::size_t>(rank);
    auto* r = static_cast<std::byte*>(recv);
    const auto* s = static_cast<const std::byte*>(send);
    peer_phases(comm, {[&](void* stream) {
                         const Slice mine = slice_of(me, n, count, es);
                         for (std::size_t step = 1; step < n && mine.elements > 0; ++step) {
                           const std::size_t q = (me + step) % n;
                           gpu::reduce(r + mine.at, (step == 1 ? s : r) + mine.at, view.sends[q] + mine.at,
                                       mine.elements, type, op, stream);
                         }
                       },
                       [&](void* stream) {
                         for (std::size_t q = 0; q < n; ++q) {
                           const Slice theirs = slice_of(q, n, count, es);
                           if (q != me && theirs.elements > 0)
                             gpu::copy_async(r + theirs.at, view.recvs[q] + theirs.at, theirs.elements * es, stream);
                         }
                       }});
    RM_TRACE(coll, "all_reduce of {} device bytes on the GPU across {} ranks", bytes, n);
  });
}

std::optional<Request> Communicator::Impl::peer_all_gather(Communicator& comm, const void* send, void* recv,
                                                           std::size_t count, DataType type) {
  const std::size_t block = count * size_of(type);
  return peer_call(comm, "all_gather", send, block, recv, block * static_cast<std::size_t>(nranks),
                   /*reads_peers_recv=*/false, [&](const PeerView& view) {
                     // Each rank copies every rank's block into its own recv; in place, its
                     // own block is already there (and is what the others read).
                     auto* r = static_cast<std::byte*>(recv);
                     peer_phases(comm, {[&](void* stream) {
                                   for (std::size_t q = 0; q < view.sends.size(); ++q) {
                                     std::byte* to = r + q * block;
                                     if (to != view.sends[q]) gpu::copy_async(to, view.sends[q], block, stream);
                                   }
                                 }});
                   });
}

std::optional<Request> Communicator::Impl::peer_reduce_scatter(Communicator& comm, const void* send, void* recv,
                                                               std::size_t count, DataType type, RedOp op) {
  if (op == RedOp::avg) return std::nullopt;
  const std::size_t block = count * size_of(type);
  return peer_call(comm, "reduce_scatter", send, block * static_cast<std::size_t>(nranks), recv, block,
                   /*reads_peers_recv=*/false, [&](const PeerView& view) {
                     // Rank r reduces block r of every rank's send into its recv, starting
                     // from its own: in place (recv is block r of its send) that block is
                     // read by the first kernel only, and no other rank reads it.
                     const std::size_t n = view.sends.size();
                     const auto me = static_cast<std::size_t>(rank);
                     const std::size_t at = me * block;
                     auto* r = static_cast<std::byte*>(recv);
                     peer_phases(comm, {[&](void* stream) {
                                   for (std::size_t step = 1; step < n; ++step) {
                                     const std::size_t q = (me + step) % n;
                                     gpu::reduce(r, step == 1 ? view.sends[me] + at : r, view.sends[q] + at, count,
                                                 type, op, stream);
                                   }
                                 }});
                   });
}

std::optional<Request> Communicator::Impl::peer_broadcast(Communicator& comm, const void* send, void* recv,
                                                          std::size_t count, DataType type, int root) {
  const std::size_t block = count * size_of(type);
  return peer_call(comm, "broadcast", send, rank == root ? block : 0, recv, block, /*reads_peers_recv=*/false,
                   [&](const PeerView& view) {
                     auto* r = static_cast<std::byte*>(recv);
                     const std::byte* from = view.sends[static_cast<std::size_t>(root)];
                     peer_phases(comm, {[&](void* stream) {
                                   if (r != from) gpu::copy_async(r, from, block, stream);
                                 }});
                   });
}

std::optional<Request> Communicator::Impl::peer_reduce(Communicator& comm, const void* send, void* recv,
                                                       std::size_t count, DataType type, RedOp op, int root) {
  if (op == RedOp::avg) return std::nullopt;
  const std::size_t es = size_of(type);
  const std::size_t bytes = count * es;
  return peer_call(comm, "reduce", send, bytes, recv, rank == root ? bytes : 0, /*reads_peers_recv=*/true,
                   [&](const PeerView& view) {
                     // Rank q reduces slice q into the root's recv, starting from the
                     // root's send: in place there, that slice is read by the first kernel
                     // before it is written.
                     const std::size_t n = view.sends.size();
                     const auto me = static_cast<std::size_t>(rank);
                     const auto top = static_cast<std::size_t>(root);
                     std::byte* out = view.recvs[top];
                     peer_phases(comm, {[&](void* stream) {
                                   const Slice mine = slice_of(me, n, count, es);
                                   bool first = true;
                                   for (std::size_t step = 1; step < n && mine.elements > 0; ++step) {
                                     const std::size_t q = (top + step) % n;
                                     gpu::reduce(out + mine.at, (first ? view.sends[top] : out) + mine.at,
                                                 view.sends[q] + mine.at, mine.elements, type, op, stream);
                                     first = false;
                                   }
                                 }});
                   });
}

Request Communicator::Impl::staged(const void* send, std::size_t send_bytes, void* recv, std::size_t recv_bytes,
                                   const HostCall& host_call) {
  const auto* s = static_cast<const std::byte*>(send);
  auto* r = static_cast<std::byte*>(recv);
  if (s == nullptr) send_bytes = 0;
  if (r == nullptr) recv_bytes = 0;
  const Status status = status_of([&] {
    if (!staging) staging = std::make_unique<comm::DeviceStaging>();
    // What goes to the host, and where each buffer is there. In-place
    // forms (all_gather's input inside its output, reduce_scatter's output
    // inside its input) stage the span of both, so the host call sees them
    // overlap as the caller's buffers do.
    const std::byte* copy_from = s;
    std::size_t copy_bytes = send_bytes;
    // A buffer this rank does not use (a broadcast's send off the root, a
    // reduce's recv) is handed on as pinned memory too: the host call must
    // not take it for a device buffer again (and stage itself for ever).
    const void* host_send = nullptr;
    void* host_recv = nullptr;
    std::size_t recv_at = 0;
    if (overlaps(s, send_bytes, r, recv_bytes)) {
      const std::byte* lo = std::min<const std::byte*>(s, r);
      copy_from = lo;
      copy_bytes = static_cast<std::size_t>(std::max<const std::byte*>(s + send_bytes, r + recv_bytes) - lo);
      std::byte* base = staging->host(copy_bytes);
      host_send = base + (s - lo);
      host_recv = base + (r - lo);
      recv_at = static_cast<std::size_t>(r - lo);
    } else {
      std::byte* base = staging->host(round_up(send_bytes) + recv_bytes + 1);
      host_send = base;
      recv_at = round_up(send_bytes);
      host_recv = base + recv_at;
    }
    gpu::synchronize(cuda_stream);  // the work that wrote send comes first
    gpu::copy_async(staging->pinned.data(), copy_from, copy_bytes, staging->to_host.get());
    staging->to_host.synchronize();
    host_call(host_send, host_recv).wait();
    gpu::copy_async(r, staging->pinned.data() + recv_at, recv_bytes, staging->to_device.get());
    staging->to_device.synchronize();
  });
  return completed(status);
}

Request Communicator::Impl::staged_all_reduce(Communicator& comm, const void* send, void* recv, std::size_t count,
                                              DataType type, RedOp op) {
  const std::size_t es = size_of(type);
  const std::size_t bytes = count * es;
  const Status status = status_of([&] {
    if (!staging) staging = std::make_unique<comm::DeviceStaging>();
    std::byte* host = staging->host(bytes);
    const std::size_t per_chunk = std::max<std::size_t>(stage_chunk / es, 1);
    const std::size_t chunks = count == 0 ? 0 : (count + per_chunk - 1) / per_chunk;
    auto first = [&](std::size_t i) { return i * per_chunk; };
    auto size = [&](std::size_t i) { return std::min(count, first(i) + per_chunk) - first(i); };
    void* to_host = staging->to_host.get();
    auto fetch = [&](std::size_t i) {
      if (i >= chunks) return;
      gpu::copy_async(host + first(i) * es, static_cast<const std::byte*>(send) + first(i) * es, size(i) * es, to_host);
      staging->event(i % (kChunksAhead + 1)).record(to_host);
    };

    const auto started = std::chrono::steady_clock::now();
    auto us_since_start = [&] {
      return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - started).count();
    };
    double first_here_us = 0, last_reduced_us = 0;
    gpu::synchronize(cuda_stream);  // the work that wrote send comes first
    for (std::size_t i = 0; i < kChunksAhead; ++i)
      fetch(i);
    // Chunk i's host all_reduce starts once its bytes are there; while it
    // runs, chunk i + kChunksAhead is fetched and chunk i - 1's result goes
    // back. On a failure every call already made is still waited for: none
    // may be left writing to `host`.
    std::optional<Error> failed;
    Request previous;
    auto finish = [&](std::size_t i) {
      try {
        previous.wait();
      } catch (const Error& e) {
        if (!failed) failed = e;
      }
      if (!failed) {
        gpu::copy_async(static_cast<std::byte*>(recv) + first(i) * es, host + first(i) * es, size(i) * es,
                        staging->to_device.get());
      }
    };
    for (std::size_t i = 0; i < chunks; ++i) {
      staging->event(i % (kChunksAhead + 1)).synchronize();
      if (i == 0) first_here_us = us_since_start();
      fetch(i + kChunksAhead);
      Request current;
      if (!failed) current = comm.all_reduce(host + first(i) * es, host + first(i) * es, size(i), type, op);
      if (i > 0) finish(i - 1);
      previous = current;
    }
    if (chunks > 0) finish(chunks - 1);
    last_reduced_us = us_since_start();
    staging->to_device.synchronize();
    RM_TRACE(coll,
             "all_reduce of {} device bytes: {} chunks; first chunk on the host after {:.0f} us, last reduced "
             "after {:.0f} us, results back after {:.0f} us",
             bytes, chunks, first_here_us, last_reduced_us, us_since_start());
    if (failed) throw *failed;
  });
  return completed(status);
}

}  // namespace ringmaster

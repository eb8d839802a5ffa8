// Collectives on CUDA device buffers: staged through pinned host memory
// and run by the host collectives (CommOptions::cuda_stream says what a
// caller can rely on). all_reduce is pipelined in chunks: the copies to
// the host, the host all_reduce of each chunk and the copies back overlap.
#include <algorithm>
#include <chrono>
#include <memory>
#include <optional>
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

}  // namespace

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

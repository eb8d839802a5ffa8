// Collectives on CUDA device buffers: staged through pinned host memory
// and run by the host collectives (CommOptions::cuda_stream says what a
// caller can rely on). all_reduce is pipelined in chunks: the copies to
// the host, the host all_reduce of each chunk and the copies back overlap.
#include <algorithm>
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

// all_reduce's pipeline: chunks of an eighth of the call, from 1 MiB to
// 16 MiB, so a 16 MiB call overlaps eight and a large one stays at a few
// host calls per 100 MiB.
std::size_t chunk_bytes(std::size_t bytes) {
  return std::clamp<std::size_t>(bytes / 8, std::size_t{1} << 20, std::size_t{16} << 20);
}

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
    const void* host_send = send;
    void* host_recv = recv;
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
      std::byte* base = staging->host(round_up(send_bytes) + recv_bytes);
      if (send_bytes > 0) host_send = base;
      recv_at = round_up(send_bytes);
      if (recv_bytes > 0) host_recv = base + recv_at;
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
    const std::size_t per_chunk = std::max<std::size_t>(chunk_bytes(bytes) / es, 1);
    const std::size_t chunks = count == 0 ? 0 : (count + per_chunk - 1) / per_chunk;
    auto first = [&](std::size_t i) { return i * per_chunk; };
    auto size = [&](std::size_t i) { return std::min(count, first(i) + per_chunk) - first(i); };

    gpu::synchronize(cuda_stream);  // the work that wrote send comes first
    void* to_host = staging->to_host.get();
    for (std::size_t i = 0; i < chunks; ++i) {
      gpu::copy_async(host + first(i) * es, static_cast<const std::byte*>(send) + first(i) * es, size(i) * es, to_host);
      staging->event(i).record(to_host);
    }
    // Each chunk's host all_reduce is queued as soon as its bytes are
    // there; the channels run them in order while later chunks arrive.
    std::vector<Request> calls;
    calls.reserve(chunks);
    for (std::size_t i = 0; i < chunks; ++i) {
      staging->event(i).synchronize();
      calls.push_back(comm.all_reduce(host + first(i) * es, host + first(i) * es, size(i), type, op));
    }
    // Results go back as each call completes. On a failure the remaining
    // calls are still waited for: none may be left writing to `host`.
    std::optional<Error> failed;
    for (std::size_t i = 0; i < chunks; ++i) {
      try {
        calls[i].wait();
      } catch (const Error& e) {
        if (!failed) failed = e;
        continue;
      }
      if (!failed) {
        gpu::copy_async(static_cast<std::byte*>(recv) + first(i) * es, host + first(i) * es, size(i) * es,
                        staging->to_device.get());
      }
    }
    staging->to_device.synchronize();
    if (failed) throw *failed;
  });
  return completed(status);
}

}  // namespace ringmaster

// Internal: what a communicator keeps to stage CUDA device buffers through
// host memory (comm/device_calls.cpp): page-locked memory that grows to
// the largest call, a stream each way and an event per chunk. Made at the
// first call on device buffers, on the device current then.
#pragma once

#include <cstddef>
#include <vector>

#include "gpu/gpu.h"

namespace ringmaster::comm {

struct DeviceStaging {
  gpu::PinnedMemory pinned;
  gpu::Stream to_host, to_device;
  std::vector<gpu::Event> arrived;  // per chunk: its bytes are on the host

  // At least `bytes` of pinned memory (kept between calls).
  std::byte* host(std::size_t bytes) {
    if (pinned.size() < bytes) {
      pinned = gpu::PinnedMemory();  // the old one first: both at once could exhaust locked memory
      pinned = gpu::PinnedMemory(bytes);
    }
    return pinned.data();
  }

  gpu::Event& event(std::size_t i) {
    while (arrived.size() <= i)
      arrived.emplace_back();
    return arrived[i];
  }
};

}  // namespace ringmaster::comm

// Internal: what a communicator keeps to stage CUDA device buffers through
// host memory (comm/device_calls.cpp): page-locked memory that grows to
// the largest call, a stream each way and an event per chunk; and, for
// all_reduce on the GPU between ranks of one host, the peers' allocations
// mapped through CUDA IPC. Made at the first call on device buffers, on
// the device current then.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
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

  // Peers' allocations mapped here, by handle, with the call that used
  // each last. Mapping costs far more than a small call, so they are kept;
  // past kMappedKept the least recently used ones not used by this call
  // are unmapped.
  static constexpr std::size_t kMappedKept = 64;
  struct Mapped {
    gpu::PeerMemory memory;
    std::uint64_t used = 0;
  };
  std::map<std::array<unsigned char, 64>, Mapped> mapped;
  std::uint64_t peer_calls = 0;
  std::map<std::string, std::string> peer_path_said;  // per collective: what the log said last about its path

  // The base of a peer's allocation in this process, mapped at first use.
  void* map(const std::array<unsigned char, 64>& handle) {
    auto it = mapped.find(handle);
    if (it == mapped.end()) {
      while (mapped.size() >= kMappedKept) {
        auto oldest = mapped.end();
        for (auto m = mapped.begin(); m != mapped.end(); ++m) {
          if (m->second.used != peer_calls && (oldest == mapped.end() || m->second.used < oldest->second.used))
            oldest = m;
        }
        if (oldest == mapped.end()) break;
        mapped.erase(oldest);
      }
      it = mapped.emplace(handle, Mapped{gpu::PeerMemory(handle), 0}).first;
    }
    it->second.used = peer_calls;
    return it->second.memory.base();
  }
};

}  // namespace ringmaster::comm

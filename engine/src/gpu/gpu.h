// CUDA devices, as far as the engine uses them: whether they can be used
// here, element-wise kernels on device memory, and the pieces that stage
// device buffers through pinned host memory (comm/device_calls.cpp).
//
// No CUDA header is needed to include this file, and every function exists
// in every build: a build without the CUDA toolkit (RINGMASTER_CUDA off)
// says so through availability() and never sees a device pointer. The
// CUDA runtime and kernels are in a module opened only where the driver
// (libcuda.so.1) loads (gpu/cuda_module.h), so a host without a driver or
// without a GPU only reads "not usable" with the reason.
//
// Streams are `cudaStream_t` passed as void* (nullptr: the legacy default
// stream).
#pragma once

#include <array>
#include <cstddef>
#include <string>

#include "ringmaster/types.h"

namespace ringmaster::gpu {

struct Availability {
  bool built = false;   // this build has CUDA code
  bool usable = false;  // a driver loaded and at least one device is visible
  int devices = 0;
  int driver_version = 0;   // cudaDriverGetVersion: 13000 for 13.0
  int runtime_version = 0;  // the runtime this build carries
  std::string why;          // when not usable: what was missing
};

// Probed once, at the first call; thread-safe.
const Availability& availability();

// Whether p points into memory of a CUDA device (cudaMalloc'd or a
// managed allocation); false when CUDA is not usable here.
bool is_device_pointer(const void* p) noexcept;

// The device p lives on; -1 for host memory.
int device_of(const void* p) noexcept;

// dst[i] = a[i] op b[i] on device memory, queued on `stream`: the same
// arithmetic as kernels::reduce (kernels/elementwise.h). Pointers must be
// aligned to the element size (16-byte aligned ones take the vector path).
// Throws Error when CUDA is not usable, a pointer is misaligned or the
// launch fails.
void reduce(void* dst, const void* a, const void* b, std::size_t count, DataType type, RedOp op, void* stream);
// NCCL's avg on device memory: floating types premultiplied by 1/nranks,
// integers divided at the end (kernels/reduce.h).
void premultiply_avg(void* dst, const void* src, std::size_t count, DataType type, int nranks, void* stream);
void finish_avg(void* buffer, std::size_t count, DataType type, int nranks, void* stream);

// Thin owners of CUDA objects. Each throws Error when CUDA is not usable
// or the call fails; each is movable, not copyable.
class DeviceMemory {
 public:
  DeviceMemory() = default;
  explicit DeviceMemory(std::size_t bytes);
  ~DeviceMemory();
  DeviceMemory(DeviceMemory&& other) noexcept;
  DeviceMemory& operator=(DeviceMemory&& other) noexcept;
  void* data() const noexcept { return data_; }
  std::size_t size() const noexcept { return size_; }

 private:
  void* data_ = nullptr;
  std::size_t size_ = 0;
};

// Page-locked host memory: what copies to and from a device run at full
// speed from, asynchronously.
class PinnedMemory {
 public:
  PinnedMemory() = default;
  explicit PinnedMemory(std::size_t bytes);
  ~PinnedMemory();
  PinnedMemory(PinnedMemory&& other) noexcept;
  PinnedMemory& operator=(PinnedMemory&& other) noexcept;
  std::byte* data() const noexcept { return data_; }
  std::size_t size() const noexcept { return size_; }

 private:
  std::byte* data_ = nullptr;
  std::size_t size_ = 0;
};

class Stream {
 public:
  Stream();  // non-blocking with respect to the legacy default stream
  ~Stream();
  Stream(Stream&& other) noexcept;
  Stream& operator=(Stream&& other) noexcept;
  void* get() const noexcept { return stream_; }
  void synchronize() const;

 private:
  void* stream_ = nullptr;
};

class Event {
 public:
  Event();  // timing disabled: the cheapest kind, for ordering
  ~Event();
  Event(Event&& other) noexcept;
  Event& operator=(Event&& other) noexcept;
  void record(void* stream) const;
  void synchronize() const;

 private:
  void* event_ = nullptr;
};

// Any direction (host, pinned or device pointers), queued on `stream`.
void copy_async(void* dst, const void* src, std::size_t bytes, void* stream);
void synchronize(void* stream);
// Blocks until every stream of the current device is idle.
void synchronize_device();
// Selects the device of this thread's later CUDA calls.
void set_device(int device);

// Peers' memory (comm/device_calls.cpp). Whether `device` can read and
// write `peer`'s memory (true for the same device); false when CUDA is not
// usable or the query fails.
bool can_access_peer(int device, int peer) noexcept;
// Lets the current device reach `peer`'s memory (done already counts).
void enable_peer_access(int peer);

// What another process needs to map a device buffer: the CUDA IPC handle
// of the allocation it is in, and its offset there.
struct IpcHandle {
  std::array<unsigned char, 64> bytes{};
  std::size_t offset = 0;
};
// Throws Error when `p` is not in memory cudaMalloc gave (memory from
// cudaMallocAsync pools or the virtual memory calls has no such handle).
IpcHandle export_memory(const void* p);

// A peer process's allocation mapped into this one (cudaIpcOpenMemHandle;
// unmapped when destroyed). A process cannot map its own allocations.
class PeerMemory {
 public:
  PeerMemory() = default;
  explicit PeerMemory(const std::array<unsigned char, 64>& handle);
  ~PeerMemory();
  PeerMemory(PeerMemory&& other) noexcept;
  PeerMemory& operator=(PeerMemory&& other) noexcept;
  void* base() const noexcept { return base_; }

 private:
  void* base_ = nullptr;
};

}  // namespace ringmaster::gpu

// gpu.h over the CUDA module (gpu/cuda_module.h): availability, pointer
// queries, the owners of device memory, pinned memory, streams and events,
// and the kernels, each forwarded to libringmaster_cuda.so once it is open.
// Arguments are checked here, and a CUDA failure becomes an Error naming
// the call.
#include <dlfcn.h>
#include <fmt/format.h>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "base/log.h"
#include "gpu/cuda_module.h"
#include "gpu/gpu.h"
#include "ringmaster/status.h"

namespace ringmaster::gpu {

namespace {

struct Loaded {
  Availability availability;
  const RingmasterCudaApi* api = nullptr;
};

#if defined(RINGMASTER_HAVE_CUDA)
// Where the module is looked for: RINGMASTER_CUDA_MODULE, else the one
// this build made (in a build tree), else by name on the library path
// (an install puts it beside libringmaster.so).
const RingmasterCudaApi* open_module(std::string& why) {
  std::vector<std::string> tries;
  if (const char* forced = std::getenv("RINGMASTER_CUDA_MODULE")) tries.emplace_back(forced);
#if defined(RINGMASTER_CUDA_MODULE_BUILT)
  tries.emplace_back(RINGMASTER_CUDA_MODULE_BUILT);
#endif
  tries.emplace_back("libringmaster_cuda.so");
  std::string errors;
  for (const auto& path : tries) {
    void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      const char* err = ::dlerror();
      errors += fmt::format("{}{}", errors.empty() ? "" : "; ", err != nullptr ? err : path);
      continue;
    }
    using Entry = const RingmasterCudaApi* (*)();
    auto entry = reinterpret_cast<Entry>(::dlsym(handle, "ringmaster_cuda_api"));
    const RingmasterCudaApi* api = entry != nullptr ? entry() : nullptr;
    if (api == nullptr || api->version != kRingmasterCudaApiVersion) {
      errors += fmt::format("{}{}: not this version's CUDA module", errors.empty() ? "" : "; ", path);
      ::dlclose(handle);
      continue;
    }
    return api;  // kept open for the process's life
  }
  why = "the CUDA module did not load (" + errors + ")";
  return nullptr;
}
#endif

Loaded probe() {
  Loaded l;
  Availability& a = l.availability;
#if !defined(RINGMASTER_HAVE_CUDA)
  a.why = "this build has no CUDA (configured without the CUDA toolkit, or with RINGMASTER_CUDA=OFF)";
  return l;
#else
  a.built = true;
  // The driver first: where there is none the module is never opened.
  if (::dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL) == nullptr) {
    a.why = "no NVIDIA driver (libcuda.so.1 did not load)";
    return l;
  }
  const RingmasterCudaApi* api = open_module(a.why);
  if (api == nullptr) return l;
  api->runtime_version(&a.runtime_version);
  if (api->driver_version(&a.driver_version) != 0 || a.driver_version == 0) {
    a.why = "no NVIDIA driver (the CUDA runtime found none)";
    return l;
  }
  if (const int err = api->device_count(&a.devices); err != 0 || a.devices == 0) {
    a.devices = 0;
    a.why = err == 0 ? "no CUDA device is visible"
                     : fmt::format("no CUDA device is usable: {} ({})", api->error_string(err), api->error_name(err));
    return l;
  }
  if (a.driver_version < a.runtime_version) {
    a.why =
        fmt::format("the driver supports CUDA {}.{}, older than this build's runtime {}.{}", a.driver_version / 1000,
                    a.driver_version % 1000 / 10, a.runtime_version / 1000, a.runtime_version % 1000 / 10);
    return l;
  }
  a.usable = true;
  l.api = api;
  return l;
#endif
}

const Loaded& loaded() {
  static const Loaded l = [] {
    Loaded probed = probe();
    const auto& a = probed.availability;
    if (a.usable) {
      RM_INFO(init, "CUDA: {} device(s), driver {}.{}, runtime {}.{}", a.devices, a.driver_version / 1000,
              a.driver_version % 1000 / 10, a.runtime_version / 1000, a.runtime_version % 1000 / 10);
    }
    return probed;
  }();
  return l;
}

// The module's table; throws Error(config) naming why CUDA is not usable.
const RingmasterCudaApi& api() {
  const Loaded& l = loaded();
  if (l.api == nullptr) throw Error(ErrorCategory::config, "CUDA is not usable here: " + l.availability.why);
  return *l.api;
}

void check(int err, const char* what) {
  if (err == 0) return;
  const auto& a = api();
  throw Error(ErrorCategory::internal,
              fmt::format("CUDA: {} failed: {} ({})", what, a.error_string(err), a.error_name(err)));
}

}  // namespace

const Availability& availability() {
  return loaded().availability;
}

int device_of(const void* p) noexcept {
  const Loaded& l = loaded();
  if (p == nullptr || l.api == nullptr) return -1;
  int device = -1;
  return l.api->pointer_device(p, &device) == 0 ? device : -1;
}

bool is_device_pointer(const void* p) noexcept {
  return device_of(p) >= 0;
}

void reduce(void* dst, const void* a, const void* b, std::size_t count, DataType type, RedOp op, void* stream) {
  const auto& cuda = api();
  const std::size_t width = size_of(type);
  for (const void* p : {static_cast<const void*>(dst), a, b}) {
    if (reinterpret_cast<std::uintptr_t>(p) % width != 0) {
      throw Error(ErrorCategory::config, fmt::format("a device buffer of {} is not aligned to its element size ({} "
                                                     "bytes), as CUDA loads require",
                                                     name_of(type), width));
    }
  }
  check(cuda.reduce(dst, a, b, count, static_cast<int>(type), static_cast<int>(op), stream), "the reduce kernel");
}

void premultiply_avg(void* dst, const void* src, std::size_t count, DataType type, int nranks, void* stream) {
  const auto& cuda = api();
  if (nranks <= 0) throw Error(ErrorCategory::internal, fmt::format("premultiply_avg called with nranks={}", nranks));
  if (!is_floating(type)) {
    throw Error(ErrorCategory::internal, fmt::format("premultiply_avg called for {}, an integer type", name_of(type)));
  }
  check(cuda.premultiply_avg(dst, src, count, static_cast<int>(type), nranks, stream), "the avg kernel");
}

void finish_avg(void* buffer, std::size_t count, DataType type, int nranks, void* stream) {
  const auto& cuda = api();
  if (nranks <= 0) throw Error(ErrorCategory::internal, fmt::format("finish_avg called with nranks={}", nranks));
  check(cuda.finish_avg(buffer, count, static_cast<int>(type), nranks, stream), "the avg kernel");
}

// Moving an owner swaps its handle.
DeviceMemory::DeviceMemory(DeviceMemory&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}
DeviceMemory& DeviceMemory::operator=(DeviceMemory&& other) noexcept {
  std::swap(data_, other.data_);
  std::swap(size_, other.size_);
  return *this;
}
PinnedMemory::PinnedMemory(PinnedMemory&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}
PinnedMemory& PinnedMemory::operator=(PinnedMemory&& other) noexcept {
  std::swap(data_, other.data_);
  std::swap(size_, other.size_);
  return *this;
}
Stream::Stream(Stream&& other) noexcept : stream_(std::exchange(other.stream_, nullptr)) {}
Stream& Stream::operator=(Stream&& other) noexcept {
  std::swap(stream_, other.stream_);
  return *this;
}
Event::Event(Event&& other) noexcept : event_(std::exchange(other.event_, nullptr)) {}
Event& Event::operator=(Event&& other) noexcept {
  std::swap(event_, other.event_);
  return *this;
}

DeviceMemory::DeviceMemory(std::size_t bytes) : size_(bytes) {
  check(api().malloc_device(&data_, bytes == 0 ? 1 : bytes), "cudaMalloc");
}
DeviceMemory::~DeviceMemory() {
  if (data_ != nullptr) api().free_device(data_);
}

PinnedMemory::PinnedMemory(std::size_t bytes) : size_(bytes) {
  void* p = nullptr;
  check(api().malloc_pinned(&p, bytes == 0 ? 1 : bytes), "cudaMallocHost");
  data_ = static_cast<std::byte*>(p);
}
PinnedMemory::~PinnedMemory() {
  if (data_ != nullptr) api().free_pinned(data_);
}

Stream::Stream() {
  check(api().stream_create(&stream_), "cudaStreamCreateWithFlags");
}
Stream::~Stream() {
  if (stream_ != nullptr) api().stream_destroy(stream_);
}
void Stream::synchronize() const {
  check(api().stream_synchronize(stream_), "cudaStreamSynchronize");
}

Event::Event() {
  check(api().event_create(&event_), "cudaEventCreateWithFlags");
}
Event::~Event() {
  if (event_ != nullptr) api().event_destroy(event_);
}
void Event::record(void* stream) const {
  check(api().event_record(event_, stream), "cudaEventRecord");
}
void Event::synchronize() const {
  check(api().event_synchronize(event_), "cudaEventSynchronize");
}

void copy_async(void* dst, const void* src, std::size_t bytes, void* stream) {
  if (bytes == 0) return;
  check(api().copy_async(dst, src, bytes, stream), "cudaMemcpyAsync");
}

void synchronize(void* stream) {
  check(api().stream_synchronize(stream), "cudaStreamSynchronize");
}

void synchronize_device() {
  check(api().device_synchronize(), "cudaDeviceSynchronize");
}

void set_device(int device) {
  check(api().set_device(device), "cudaSetDevice");
}

bool can_access_peer(int device, int peer) noexcept {
  if (device == peer) return true;
  const Loaded& l = loaded();
  int can = 0;
  return l.api != nullptr && l.api->can_access_peer(device, peer, &can) == 0 && can != 0;
}

void enable_peer_access(int peer) {
  check(api().enable_peer_access(peer), "cudaDeviceEnablePeerAccess");
}

IpcHandle export_memory(const void* p) {
  static_assert(sizeof(IpcHandle::bytes) == kIpcHandleBytes);
  IpcHandle h;
  check(api().ipc_export(p, h.bytes.data(), &h.offset), "cudaIpcGetMemHandle");
  return h;
}

PeerMemory::PeerMemory(const std::array<unsigned char, 64>& handle) {
  check(api().ipc_open(handle.data(), &base_), "cudaIpcOpenMemHandle");
}
PeerMemory::~PeerMemory() {
  if (base_ != nullptr) api().ipc_close(base_);
}
PeerMemory::PeerMemory(PeerMemory&& other) noexcept : base_(std::exchange(other.base_, nullptr)) {}
PeerMemory& PeerMemory::operator=(PeerMemory&& other) noexcept {
  std::swap(base_, other.base_);
  return *this;
}

}  // namespace ringmaster::gpu

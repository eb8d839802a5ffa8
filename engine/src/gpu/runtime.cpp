// The CUDA runtime behind gpu.h: availability, pointer queries and the
// owners of device memory, pinned memory, streams and events. Compiled by
// the C++ compiler against cuda_runtime.h when the build has CUDA
// (RINGMASTER_HAVE_CUDA); otherwise every function says the build has no
// CUDA.
#include <fmt/format.h>

#include <mutex>
#include <utility>

#include "base/log.h"
#include "gpu/gpu.h"
#include "ringmaster/status.h"

#if defined(RINGMASTER_HAVE_CUDA)
#include <cuda_runtime.h>
#endif

namespace ringmaster::gpu {

// Moving an owner swaps its handle: the same with or without CUDA.
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

#if defined(RINGMASTER_HAVE_CUDA)

namespace {

[[noreturn]] void fail(cudaError_t err, const char* what) {
  throw Error(ErrorCategory::internal,
              fmt::format("CUDA: {} failed: {} ({})", what, cudaGetErrorString(err), cudaGetErrorName(err)));
}

void check(cudaError_t err, const char* what) {
  if (err != cudaSuccess) fail(err, what);
}

void require_usable() {
  const auto& a = availability();
  if (!a.usable) throw Error(ErrorCategory::config, "CUDA is not usable here: " + a.why);
}

Availability probe() {
  Availability a;
  a.built = true;
  cudaRuntimeGetVersion(&a.runtime_version);
  const cudaError_t driver = cudaDriverGetVersion(&a.driver_version);
  if (driver != cudaSuccess || a.driver_version == 0) {
    a.why = "no NVIDIA driver (libcuda.so.1 did not load)";
    cudaGetLastError();
    return a;
  }
  const cudaError_t count = cudaGetDeviceCount(&a.devices);
  if (count != cudaSuccess || a.devices == 0) {
    a.devices = 0;
    a.why = count == cudaSuccess
                ? "no CUDA device is visible"
                : fmt::format("no CUDA device is usable: {} ({})", cudaGetErrorString(count), cudaGetErrorName(count));
    cudaGetLastError();
    return a;
  }
  if (a.driver_version < a.runtime_version) {
    a.why =
        fmt::format("the driver supports CUDA {}.{}, older than this build's runtime {}.{}", a.driver_version / 1000,
                    a.driver_version % 1000 / 10, a.runtime_version / 1000, a.runtime_version % 1000 / 10);
    return a;
  }
  a.usable = true;
  return a;
}

}  // namespace

const Availability& availability() {
  static const Availability a = [] {
    Availability probed = probe();
    if (probed.usable) {
      RM_INFO(init, "CUDA: {} device(s), driver {}.{}, runtime {}.{}", probed.devices, probed.driver_version / 1000,
              probed.driver_version % 1000 / 10, probed.runtime_version / 1000, probed.runtime_version % 1000 / 10);
    }
    return probed;
  }();
  return a;
}

int device_of(const void* p) noexcept {
  if (p == nullptr || !availability().usable) return -1;
  cudaPointerAttributes attributes{};
  if (cudaPointerGetAttributes(&attributes, p) != cudaSuccess) {
    cudaGetLastError();  // an unregistered host pointer on old drivers
    return -1;
  }
  return attributes.type == cudaMemoryTypeDevice || attributes.type == cudaMemoryTypeManaged ? attributes.device : -1;
}

bool is_device_pointer(const void* p) noexcept {
  return device_of(p) >= 0;
}

DeviceMemory::DeviceMemory(std::size_t bytes) : size_(bytes) {
  require_usable();
  check(cudaMalloc(&data_, bytes == 0 ? 1 : bytes), "cudaMalloc");
}
DeviceMemory::~DeviceMemory() {
  if (data_ != nullptr) cudaFree(data_);
}

PinnedMemory::PinnedMemory(std::size_t bytes) : size_(bytes) {
  require_usable();
  void* p = nullptr;
  check(cudaMallocHost(&p, bytes == 0 ? 1 : bytes), "cudaMallocHost");
  data_ = static_cast<std::byte*>(p);
}
PinnedMemory::~PinnedMemory() {
  if (data_ != nullptr) cudaFreeHost(data_);
}

Stream::Stream() {
  require_usable();
  cudaStream_t s = nullptr;
  check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
  stream_ = s;
}
Stream::~Stream() {
  if (stream_ != nullptr) cudaStreamDestroy(static_cast<cudaStream_t>(stream_));
}
void Stream::synchronize() const {
  check(cudaStreamSynchronize(static_cast<cudaStream_t>(stream_)), "cudaStreamSynchronize");
}

Event::Event() {
  require_usable();
  cudaEvent_t e = nullptr;
  check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreateWithFlags");
  event_ = e;
}
Event::~Event() {
  if (event_ != nullptr) cudaEventDestroy(static_cast<cudaEvent_t>(event_));
}
void Event::record(void* stream) const {
  check(cudaEventRecord(static_cast<cudaEvent_t>(event_), static_cast<cudaStream_t>(stream)), "cudaEventRecord");
}
void Event::synchronize() const {
  check(cudaEventSynchronize(static_cast<cudaEvent_t>(event_)), "cudaEventSynchronize");
}
void Event::wait_on(void* stream) const {
  check(cudaStreamWaitEvent(static_cast<cudaStream_t>(stream), static_cast<cudaEvent_t>(event_), 0),
        "cudaStreamWaitEvent");
}

void copy_async(void* dst, const void* src, std::size_t bytes, void* stream) {
  if (bytes == 0) return;
  check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, static_cast<cudaStream_t>(stream)), "cudaMemcpyAsync");
}

void synchronize(void* stream) {
  check(cudaStreamSynchronize(static_cast<cudaStream_t>(stream)), "cudaStreamSynchronize");
}

void synchronize_device() {
  check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
}

void set_device(int device) {
  require_usable();
  check(cudaSetDevice(device), "cudaSetDevice");
}

#else  // no CUDA in this build

namespace {

[[noreturn]] void no_cuda() {
  throw Error(ErrorCategory::config, "CUDA is not usable here: " + availability().why);
}

}  // namespace

const Availability& availability() {
  static const Availability a = [] {
    Availability none;
    none.why = "this build has no CUDA (configured without the CUDA toolkit, or with RINGMASTER_CUDA=OFF)";
    return none;
  }();
  return a;
}

int device_of(const void*) noexcept {
  return -1;
}
bool is_device_pointer(const void*) noexcept {
  return false;
}

void reduce(void*, const void*, const void*, std::size_t, DataType, RedOp, void*) {
  no_cuda();
}
void premultiply_avg(void*, const void*, std::size_t, DataType, int, void*) {
  no_cuda();
}
void finish_avg(void*, std::size_t, DataType, int, void*) {
  no_cuda();
}

DeviceMemory::DeviceMemory(std::size_t) {
  no_cuda();
}
DeviceMemory::~DeviceMemory() = default;
PinnedMemory::PinnedMemory(std::size_t) {
  no_cuda();
}
PinnedMemory::~PinnedMemory() = default;
Stream::Stream() {
  no_cuda();
}
Stream::~Stream() = default;
void Stream::synchronize() const {
  no_cuda();
}
Event::Event() {
  no_cuda();
}
Event::~Event() = default;
void Event::record(void*) const {
  no_cuda();
}
void Event::synchronize() const {
  no_cuda();
}
void Event::wait_on(void*) const {
  no_cuda();
}
void copy_async(void*, const void*, std::size_t, void*) {
  no_cuda();
}
void synchronize(void*) {
  no_cuda();
}
void synchronize_device() {
  no_cuda();
}
void set_device(int) {
  no_cuda();
}

#endif

}  // namespace ringmaster::gpu

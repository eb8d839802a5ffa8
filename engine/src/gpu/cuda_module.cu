// The CUDA module (libringmaster_cuda.so, gpu/cuda_module.h): the CUDA
// runtime calls the engine makes, and the element-wise kernels on device
// memory: every dtype x op of
// kernels::reduce, from the same one-element definitions
// (kernels/elementwise.h), so the GPU rounds, wraps and propagates NaN
// exactly as the CPU does.
//
// Each thread moves 16 bytes per load when the three pointers are 16-byte
// aligned (one uint4: four floats, eight halves), over a grid-stride loop
// sized to the device (a few blocks per multiprocessor); the tail and
// unaligned buffers go element by element.
#include <cuda.h>
#include <cuda_runtime.h>
#include <cstdint>

#include "gpu/cuda_module.h"
#include "kernels/elementwise.h"
#include "ringmaster/types.h"

namespace ringmaster::gpu {
namespace {

using kernels::Half;

// The element operation and its storage type.
template <class T, RedOp op>
struct NativeOp {
  using Storage = T;
  __device__ static T apply(T a, T b) { return kernels::combine_element<op>(a, b); }
};

template <Half kind, RedOp op>
struct HalfOp {
  using Storage = std::uint16_t;
  __device__ static std::uint16_t apply(std::uint16_t a, std::uint16_t b) {
    return kernels::combine_half<kind, op>(a, b);
  }
};

constexpr int kThreads = 512;

template <class Op>
__global__ void reduce_kernel(typename Op::Storage* dst, const typename Op::Storage* a, const typename Op::Storage* b,
                              std::size_t n, bool vectors) {
  using S = typename Op::Storage;
  constexpr int kPer = 16 / sizeof(S);
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  const std::size_t first = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  std::size_t done = 0;
  if (vectors) {
    const std::size_t nvec = n / kPer;
    const auto* va = reinterpret_cast<const uint4*>(a);
    const auto* vb = reinterpret_cast<const uint4*>(b);
    auto* vd = reinterpret_cast<uint4*>(dst);
    for (std::size_t v = first; v < nvec; v += stride) {
      const uint4 x = va[v];
      const uint4 y = vb[v];
      S xs[kPer], ys[kPer];
      memcpy(xs, &x, 16);
      memcpy(ys, &y, 16);
#pragma unroll
      for (int k = 0; k < kPer; ++k)
        xs[k] = Op::apply(xs[k], ys[k]);
      uint4 out;
      memcpy(&out, xs, 16);
      vd[v] = out;
    }
    done = nvec * kPer;
  }
  for (std::size_t i = done + first; i < n; i += stride)
    dst[i] = Op::apply(a[i], b[i]);
}

template <class T>
__global__ void scale_kernel(T* dst, const T* src, std::size_t n, int nranks) {
  const T s = kernels::avg_scale<T>(nranks);
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    dst[i] = src[i] * s;
}

template <Half kind>
__global__ void scale_half_kernel(std::uint16_t* dst, const std::uint16_t* src, std::size_t n, int nranks) {
  const float s = kernels::avg_scale_half<kind>(nranks);
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    dst[i] = kernels::scale_half<kind>(src[i], s);
}

template <class T>
__global__ void divide_kernel(T* buffer, std::size_t n, int nranks) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    buffer[i] = kernels::divide_element(buffer[i], nranks);
}

template <Half kind>
__global__ void divide_half_kernel(std::uint16_t* buffer, std::size_t n, int nranks) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    buffer[i] = kernels::divide_half<kind>(buffer[i], nranks);
}

// A failed CUDA call inside the module; the exported function returns its code.
struct Failure {
  cudaError_t code;
};

void check(cudaError_t err) {
  if (err != cudaSuccess) throw Failure{err};
}

// Runs body, turning a failure into its code (nothing throws out of the module).
template <class Body>
int guarded(Body body) {
  try {
    body();
    return cudaSuccess;
  } catch (const Failure& f) {
    return f.code;
  }
}

// Enough blocks to cover `work` items, at most a few per multiprocessor
// of the current device (the grid-stride loop does the rest).
unsigned blocks_for(std::size_t work) {
  int device = 0;
  int sms = 0;
  check(cudaGetDevice(&device));
  check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  const std::size_t wanted = (work + kThreads - 1) / kThreads;
  const std::size_t most = static_cast<std::size_t>(sms > 0 ? sms : 1) * 4;
  return static_cast<unsigned>(wanted == 0 ? 1 : (wanted < most ? wanted : most));
}

bool aligned16(const void* p) {
  return reinterpret_cast<std::uintptr_t>(p) % 16 == 0;
}

template <class Op>
void launch_reduce(void* dst, const void* a, const void* b, std::size_t n, cudaStream_t stream) {
  using S = typename Op::Storage;
  const bool vectors = aligned16(dst) && aligned16(a) && aligned16(b);
  const std::size_t work = vectors ? n / (16 / sizeof(S)) + 16 : n;
  reduce_kernel<Op><<<blocks_for(work), kThreads, 0, stream>>>(static_cast<S*>(dst), static_cast<const S*>(a),
                                                               static_cast<const S*>(b), n, vectors);
  check(cudaGetLastError());
}

template <RedOp op>
void reduce_op(void* dst, const void* a, const void* b, std::size_t n, DataType type, cudaStream_t s) {
  // Signed integers add and multiply as unsigned: the same bits, defined
  // wrap-around (as kernels/reduce_impl.h).
  constexpr bool wraps = op == RedOp::sum || op == RedOp::avg || op == RedOp::prod;
  switch (type) {
    case DataType::int8:
      if constexpr (wraps) return launch_reduce<NativeOp<std::uint8_t, op>>(dst, a, b, n, s);
      return launch_reduce<NativeOp<std::int8_t, op>>(dst, a, b, n, s);
    case DataType::uint8:
      return launch_reduce<NativeOp<std::uint8_t, op>>(dst, a, b, n, s);
    case DataType::int32:
      if constexpr (wraps) return launch_reduce<NativeOp<std::uint32_t, op>>(dst, a, b, n, s);
      return launch_reduce<NativeOp<std::int32_t, op>>(dst, a, b, n, s);
    case DataType::uint32:
      return launch_reduce<NativeOp<std::uint32_t, op>>(dst, a, b, n, s);
    case DataType::int64:
      if constexpr (wraps) return launch_reduce<NativeOp<std::uint64_t, op>>(dst, a, b, n, s);
      return launch_reduce<NativeOp<std::int64_t, op>>(dst, a, b, n, s);
    case DataType::uint64:
      return launch_reduce<NativeOp<std::uint64_t, op>>(dst, a, b, n, s);
    case DataType::fp16:
      return launch_reduce<HalfOp<Half::fp16, op>>(dst, a, b, n, s);
    case DataType::bf16:
      return launch_reduce<HalfOp<Half::bf16, op>>(dst, a, b, n, s);
    case DataType::fp32:
      return launch_reduce<NativeOp<float, op>>(dst, a, b, n, s);
    case DataType::fp64:
      return launch_reduce<NativeOp<double, op>>(dst, a, b, n, s);
  }
}

template <class T>
void launch_divide(void* buffer, std::size_t n, int nranks, cudaStream_t s) {
  divide_kernel<T><<<blocks_for(n), kThreads, 0, s>>>(static_cast<T*>(buffer), n, nranks);
  check(cudaGetLastError());
}

void reduce(void* dst, const void* a, const void* b, std::size_t count, DataType type, RedOp op, void* stream) {
  if (count == 0) return;
  auto s = static_cast<cudaStream_t>(stream);
  switch (op) {
    case RedOp::sum:
      return reduce_op<RedOp::sum>(dst, a, b, count, type, s);
    case RedOp::prod:
      return reduce_op<RedOp::prod>(dst, a, b, count, type, s);
    case RedOp::max:
      return reduce_op<RedOp::max>(dst, a, b, count, type, s);
    case RedOp::min:
      return reduce_op<RedOp::min>(dst, a, b, count, type, s);
    case RedOp::avg:
      return reduce_op<RedOp::avg>(dst, a, b, count, type, s);
  }
}

void premultiply_avg(void* dst, const void* src, std::size_t count, DataType type, int nranks, void* stream) {
  if (count == 0) return;
  auto s = static_cast<cudaStream_t>(stream);
  const unsigned blocks = blocks_for(count);
  switch (type) {
    case DataType::fp16:
      scale_half_kernel<Half::fp16><<<blocks, kThreads, 0, s>>>(static_cast<std::uint16_t*>(dst),
                                                                static_cast<const std::uint16_t*>(src), count, nranks);
      break;
    case DataType::bf16:
      scale_half_kernel<Half::bf16><<<blocks, kThreads, 0, s>>>(static_cast<std::uint16_t*>(dst),
                                                                static_cast<const std::uint16_t*>(src), count, nranks);
      break;
    case DataType::fp32:
      scale_kernel<float>
          <<<blocks, kThreads, 0, s>>>(static_cast<float*>(dst), static_cast<const float*>(src), count, nranks);
      break;
    case DataType::fp64:
      scale_kernel<double>
          <<<blocks, kThreads, 0, s>>>(static_cast<double*>(dst), static_cast<const double*>(src), count, nranks);
      break;
    default:
      return;  // integers: the engine never asks
  }
  check(cudaGetLastError());
}

void finish_avg(void* buffer, std::size_t count, DataType type, int nranks, void* stream) {
  if (nranks <= 1 || count == 0) return;
  auto s = static_cast<cudaStream_t>(stream);
  switch (type) {
    case DataType::int8:
      return launch_divide<std::int8_t>(buffer, count, nranks, s);
    case DataType::uint8:
      return launch_divide<std::uint8_t>(buffer, count, nranks, s);
    case DataType::int32:
      return launch_divide<std::int32_t>(buffer, count, nranks, s);
    case DataType::uint32:
      return launch_divide<std::uint32_t>(buffer, count, nranks, s);
    case DataType::int64:
      return launch_divide<std::int64_t>(buffer, count, nranks, s);
    case DataType::uint64:
      return launch_divide<std::uint64_t>(buffer, count, nranks, s);
    case DataType::fp16:
      divide_half_kernel<Half::fp16>
          <<<blocks_for(count), kThreads, 0, s>>>(static_cast<std::uint16_t*>(buffer), count, nranks);
      break;
    case DataType::bf16:
      divide_half_kernel<Half::bf16>
          <<<blocks_for(count), kThreads, 0, s>>>(static_cast<std::uint16_t*>(buffer), count, nranks);
      break;
    case DataType::fp32:
      return launch_divide<float>(buffer, count, nranks, s);
    case DataType::fp64:
      return launch_divide<double>(buffer, count, nranks, s);
  }
  check(cudaGetLastError());
}

// The exported table: the runtime calls as they are, the kernels guarded.
int pointer_device(const void* p, int* device) {
  cudaPointerAttributes attributes{};
  const cudaError_t err = cudaPointerGetAttributes(&attributes, p);
  if (err != cudaSuccess) {
    cudaGetLastError();  // an unregistered host pointer on old drivers
    *device = -1;
    return cudaSuccess;
  }
  const bool on_device = attributes.type == cudaMemoryTypeDevice || attributes.type == cudaMemoryTypeManaged;
  *device = on_device ? attributes.device : -1;
  return cudaSuccess;
}

int ipc_export(const void* p, void* handle, std::size_t* offset) {
  static_assert(sizeof(cudaIpcMemHandle_t) == kIpcHandleBytes);
  // A handle names a whole allocation: find where p's begins, through the
  // driver's entry point as the runtime hands it out (linking libcuda would
  // make the module fail to load where there is no driver, and packages
  // depend on it).
  using GetAttribute = CUresult (*)(void* data, CUpointer_attribute attribute, CUdeviceptr ptr);
  static const GetAttribute get_attribute = [] {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult found{};
    if (cudaGetDriverEntryPointByVersion("cuPointerGetAttribute", &fn, 12000, cudaEnableDefault, &found) !=
            cudaSuccess ||
        found != cudaDriverEntryPointSuccess) {
      fn = nullptr;
    }
    return reinterpret_cast<GetAttribute>(fn);
  }();
  if (get_attribute == nullptr) return cudaErrorNotSupported;
  CUdeviceptr base = 0;
  if (get_attribute(&base, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, reinterpret_cast<CUdeviceptr>(p)) != CUDA_SUCCESS)
    return cudaErrorInvalidDevicePointer;
  cudaIpcMemHandle_t h{};
  const cudaError_t err = cudaIpcGetMemHandle(&h, reinterpret_cast<void*>(base));
  if (err != cudaSuccess) return err;
  memcpy(handle, &h, sizeof h);
  *offset = static_cast<std::size_t>(reinterpret_cast<CUdeviceptr>(p) - base);
  return cudaSuccess;
}

int ipc_open(const void* handle, void** base) {
  cudaIpcMemHandle_t h{};
  memcpy(&h, handle, sizeof h);
  return cudaIpcOpenMemHandle(base, h, cudaIpcMemLazyEnablePeerAccess);
}

int enable_peer_access(int peer) {
  const cudaError_t err = cudaDeviceEnablePeerAccess(peer, 0);
  if (err == cudaErrorPeerAccessAlreadyEnabled) {
    cudaGetLastError();  // not an error here: clear it
    return cudaSuccess;
  }
  return err;
}

constexpr RingmasterCudaApi kApi = {
    kRingmasterCudaApiVersion,
    [](int code) { return cudaGetErrorName(static_cast<cudaError_t>(code)); },
    [](int code) { return cudaGetErrorString(static_cast<cudaError_t>(code)); },
    [](int* v) -> int { return cudaDriverGetVersion(v); },
    [](int* v) -> int { return cudaRuntimeGetVersion(v); },
    [](int* n) -> int { return cudaGetDeviceCount(n); },
    pointer_device,
    [](void** p, std::size_t bytes) -> int { return cudaMalloc(p, bytes); },
    [](void* p) -> int { return cudaFree(p); },
    [](void** p, std::size_t bytes) -> int { return cudaMallocHost(p, bytes); },
    [](void* p) -> int { return cudaFreeHost(p); },
    [](void** s) -> int {
      cudaStream_t stream = nullptr;
      const cudaError_t err = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
      *s = stream;
      return err;
    },
    [](void* s) -> int { return cudaStreamDestroy(static_cast<cudaStream_t>(s)); },
    [](void* s) -> int { return cudaStreamSynchronize(static_cast<cudaStream_t>(s)); },
    [](void** e) -> int {
      cudaEvent_t event = nullptr;
      const cudaError_t err = cudaEventCreateWithFlags(&event, cudaEventDisableTiming);
      *e = event;
      return err;
    },
    [](void* e) -> int { return cudaEventDestroy(static_cast<cudaEvent_t>(e)); },
    [](void* e, void* s) -> int { return cudaEventRecord(static_cast<cudaEvent_t>(e), static_cast<cudaStream_t>(s)); },
    [](void* e) -> int { return cudaEventSynchronize(static_cast<cudaEvent_t>(e)); },
    [](void* s, void* e) -> int {
      return cudaStreamWaitEvent(static_cast<cudaStream_t>(s), static_cast<cudaEvent_t>(e), 0);
    },
    [](void* dst, const void* src, std::size_t bytes, void* s) -> int {
      return cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, static_cast<cudaStream_t>(s));
    },
    []() -> int { return cudaDeviceSynchronize(); },
    [](int device) -> int { return cudaSetDevice(device); },
    [](void* dst, const void* a, const void* b, std::size_t count, int type, int op, void* s) -> int {
      return guarded([&] { reduce(dst, a, b, count, static_cast<DataType>(type), static_cast<RedOp>(op), s); });
    },
    [](void* dst, const void* src, std::size_t count, int type, int nranks, void* s) -> int {
      return guarded([&] { premultiply_avg(dst, src, count, static_cast<DataType>(type), nranks, s); });
    },
    [](void* buffer, std::size_t count, int type, int nranks, void* s) -> int {
      return guarded([&] { finish_avg(buffer, count, static_cast<DataType>(type), nranks, s); });
    },
    [](int device, int peer, int* can) -> int { return cudaDeviceCanAccessPeer(can, device, peer); },
    enable_peer_access,
    ipc_export,
    ipc_open,
    [](void* base) -> int { return cudaIpcCloseMemHandle(base); },
};

}  // namespace
}  // namespace ringmaster::gpu

extern "C" __attribute__((visibility("default"))) const RingmasterCudaApi* ringmaster_cuda_api() {
  return &ringmaster::gpu::kApi;
}

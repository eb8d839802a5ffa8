// The element-wise kernels on device memory: every dtype x op of
// kernels::reduce, from the same one-element definitions
// (kernels/elementwise.h), so the GPU rounds, wraps and propagates NaN
// exactly as the CPU does.
//
// Each thread moves 16 bytes per load when the three pointers are 16-byte
// aligned (one uint4: four floats, eight halves), over a grid-stride loop
// sized to the device (a few blocks per multiprocessor); the tail and
// unaligned buffers go element by element.
#include <cuda_runtime.h>
#include <cstdint>
#include <string>

#include "gpu/gpu.h"
#include "kernels/elementwise.h"
#include "ringmaster/status.h"

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

void check(cudaError_t err, const char* what) {
  if (err != cudaSuccess) {
    // No fmt here: nvcc cannot evaluate its compile-time format checks.
    throw Error(ErrorCategory::internal, std::string("CUDA: ") + what + " failed: " + cudaGetErrorString(err) + " (" +
                                             cudaGetErrorName(err) + ")");
  }
}

void require_usable() {
  const auto& a = availability();
  if (!a.usable) throw Error(ErrorCategory::config, "CUDA is not usable here: " + a.why);
}

// Enough blocks to cover `work` items, at most a few per multiprocessor
// of the current device (the grid-stride loop does the rest).
unsigned blocks_for(std::size_t work) {
  int device = 0;
  int sms = 0;
  check(cudaGetDevice(&device), "cudaGetDevice");
  check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device), "cudaDeviceGetAttribute");
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
  check(cudaGetLastError(), "launching the reduce kernel");
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
  check(cudaGetLastError(), "launching the avg kernel");
}

}  // namespace

void reduce(void* dst, const void* a, const void* b, std::size_t count, DataType type, RedOp op, void* stream) {
  require_usable();
  if (count == 0) return;
  const std::size_t width = size_of(type);
  for (const void* p : {static_cast<const void*>(dst), a, b}) {
    if (reinterpret_cast<std::uintptr_t>(p) % width != 0) {
      throw Error(ErrorCategory::config, "a device buffer of " + std::string(ringmaster::name_of(type)) +
                                             " is not aligned to its element size (" + std::to_string(width) +
                                             " bytes), as CUDA loads require");
    }
  }
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
  require_usable();
  if (nranks <= 0) throw Error(ErrorCategory::internal, "premultiply_avg called with nranks=" + std::to_string(nranks));
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
      throw Error(ErrorCategory::internal,
                  "premultiply_avg called for " + std::string(ringmaster::name_of(type)) + ", an integer type");
  }
  check(cudaGetLastError(), "launching the avg kernel");
}

void finish_avg(void* buffer, std::size_t count, DataType type, int nranks, void* stream) {
  require_usable();
  if (nranks <= 0) throw Error(ErrorCategory::internal, "finish_avg called with nranks=" + std::to_string(nranks));
  if (nranks == 1 || count == 0) return;
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
  check(cudaGetLastError(), "launching the avg kernel");
}

}  // namespace ringmaster::gpu

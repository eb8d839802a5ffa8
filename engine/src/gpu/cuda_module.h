// Internal: the C interface between the engine (gpu/runtime.cpp) and its
// CUDA module, libringmaster_cuda.so (gpu/cuda_module.cu), which the engine
// opens with dlopen only where an NVIDIA driver loads.
//
// Why a module: the CUDA runtime, linked statically, brings 11 KiB of
// thread-local storage that every thread of a process would carry (a
// process of 512 ranks as threads grew from 35 to 46 MB) and a fat binary
// every process would load. Opened at run time, it costs nothing on hosts
// without a GPU, and the engine keeps no link dependency on CUDA.
//
// Every function returns 0 or a cudaError_t code (error_name and
// error_string describe it); nothing throws across the boundary.
#pragma once

#include <cstddef>

extern "C" {

// Bumped whenever the table changes; the engine refuses another version.
inline constexpr int kRingmasterCudaApiVersion = 3;

struct RingmasterCudaApi {
  int version;
  const char* (*error_name)(int code);
  const char* (*error_string)(int code);
  int (*driver_version)(int* version);
  int (*runtime_version)(int* version);
  int (*device_count)(int* count);
  // The device `p` is memory of (cudaMalloc'd or managed), or -1.
  int (*pointer_device)(const void* p, int* device);
  int (*malloc_device)(void** p, std::size_t bytes);
  int (*free_device)(void* p);
  int (*malloc_pinned)(void** p, std::size_t bytes);
  int (*free_pinned)(void* p);
  int (*stream_create)(void** stream);  // non-blocking
  int (*stream_destroy)(void* stream);
  int (*stream_synchronize)(void* stream);
  int (*event_create)(void** event);  // timing disabled
  int (*event_destroy)(void* event);
  int (*event_record)(void* event, void* stream);
  int (*event_synchronize)(void* event);
  int (*stream_wait_event)(void* stream, void* event);
  int (*copy_async)(void* dst, const void* src, std::size_t bytes, void* stream);
  int (*device_synchronize)();
  int (*set_device)(int device);
  // type and op are ringmaster::DataType and RedOp values; arguments are
  // checked by the engine first.
  int (*reduce)(void* dst, const void* a, const void* b, std::size_t count, int type, int op, void* stream);
  int (*premultiply_avg)(void* dst, const void* src, std::size_t count, int type, int nranks, void* stream);
  int (*finish_avg)(void* buffer, std::size_t count, int type, int nranks, void* stream);
  // Peers (comm/device_calls.cpp): whether `device`
  // can read and write `peer`'s memory, and turning that on for the
  // current device (on already counts as done); the CUDA IPC handle
  // (kIpcHandleBytes) of the allocation `p` is in and p's offset in it;
  // a handle another process exported, mapped here (peer access enabled
  // as needed), and unmapped.
  int (*can_access_peer)(int device, int peer, int* can);
  int (*enable_peer_access)(int peer);
  int (*ipc_export)(const void* p, void* handle, std::size_t* offset);
  int (*ipc_open)(const void* handle, void** base);
  int (*ipc_close)(void* base);
};

// The size of a cudaIpcMemHandle_t.
inline constexpr std::size_t kIpcHandleBytes = 64;

// The module's one exported symbol.
const RingmasterCudaApi* ringmaster_cuda_api();
}

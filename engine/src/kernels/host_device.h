// What lets one definition serve the CPU kernels and the CUDA kernels.
//
// RINGMASTER_HD marks a function both: `__host__ __device__` when nvcc
// compiles the unit, nothing for the C++ compiler. `bits_as` reinterprets
// an object's bytes as another type of the same size; std::bit_cast is not
// callable from device code, and both compilers turn this memcpy into a
// register move.
#pragma once

#include <cstring>

#if defined(__CUDACC__)
#define RINGMASTER_HD __host__ __device__
#else
#define RINGMASTER_HD
#endif

namespace ringmaster::kernels {
namespace {

template <class To, class From>
RINGMASTER_HD inline To bits_as(const From& from) noexcept {
  static_assert(sizeof(To) == sizeof(From), "bits_as: sizes differ");
  To to;
  std::memcpy(&to, &from, sizeof(To));
  return to;
}

}  // namespace
}  // namespace ringmaster::kernels

// Scalar conversions between fp32 and the two 16-bit float formats.
//
// Both round to nearest, ties to even, and keep NaN a (quiet) NaN. The
// vector kernels use hardware conversions where the CPU has them (F16C) and
// the same bit recipes as below otherwise, so every kernel level rounds
// identically.
//
// The same definitions run on the GPU (RINGMASTER_HD): the CUDA kernels
// round exactly as the CPU kernels do, and their arithmetic is tested here.
// For fp16 the GPU uses its conversion instructions, which round the same
// way (only a NaN's payload differs); software conversions made the fp16
// kernels 0.70x a device copy against 0.93x for bf16 on an H200.
//
// The functions have internal linkage (an unnamed namespace) on purpose:
// reduce_impl.h calls them from units compiled with AVX-512 or AVX2 flags,
// and an out-of-line copy of an ordinary inline function emitted there
// could be the one the linker keeps for every caller.
#pragma once

#include <cstdint>

#include "kernels/host_device.h"

namespace ringmaster::kernels {
namespace {

RINGMASTER_HD inline float half_to_float(std::uint16_t h) noexcept {
#if defined(__CUDA_ARCH__)
  // The GPU's own conversion: exact, as below (a NaN's payload aside).
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
  return f;
#else
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t exponent = (h >> 10) & 0x1Fu;
  const std::uint32_t mantissa = h & 0x3FFu;
  if (exponent == 0) {
    // Zero or subnormal: mantissa * 2^-24 is exact in fp32.
    const float magnitude = static_cast<float>(mantissa) * 0x1p-24f;
    return sign != 0 ? -magnitude : magnitude;
  }
  if (exponent == 31) return bits_as<float>(sign | 0x7F800000u | (mantissa << 13));
  return bits_as<float>(sign | ((exponent + 112) << 23) | (mantissa << 13));
#endif
}

RINGMASTER_HD inline std::uint16_t float_to_half(float value) noexcept {
#if defined(__CUDA_ARCH__)
  // Round to nearest even in hardware, as below; a NaN comes out as the
  // GPU's canonical NaN rather than with its payload.
  unsigned short h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(value));
  return h;
#else
  std::uint32_t bits = bits_as<std::uint32_t>(value);
  const std::uint32_t sign = (bits >> 16) & 0x8000u;
  bits &= 0x7FFFFFFFu;
  if (bits >= 0x47800000u) {  // |value| >= 65536, infinity or NaN
    if (bits > 0x7F800000u) return static_cast<std::uint16_t>(sign | 0x7E00u | ((bits >> 13) & 0x3FFu));
    return static_cast<std::uint16_t>(sign | 0x7C00u);
  }
  if (bits < 0x38800000u) {  // below the smallest normal half (2^-14): subnormal or zero
    // Adding 0.5 aligns the half's subnormal grid with fp32's last mantissa
    // bits, so the fp32 adder does the round-to-nearest-even for us.
    const float aligned = bits_as<float>(bits) + 0.5f;
    return static_cast<std::uint16_t>(sign | (bits_as<std::uint32_t>(aligned) - 0x3F000000u));
  }
  const std::uint32_t odd = (bits >> 13) & 1u;
  bits += 0xC8000FFFu + odd;  // rebias the exponent (-112 << 23) and round half to even
  return static_cast<std::uint16_t>(sign | (bits >> 13));
#endif
}

RINGMASTER_HD inline float bf16_to_float(std::uint16_t h) noexcept {
  return bits_as<float>(static_cast<std::uint32_t>(h) << 16);
}

RINGMASTER_HD inline std::uint16_t float_to_bf16(float value) noexcept {
  std::uint32_t bits = bits_as<std::uint32_t>(value);
  if ((bits & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<std::uint16_t>((bits >> 16) | 0x40u);
  bits += 0x7FFFu + ((bits >> 16) & 1u);
  return static_cast<std::uint16_t>(bits >> 16);
}

}  // namespace
}  // namespace ringmaster::kernels

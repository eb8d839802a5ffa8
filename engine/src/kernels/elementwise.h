// One element of every reduction, written once for the CPU kernels
// (kernels/reduce_impl.h, kernels/reduce.cpp) and the CUDA kernels
// (gpu/reduce.cu): the GPU computes exactly what the CPU computes, and the
// CPU tests check the arithmetic both run.
//
// `combine<op>` also takes GCC vector types, which the CPU kernels reduce
// whole registers with. Rules (kernels/reduce.h): integers wrap, 16-bit
// floats are computed in fp32 and rounded to nearest even, max and min
// propagate NaN.
//
// Internal linkage throughout, as in half.h: the units compiled with an
// instruction-set level's flags include this file.
#pragma once

#include <cstdint>
#include <type_traits>

#include "kernels/half.h"
#include "kernels/host_device.h"
#include "ringmaster/types.h"

namespace ringmaster::kernels {
namespace {

template <RedOp op, class X>
RINGMASTER_HD inline X combine(X a, X b) {
  if constexpr (op == RedOp::sum || op == RedOp::avg) {
    return a + b;
  } else if constexpr (op == RedOp::prod) {
    return a * b;
  } else if constexpr (op == RedOp::max) {
    return (a > b || a != a) ? a : b;  // a != a: a is NaN, keep it
  } else {
    return (a < b || a != a) ? a : b;
  }
}

// Narrow integers promote to int, which is exact, and wrap when stored.
template <RedOp op, class T>
RINGMASTER_HD inline T combine_element(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    return static_cast<T>(combine<op>(a, b));
  } else {
    return combine<op>(a, b);
  }
}

// The 16-bit float formats, stored as uint16_t.
enum class Half { fp16, bf16 };

template <Half kind>
RINGMASTER_HD inline float widen(std::uint16_t h) {
  if constexpr (kind == Half::fp16) {
    return half_to_float(h);
  } else {
    return bf16_to_float(h);
  }
}

template <Half kind>
RINGMASTER_HD inline std::uint16_t narrow(float f) {
  if constexpr (kind == Half::fp16) {
    return float_to_half(f);
  } else {
    return float_to_bf16(f);
  }
}

template <Half kind, RedOp op>
RINGMASTER_HD inline std::uint16_t combine_half(std::uint16_t a, std::uint16_t b) {
  return narrow<kind>(combine<op>(widen<kind>(a), widen<kind>(b)));
}

// avg of floating types: each input times 1/nranks, the scalar as the type
// holds it and the product rounded once (16-bit floats multiply in fp32).
template <class T>
RINGMASTER_HD inline T avg_scale(int nranks) {
  return T(1) / static_cast<T>(nranks);
}

template <Half kind>
RINGMASTER_HD inline float avg_scale_half(int nranks) {
  return widen<kind>(narrow<kind>(1.0f / static_cast<float>(nranks)));
}

template <Half kind>
RINGMASTER_HD inline std::uint16_t scale_half(std::uint16_t v, float s) {
  return narrow<kind>(widen<kind>(v) * s);
}

// avg of integers: the wrapped sum divided once, truncating toward zero.
template <class T>
RINGMASTER_HD inline T divide_element(T v, int nranks) {
  if constexpr (std::is_integral_v<T>) {
    using Wide = std::conditional_t<std::is_signed_v<T>, std::int64_t, std::uint64_t>;
    return static_cast<T>(static_cast<Wide>(v) / static_cast<Wide>(nranks));
  } else {
    return v / static_cast<T>(nranks);
  }
}

template <Half kind>
RINGMASTER_HD inline std::uint16_t divide_half(std::uint16_t v, int nranks) {
  return narrow<kind>(widen<kind>(v) / static_cast<float>(nranks));
}

}  // namespace
}  // namespace ringmaster::kernels

// The reduction loops, written once and compiled once per instruction-set
// level. Each reduce_<level>.cpp defines RINGMASTER_ISA (the namespace that
// keeps the copies apart) and RINGMASTER_VEC_BYTES (0 for the scalar
// level), optionally RINGMASTER_HAVE_F16C (x86 half-precision conversions)
// or RINGMASTER_HAVE_NEON (AArch64), then includes this file.
//
// A unit compiled with a level's flags must not define anything another
// unit could bind to: the linker keeps one copy of an inline function or a
// template, and if that copy came from the AVX-512 unit every caller would
// run AVX-512 code. So everything here is in an unnamed namespace, the
// helpers from headers (half.h) have internal linkage too, and the one
// external symbol is the level's `table`, constant data.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernels/elementwise.h"
#include "kernels/reduce_table.h"

#if RINGMASTER_VEC_BYTES > 0 && defined(RINGMASTER_HAVE_NEON)
#include <arm_neon.h>
#elif RINGMASTER_VEC_BYTES > 0
#include <immintrin.h>
#define RINGMASTER_HAVE_STREAMING_STORES 1
// GCC 12's AVX-512 conversion intrinsics start from an "undefined" register
// that -Wmaybe-uninitialized reports as a false positive.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#endif

namespace ringmaster::kernels::RINGMASTER_ISA {
namespace {

template <class T>
T load(const T* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

template <class T>
void store(T* p, T v) {
  std::memcpy(p, &v, sizeof(T));
}

#if RINGMASTER_VEC_BYTES > 0
constexpr std::size_t kVecBytes = RINGMASTER_VEC_BYTES;

template <class T, std::size_t Bytes>
struct VecOf {
  typedef T type __attribute__((vector_size(Bytes)));
};
template <class T>
using Vec = typename VecOf<T, kVecBytes>::type;

#if defined(RINGMASTER_HAVE_STREAMING_STORES)
// Non-temporal store of one full vector to a kVecBytes-aligned address.
template <class V>
void stream(void* p, V v) {
#if RINGMASTER_VEC_BYTES == 64
  _mm512_stream_si512(static_cast<__m512i*>(p), std::bit_cast<__m512i>(v));
#elif RINGMASTER_VEC_BYTES == 32
  _mm256_stream_si256(static_cast<__m256i*>(p), std::bit_cast<__m256i>(v));
#else
  _mm_stream_si128(static_cast<__m128i*>(p), std::bit_cast<__m128i>(v));
#endif
}

bool aligned(const void* p) {
  return reinterpret_cast<std::uintptr_t>(p) % kVecBytes == 0;
}
#endif
#endif

// Native types: the vector lanes are the elements themselves.
template <class T, RedOp op>
void reduce_native(void* dst_v, const void* a_v, const void* b_v, std::size_t n) {
  auto* dst = static_cast<T*>(dst_v);
  const auto* a = static_cast<const T*>(a_v);
  const auto* b = static_cast<const T*>(b_v);
  std::size_t i = 0;
#if RINGMASTER_VEC_BYTES > 0
  using V = Vec<T>;
  constexpr std::size_t lanes = kVecBytes / sizeof(T);
#if defined(RINGMASTER_HAVE_STREAMING_STORES)
  if (n * sizeof(T) >= streaming_store_bytes() && reinterpret_cast<std::uintptr_t>(dst) % sizeof(T) == 0) {
    // Large outputs bypass the cache: no read-for-ownership of dst, and the
    // inputs are not evicted by data nobody reads soon.
    for (; i < n && !aligned(dst + i); ++i)
      store(dst + i, combine_element<op>(load(a + i), load(b + i)));
#pragma GCC unroll 4
    for (; i + lanes <= n; i += lanes)
      stream(dst + i, combine<op>(load(reinterpret_cast<const V*>(a + i)), load(reinterpret_cast<const V*>(b + i))));
    _mm_sfence();
  } else
#endif
  {
#pragma GCC unroll 4
    for (; i + lanes <= n; i += lanes) {
      store(reinterpret_cast<V*>(dst + i),
            combine<op>(load(reinterpret_cast<const V*>(a + i)), load(reinterpret_cast<const V*>(b + i))));
    }
  }
#endif
  for (; i < n; ++i)
    store(dst + i, combine_element<op>(load(a + i), load(b + i)));
}

// fp16 and bf16: widen to fp32 lanes, reduce, round back (elementwise.h).
#if RINGMASTER_VEC_BYTES > 0
constexpr std::size_t kHalfLanes = kVecBytes / sizeof(float);
using VF = Vec<float>;
using VU32 = Vec<std::uint32_t>;
using VI32 = Vec<std::int32_t>;
using VU16 = typename VecOf<std::uint16_t, kVecBytes / 2>::type;

VF widen_bf16(VU16 h) {
  VU32 wide = __builtin_convertvector(h, VU32) << 16;
  return std::bit_cast<VF>(wide);
}

VU16 narrow_bf16(VF f) {
  VU32 bits = std::bit_cast<VU32>(f);
  const VU32 rounded = bits + 0x7FFFu + ((bits >> 16) & 1u);
  const VU32 quiet_nan = bits | 0x400000u;
  const VI32 is_nan = (bits & 0x7FFFFFFFu) > 0x7F800000u;
  bits = is_nan ? quiet_nan : rounded;
  return __builtin_convertvector(bits >> 16, VU16);
}

#if defined(RINGMASTER_HAVE_F16C)
VF widen_fp16(VU16 h) {
#if RINGMASTER_VEC_BYTES == 64
  __m512 f = _mm512_cvtph_ps(std::bit_cast<__m256i>(h));
#else
  __m256 f = _mm256_cvtph_ps(std::bit_cast<__m128i>(h));
#endif
  return std::bit_cast<VF>(f);
}

VU16 narrow_fp16(VF f) {
#if RINGMASTER_VEC_BYTES == 64
  __m256i h = _mm512_cvtps_ph(std::bit_cast<__m512>(f), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
#else
  __m128i h = _mm256_cvtps_ph(std::bit_cast<__m256>(f), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
#endif
  return std::bit_cast<VU16>(h);
}
#elif defined(RINGMASTER_HAVE_NEON)
// AArch64's FCVTL/FCVTN convert four lanes, rounding to nearest even under
// the default FPCR, as the scalar recipes in half.h do.
static_assert(kVecBytes == 16, "NEON registers are 16 bytes");
#define RINGMASTER_HAVE_F16_VECTOR 1
VF widen_fp16(VU16 h) {
  return std::bit_cast<VF>(vcvt_f32_f16(vreinterpret_f16_u16(std::bit_cast<uint16x4_t>(h))));
}

VU16 narrow_fp16(VF f) {
  return std::bit_cast<VU16>(vreinterpret_u16_f16(vcvt_f16_f32(std::bit_cast<float32x4_t>(f))));
}
#endif
#if defined(RINGMASTER_HAVE_F16C)
#define RINGMASTER_HAVE_F16_VECTOR 1
#endif
#endif

template <Half kind, RedOp op>
void reduce_half(void* dst_v, const void* a_v, const void* b_v, std::size_t n) {
  auto* dst = static_cast<std::uint16_t*>(dst_v);
  const auto* a = static_cast<const std::uint16_t*>(a_v);
  const auto* b = static_cast<const std::uint16_t*>(b_v);
  std::size_t i = 0;
#if RINGMASTER_VEC_BYTES > 0
  constexpr bool vectorised = kind == Half::bf16
#if defined(RINGMASTER_HAVE_F16_VECTOR)
                              || kind == Half::fp16
#endif
      ;
  if constexpr (vectorised) {
    auto widen_v = [](VU16 h) {
#if defined(RINGMASTER_HAVE_F16_VECTOR)
      if constexpr (kind == Half::fp16) return widen_fp16(h);
#endif
      return widen_bf16(h);
    };
    auto narrow_v = [](VF f) {
#if defined(RINGMASTER_HAVE_F16_VECTOR)
      if constexpr (kind == Half::fp16) return narrow_fp16(f);
#endif
      return narrow_bf16(f);
    };
#pragma GCC unroll 4
    for (; i + kHalfLanes <= n; i += kHalfLanes) {
      const VF r = combine<op>(widen_v(load(reinterpret_cast<const VU16*>(a + i))),
                               widen_v(load(reinterpret_cast<const VU16*>(b + i))));
      store(reinterpret_cast<VU16*>(dst + i), narrow_v(r));
    }
  }
#endif
  for (; i < n; ++i) {
    store(dst + i, combine_half<kind, op>(load(a + i), load(b + i)));
  }
}

template <RedOp op>
constexpr ReduceFn select(DataType type) {
  // Signed integers add and multiply as unsigned: the same bits, but
  // wrap-around is defined.
  constexpr bool wraps = op == RedOp::sum || op == RedOp::avg || op == RedOp::prod;
  switch (type) {
    case DataType::int8:
      return wraps ? &reduce_native<std::uint8_t, op> : &reduce_native<std::int8_t, op>;
    case DataType::uint8:
      return &reduce_native<std::uint8_t, op>;
    case DataType::int32:
      return wraps ? &reduce_native<std::uint32_t, op> : &reduce_native<std::int32_t, op>;
    case DataType::uint32:
      return &reduce_native<std::uint32_t, op>;
    case DataType::int64:
      return wraps ? &reduce_native<std::uint64_t, op> : &reduce_native<std::int64_t, op>;
    case DataType::uint64:
      return &reduce_native<std::uint64_t, op>;
    case DataType::fp16:
      return &reduce_half<Half::fp16, op>;
    case DataType::bf16:
      return &reduce_half<Half::bf16, op>;
    case DataType::fp32:
      return &reduce_native<float, op>;
    case DataType::fp64:
      return &reduce_native<double, op>;
  }
  return nullptr;
}

constexpr ReduceTable make_table() {
  ReduceTable table{};
  for (DataType type : kAllDataTypes) {
    auto& row = table.fn[static_cast<std::size_t>(type)];
    row[static_cast<std::size_t>(RedOp::sum)] = select<RedOp::sum>(type);
    row[static_cast<std::size_t>(RedOp::prod)] = select<RedOp::prod>(type);
    row[static_cast<std::size_t>(RedOp::max)] = select<RedOp::max>(type);
    row[static_cast<std::size_t>(RedOp::min)] = select<RedOp::min>(type);
    row[static_cast<std::size_t>(RedOp::avg)] = select<RedOp::avg>(type);
  }
  return table;
}

}  // namespace

// Filled in by the compiler: no initialiser runs at start-up.
constinit const ReduceTable table = make_table();

}  // namespace ringmaster::kernels::RINGMASTER_ISA

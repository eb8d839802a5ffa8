// The values perf fills its buffers with and checks against (check_values.h).
#include "perf/check_values.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "base/bytes.h"
#include "kernels/half.h"

namespace ringmaster::perf_values {
namespace {

// Writes the small integer v as one element of `type`.
void put(std::byte* p, DataType type, int v) {
  switch (type) {
    case DataType::int8: {
      auto x = static_cast<std::int8_t>(v);
      std::memcpy(p, &x, 1);
      return;
    }
    case DataType::uint8: {
      auto x = static_cast<std::uint8_t>(v);
      std::memcpy(p, &x, 1);
      return;
    }
    case DataType::int32: {
      auto x = static_cast<std::int32_t>(v);
      std::memcpy(p, &x, 4);
      return;
    }
    case DataType::uint32: {
      auto x = static_cast<std::uint32_t>(v);
      std::memcpy(p, &x, 4);
      return;
    }
    case DataType::int64: {
      auto x = static_cast<std::int64_t>(v);
      std::memcpy(p, &x, 8);
      return;
    }
    case DataType::uint64: {
      auto x = static_cast<std::uint64_t>(v);
      std::memcpy(p, &x, 8);
      return;
    }
    case DataType::fp16: {
      auto x = kernels::float_to_half(static_cast<float>(v));
      std::memcpy(p, &x, 2);
      return;
    }
    case DataType::bf16: {
      auto x = kernels::float_to_bf16(static_cast<float>(v));
      std::memcpy(p, &x, 2);
      return;
    }
    case DataType::fp32: {
      auto x = static_cast<float>(v);
      std::memcpy(p, &x, 4);
      return;
    }
    case DataType::fp64: {
      auto x = static_cast<double>(v);
      std::memcpy(p, &x, 8);
      return;
    }
  }
}

// One element as a double (integers exactly: the checked values stay far
// below 2^53). The 16-bit formats are decoded here from their definition,
// not with the kernels' conversions, so the check does not lean on the
// code it checks.
double decode(const std::byte* p, DataType type) {
  auto as = [&]<class T>(T) {
    T x;
    std::memcpy(&x, p, sizeof(T));
    return static_cast<double>(x);
  };
  auto half_like = [&](int mantissa_bits, int exponent_bits) {
    std::uint16_t h;
    std::memcpy(&h, p, 2);
    const int bias = (1 << (exponent_bits - 1)) - 1;
    const int e = (h >> mantissa_bits) & ((1 << exponent_bits) - 1);
    const int m = h & ((1 << mantissa_bits) - 1);
    double v = 0;
    if (e == 0) {
      v = std::ldexp(m, 1 - bias - mantissa_bits);
    } else if (e == (1 << exponent_bits) - 1) {
      v = m != 0 ? NAN : INFINITY;
    } else {
      v = std::ldexp(m + (1 << mantissa_bits), e - bias - mantissa_bits);
    }
    return (h & 0x8000) != 0 ? -v : v;
  };
  switch (type) {
    case DataType::int8:
      return as(std::int8_t{});
    case DataType::uint8:
      return as(std::uint8_t{});
    case DataType::int32:
      return as(std::int32_t{});
    case DataType::uint32:
      return as(std::uint32_t{});
    case DataType::int64:
      return as(std::int64_t{});
    case DataType::uint64:
      return as(std::uint64_t{});
    case DataType::fp16:
      return half_like(10, 5);
    case DataType::bf16:
      return half_like(7, 8);
    case DataType::fp32:
      return as(float{});
    case DataType::fp64:
      return as(double{});
  }
  return NAN;
}

// An integer result as the type holds it: two's complement wrap-around.
double wrap(double exact, DataType type) {
  const auto w = static_cast<std::int64_t>(exact);
  switch (type) {
    case DataType::int8:
      return static_cast<std::int8_t>(w);
    case DataType::uint8:
      return static_cast<std::uint8_t>(static_cast<std::uint64_t>(w));
    case DataType::int32:
      return static_cast<std::int32_t>(w);
    case DataType::uint32:
      return static_cast<std::uint32_t>(static_cast<std::uint64_t>(w));
    default:
      return exact;  // 64-bit and floating types: the checked values fit
  }
}

}  // namespace

void fill(std::vector<std::byte>& buf, std::size_t count, DataType type, RedOp op, int rank, std::size_t bytes) {
  buf.resize(count * size_of(type));
  const std::uint64_t seed = (static_cast<std::uint64_t>(rank) * 7919 + bytes * 31 + 17) * 0x9E3779B97F4A7C15ull;
  const bool is_unsigned = type == DataType::uint8 || type == DataType::uint32 || type == DataType::uint64;
  static constexpr int kFactors[] = {1, 2, -1, -2};
  for (std::size_t i = 0; i < count; ++i) {
    std::uint64_t x = seed + i * 0xBF58476D1CE4E5B9ull;
    x ^= x >> 31;
    x *= 0x94D049BB133111EBull;
    x ^= x >> 29;
    const int v =
        op == RedOp::prod ? kFactors[x % (is_unsigned ? 2 : 4)] : static_cast<int>(x % 9) - (is_unsigned ? 0 : 4);
    put(buf.data() + i * size_of(type), type, v);
  }
}

std::vector<double> reference_reduction(DataType type, RedOp op, int n, std::size_t count, std::size_t total,
                                        std::vector<double>& largest) {
  std::vector<double> acc(count);
  largest.assign(count, 0.0);
  std::vector<std::byte> input;
  const std::size_t es = size_of(type);
  for (int q = 0; q < n; ++q) {
    fill(input, count, type, op, q, total);
    for (std::size_t i = 0; i < count; ++i) {
      const double v = decode(input.data() + i * es, type);
      largest[i] = std::max(largest[i], std::fabs(v));
      double& a = acc[i];
      if (q == 0) {
        a = v;
      } else if (op == RedOp::sum || op == RedOp::avg) {
        a += v;
      } else if (op == RedOp::prod) {
        a *= v;
      } else if (op == RedOp::max) {
        a = std::max(a, v);
      } else {
        a = std::min(a, v);
      }
    }
  }
  for (double& a : acc) {
    if (!is_floating(type)) a = wrap(a, type);
    if (op == RedOp::avg) a = is_floating(type) ? a / n : std::trunc(a / n);
  }
  return acc;
}

bool matches(const std::byte* got, double expected, DataType type, RedOp op, int n, double largest) {
  const double v = decode(got, type);
  if (op != RedOp::avg || !is_floating(type)) return v == expected;
  int mantissa_bits = 52, min_exponent = -1022;
  if (type == DataType::fp16) mantissa_bits = 10, min_exponent = -14;
  if (type == DataType::bf16) mantissa_bits = 7, min_exponent = -126;
  if (type == DataType::fp32) mantissa_bits = 23, min_exponent = -126;
  const double scale = std::max(std::fabs(expected), largest);
  const int exponent = scale == 0 ? min_exponent : std::max(std::ilogb(scale), min_exponent);
  return std::fabs(v - expected) <= n * std::ldexp(1.0, exponent - mantissa_bits);
}

}  // namespace ringmaster::perf_values

// A slice of the dtype x op matrix run as separate processes (one rank
// each, the public API only) and checked against a reference written here,
// independently of the engine's kernels: inputs are small integers, the
// expected result is computed in long double from the same formula, and
// fp16/bf16 are encoded and decoded by this file's own bit arithmetic.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>

#include "ringmaster/types.h"

namespace ringmaster::matrix_slice {

inline constexpr DataType kTypes[] = {DataType::int8,  DataType::uint8,  DataType::int32, DataType::uint32,
                                      DataType::int64, DataType::uint64, DataType::fp16,  DataType::bf16,
                                      DataType::fp32,  DataType::fp64};
inline constexpr RedOp kOps[] = {RedOp::sum, RedOp::prod, RedOp::max, RedOp::min, RedOp::avg};

inline bool is_signed(DataType t) {
  return t == DataType::int8 || t == DataType::int32 || t == DataType::int64 || t == DataType::fp16 ||
         t == DataType::bf16 || t == DataType::fp32 || t == DataType::fp64;
}
inline bool is_float(DataType t) {
  return t == DataType::fp16 || t == DataType::bf16 || t == DataType::fp32 || t == DataType::fp64;
}

// Element i of rank r's input: 1 or 2 for products (at most 2^ranks), else
// a small integer (negative ones for signed types), exact in every type.
inline long long input_value(int rank, std::size_t i, DataType t, RedOp op) {
  if (op == RedOp::prod) return 1 + static_cast<long long>((static_cast<std::size_t>(rank) + i) % 2);
  const long long v = static_cast<long long>((static_cast<std::size_t>(rank) * 7 + i * 3) % 11);
  return is_signed(t) ? v - 5 : v;
}

// fp16 / bf16 bits of a float, for values with few significant bits (the
// inputs above) and round-to-nearest otherwise; no infinities or NaNs here.
inline std::uint16_t fp16_bits(float f) {
  if (f == 0.0f) return 0;
  const std::uint16_t sign = f < 0 ? 0x8000 : 0;
  int exponent = 0;
  const float m = std::frexp(std::fabs(f), &exponent);  // f = m * 2^exponent, m in [0.5, 1)
  const long mantissa = std::lround((m * 2.0f - 1.0f) * 1024.0f);
  return static_cast<std::uint16_t>(sign | ((exponent - 1 + 15) << 10) | (mantissa & 0x3ff));
}
inline double fp16_value(std::uint16_t bits) {
  const int exponent = (bits >> 10) & 0x1f;
  const double mantissa = bits & 0x3ff;
  const double magnitude =
      exponent == 0 ? std::ldexp(mantissa, -24) : std::ldexp(1.0 + mantissa / 1024.0, exponent - 15);
  return (bits & 0x8000) ? -magnitude : magnitude;
}
inline std::uint16_t bf16_bits(float f) {
  std::uint32_t u = 0;
  std::memcpy(&u, &f, sizeof(u));
  return static_cast<std::uint16_t>(u >> 16);  // exact for the inputs above
}
inline double bf16_value(std::uint16_t bits) {
  const std::uint32_t u = static_cast<std::uint32_t>(bits) << 16;
  float f = 0;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

// Stores `v` as element i of a buffer of type t.
inline void store(void* buffer, std::size_t i, DataType t, long long v) {
  switch (t) {
    case DataType::int8:
      static_cast<std::int8_t*>(buffer)[i] = static_cast<std::int8_t>(v);
      break;
    case DataType::uint8:
      static_cast<std::uint8_t*>(buffer)[i] = static_cast<std::uint8_t>(v);
      break;
    case DataType::int32:
      static_cast<std::int32_t*>(buffer)[i] = static_cast<std::int32_t>(v);
      break;
    case DataType::uint32:
      static_cast<std::uint32_t*>(buffer)[i] = static_cast<std::uint32_t>(v);
      break;
    case DataType::int64:
      static_cast<std::int64_t*>(buffer)[i] = v;
      break;
    case DataType::uint64:
      static_cast<std::uint64_t*>(buffer)[i] = static_cast<std::uint64_t>(v);
      break;
    case DataType::fp16:
      static_cast<std::uint16_t*>(buffer)[i] = fp16_bits(static_cast<float>(v));
      break;
    case DataType::bf16:
      static_cast<std::uint16_t*>(buffer)[i] = bf16_bits(static_cast<float>(v));
      break;
    case DataType::fp32:
      static_cast<float*>(buffer)[i] = static_cast<float>(v);
      break;
    case DataType::fp64:
      static_cast<double*>(buffer)[i] = static_cast<double>(v);
      break;
  }
}

// Element i of a buffer of type t, widened.
inline long double load(const void* buffer, std::size_t i, DataType t) {
  switch (t) {
    case DataType::int8:
      return static_cast<const std::int8_t*>(buffer)[i];
    case DataType::uint8:
      return static_cast<const std::uint8_t*>(buffer)[i];
    case DataType::int32:
      return static_cast<const std::int32_t*>(buffer)[i];
    case DataType::uint32:
      return static_cast<const std::uint32_t*>(buffer)[i];
    case DataType::int64:
      return static_cast<long double>(static_cast<const std::int64_t*>(buffer)[i]);
    case DataType::uint64:
      return static_cast<long double>(static_cast<const std::uint64_t*>(buffer)[i]);
    case DataType::fp16:
      return fp16_value(static_cast<const std::uint16_t*>(buffer)[i]);
    case DataType::bf16:
      return bf16_value(static_cast<const std::uint16_t*>(buffer)[i]);
    case DataType::fp32:
      return static_cast<const float*>(buffer)[i];
    case DataType::fp64:
      return static_cast<const double*>(buffer)[i];
  }
  return 0;
}

inline std::string file_name(const std::string& collective, DataType t, RedOp op, int rank) {
  return collective + "-" + std::to_string(static_cast<int>(t)) + "-" + std::to_string(static_cast<int>(op)) + "-rank" +
         std::to_string(rank) + ".bin";
}

}  // namespace ringmaster::matrix_slice

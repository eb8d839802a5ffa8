// Reduction kernels against an independent scalar reference.
//
// Integers are checked exactly (wrap-around), fp32/fp64 exactly against the
// C++ scalar operation, fp16/bf16 exactly against "compute in fp32, round
// once to nearest even" with a rounding written here from scratch in double
// precision. NaN results are compared by NaN-ness only (x86 may pick either
// input's payload). The level under test is the active one, which ctest
// forces through RINGMASTER_CPU_KERNEL (the test checks that the force
// took); a level the CPU lacks is skipped. RINGMASTER_TEST_LARGE_COUNT
// lowers the largest size, for runs under CPU emulation.
//
// The Gpu* suites run the CUDA kernels (gpu/reduce.cu) against the same
// reference; without a usable device they skip, saying why.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "gpu/cuda_module.h"
#include "gpu/gpu.h"
#include "kernels/half.h"
#include "kernels/reduce.h"
#include "kernels/reduce_table.h"
#include "ringmaster/status.h"

namespace ringmaster::kernels {
namespace {

// Rounds a double to a binary float format with `mbits` stored mantissa
// bits and `ebits` exponent bits, nearest-even, returning the bit pattern.
std::uint16_t reference_round(double x, int mbits, int ebits) {
  const int bias = (1 << (ebits - 1)) - 1;
  const int emin = 1 - bias;
  const std::uint32_t inf = ((1u << ebits) - 1u) << mbits;
  const std::uint32_t sign = std::signbit(x) ? 0x8000u : 0u;
  if (std::isnan(x)) return static_cast<std::uint16_t>(sign | inf | (1u << (mbits - 1)));
  x = std::fabs(x);
  if (std::isinf(x)) return static_cast<std::uint16_t>(sign | inf);
  if (x == 0.0) return static_cast<std::uint16_t>(sign);
  int e = 0;
  std::frexp(x, &e);
  e -= 1;  // x in [2^e, 2^(e+1))
  if (e < emin) e = emin;
  double m = std::nearbyint(std::ldexp(x, mbits - e));
  if (m >= std::ldexp(1.0, mbits + 1)) {
    m /= 2;
    e += 1;
  }
  if (e > bias) return static_cast<std::uint16_t>(sign | inf);
  const auto mi = static_cast<std::uint32_t>(m);
  if (mi < (1u << mbits)) return static_cast<std::uint16_t>(sign | mi);
  return static_cast<std::uint16_t>(sign | (static_cast<std::uint32_t>(e + bias) << mbits) | (mi - (1u << mbits)));
}

double reference_widen(std::uint16_t h, int mbits, int ebits) {
  const int bias = (1 << (ebits - 1)) - 1;
  const int e = (h >> mbits) & ((1 << ebits) - 1);
  const int m = h & ((1 << mbits) - 1);
  double v = 0;
  if (e == 0) {
    v = std::ldexp(m, 1 - bias - mbits);
  } else if (e == (1 << ebits) - 1) {
    v = m != 0 ? NAN : INFINITY;
  } else {
    v = std::ldexp(m + (1 << mbits), e - bias - mbits);
  }
  return (h & 0x8000) != 0 ? -v : v;
}

template <class T>
T get(const std::uint8_t* buf, std::size_t i) {
  T v;
  std::memcpy(&v, buf + i * sizeof(T), sizeof(T));
  return v;
}

template <class F>
F float_op(RedOp op, F a, F b) {
  switch (op) {
    case RedOp::sum:
    case RedOp::avg:
      return a + b;
    case RedOp::prod:
      return a * b;
    case RedOp::max:
      if (std::isnan(a)) return a;
      if (std::isnan(b)) return b;
      return a > b ? a : b;
    case RedOp::min:
      if (std::isnan(a)) return a;
      if (std::isnan(b)) return b;
      return a < b ? a : b;
  }
  return a;
}

template <class T>
T int_op(RedOp op, T a, T b) {
  using U = std::make_unsigned_t<T>;
  switch (op) {
    case RedOp::sum:
    case RedOp::avg:
      return static_cast<T>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
    case RedOp::prod:
      // Promote to a wide unsigned type so narrow types do not go through int.
      return static_cast<T>(static_cast<U>(static_cast<std::uint64_t>(static_cast<U>(a)) * static_cast<U>(b)));
    case RedOp::max:
      return a > b ? a : b;
    case RedOp::min:
      return a < b ? a : b;
  }
  return a;
}

// Checks element i of out against the reference; returns an empty string
// when it matches, else a description. Builds no string on a match: it runs
// for tens of millions of elements.
std::string check_element(DataType type, RedOp op, const std::uint8_t* a, const std::uint8_t* b,
                          const std::uint8_t* out, std::size_t i) {
  auto describe = [](auto expected, auto got) {
    std::ostringstream why;
    why << "expected " << +expected << " got " << +got;
    return why.str();
  };
  auto exact_int = [&]<class T>(T) -> std::string {
    const T expected = int_op<T>(op, get<T>(a, i), get<T>(b, i));
    const T got = get<T>(out, i);
    return expected == got ? std::string() : describe(expected, got);
  };
  auto exact_float = [&]<class F>(F) -> std::string {
    const F expected = float_op<F>(op, get<F>(a, i), get<F>(b, i));
    const F got = get<F>(out, i);
    const bool same = std::isnan(expected) ? std::isnan(got) : std::memcmp(&expected, &got, sizeof(F)) == 0;
    return same ? std::string() : describe(expected, got);
  };
  auto rounded_half = [&](int mbits, int ebits) -> std::string {
    const float x = static_cast<float>(reference_widen(get<std::uint16_t>(a, i), mbits, ebits));
    const float y = static_cast<float>(reference_widen(get<std::uint16_t>(b, i), mbits, ebits));
    const std::uint16_t expected = reference_round(float_op<float>(op, x, y), mbits, ebits);
    const std::uint16_t got = get<std::uint16_t>(out, i);
    const bool expected_nan = std::isnan(reference_widen(expected, mbits, ebits));
    const bool got_nan = std::isnan(reference_widen(got, mbits, ebits));
    if (expected_nan == got_nan && (expected_nan || expected == got)) return {};
    std::ostringstream why;
    why << std::hex << "inputs 0x" << get<std::uint16_t>(a, i) << ", 0x" << get<std::uint16_t>(b, i) << ": expected 0x"
        << expected << " got 0x" << got;
    return why.str();
  };
  switch (type) {
    case DataType::int8:
      return exact_int(std::int8_t{});
    case DataType::uint8:
      return exact_int(std::uint8_t{});
    case DataType::int32:
      return exact_int(std::int32_t{});
    case DataType::uint32:
      return exact_int(std::uint32_t{});
    case DataType::int64:
      return exact_int(std::int64_t{});
    case DataType::uint64:
      return exact_int(std::uint64_t{});
    case DataType::fp16:
      return rounded_half(10, 5);
    case DataType::bf16:
      return rounded_half(7, 8);
    case DataType::fp32:
      return exact_float(float{});
    case DataType::fp64:
      return exact_float(double{});
  }
  return "unknown type";
}

// Random bit patterns cover NaN, infinities, subnormals and signed zeros; a
// second, tamer half keeps sums and products in range so ordinary
// arithmetic is exercised too.
void fill_random(std::uint8_t* buf, std::size_t count, DataType type, std::mt19937_64& rng) {
  const std::size_t width = size_of(type);
  for (std::size_t i = 0; i < count; ++i) {
    std::uint64_t bits = rng();
    if ((bits & 1) != 0 && is_floating(type)) {
      const double tame = std::ldexp(static_cast<double>(static_cast<std::int64_t>(rng() % 2001) - 1000), -6);
      switch (type) {
        case DataType::fp16:
          bits = reference_round(tame, 10, 5);
          break;
        case DataType::bf16:
          bits = reference_round(tame, 7, 8);
          break;
        case DataType::fp32: {
          const auto f = static_cast<float>(tame);
          std::uint32_t u;
          std::memcpy(&u, &f, 4);
          bits = u;
          break;
        }
        default:
          std::memcpy(&bits, &tame, 8);
      }
    }
    std::memcpy(buf + i * width, &bits, width);
  }
}

struct Case {
  DataType type;
  RedOp op;
};

std::string case_name(const testing::TestParamInfo<Case>& info) {
  return std::string(name_of(info.param.type)) + "_" + std::string(name_of(info.param.op));
}

std::vector<Case> all_cases() {
  std::vector<Case> cases;
  for (DataType t : kAllDataTypes) {
    for (RedOp op : kAllRedOps)
      cases.push_back({t, op});
  }
  return cases;
}

// The largest element count the matrix reduces: 2^20 + 3 unless the
// environment lowers it (emulated CPUs run a thousand times slower).
std::size_t large_count() {
  if (const char* value = std::getenv("RINGMASTER_TEST_LARGE_COUNT")) return std::strtoull(value, nullptr, 10);
  return (std::size_t{1} << 20) + 3;
}

class ReduceKernel : public testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    if (const char* forced = std::getenv("RINGMASTER_CPU_KERNEL")) {
      const auto level = parse_isa_level(forced);
      ASSERT_TRUE(level.has_value()) << "unknown RINGMASTER_CPU_KERNEL=" << forced;
      if (!cpu_supports(*level)) GTEST_SKIP() << "this CPU does not support the " << forced << " kernels";
      // Without this, a broken force would test the best level under every
      // level's name and pass.
      ASSERT_EQ(active_level(), *level) << "RINGMASTER_CPU_KERNEL=" << forced << " did not select that level";
    }
  }

  // Reduces count elements at the given byte misalignment, optionally in
  // place, and checks every element.
  void run(std::size_t count, std::size_t misalign, bool in_place) {
    const auto [type, op] = GetParam();
    const std::size_t bytes = count * size_of(type);
    std::mt19937_64 rng(count * 131 + misalign * 7 + (in_place ? 1 : 0));
    std::vector<std::uint8_t> a_store(bytes + 64), b_store(bytes + 64), out_store(bytes + 64);
    std::uint8_t* a = a_store.data() + misalign;
    std::uint8_t* b = b_store.data() + misalign;
    std::uint8_t* out = in_place ? a : out_store.data() + (misalign * 3) % 64;
    fill_random(a, count, type, rng);
    fill_random(b, count, type, rng);
    const std::vector<std::uint8_t> a_copy(a, a + bytes);

    reduce(out, a, b, count, type, op);

    int reported = 0;
    for (std::size_t i = 0; i < count && reported < 5; ++i) {
      const std::string why = check_element(type, op, a_copy.data(), b, out, i);
      if (!why.empty()) {
        ADD_FAILURE() << "level " << name_of(active_level()) << ", count " << count << ", misalign " << misalign
                      << (in_place ? ", in place" : "") << ", element " << i << ": " << why;
        ++reported;
      }
    }
  }
};

TEST_P(ReduceKernel, MatchesReferenceAtEverySize) {
  for (std::size_t count : {std::size_t{0}, std::size_t{1}, std::size_t{2}, std::size_t{3}, std::size_t{7},
                            std::size_t{15}, std::size_t{16}, std::size_t{17}, std::size_t{1023}, large_count()})
    run(count, 0, false);
}

TEST_P(ReduceKernel, UnalignedPointers) {
  for (std::size_t misalign : {1u, 2u, 3u, 4u, 12u})
    run(1023, misalign, false);
}

TEST_P(ReduceKernel, InPlace) {
  run(17, 0, true);
  run(1023, 1, true);
  run(large_count(), 0, true);
}

TEST_P(ReduceKernel, StreamingStoresAboveThreshold) {
  // Outputs of RINGMASTER_STREAMING_STORE_BYTES and more take the
  // non-temporal path; ctest lowers the threshold to keep this quick.
  const std::size_t threshold = std::min<std::size_t>(streaming_store_bytes(), std::size_t{16} << 20);
  const std::size_t count = threshold / size_of(GetParam().type) + 5;
  run(count, 0, false);
  run(count, 4, false);
}

INSTANTIATE_TEST_SUITE_P(AllTypesAndOps, ReduceKernel, testing::ValuesIn(all_cases()), case_name);

// Bit for bit, except NaNs, which agree on NaN-ness (x86 and Arm may keep
// either input's payload).
bool same_element(DataType type, const std::uint8_t* x, const std::uint8_t* y, std::size_t i) {
  const std::size_t width = size_of(type);
  if (std::memcmp(x + i * width, y + i * width, width) == 0) return true;
  switch (type) {
    case DataType::fp16:
      return std::isnan(half_to_float(get<std::uint16_t>(x, i))) && std::isnan(half_to_float(get<std::uint16_t>(y, i)));
    case DataType::bf16:
      return std::isnan(bf16_to_float(get<std::uint16_t>(x, i))) && std::isnan(bf16_to_float(get<std::uint16_t>(y, i)));
    case DataType::fp32:
      return std::isnan(get<float>(x, i)) && std::isnan(get<float>(y, i));
    case DataType::fp64:
      return std::isnan(get<double>(x, i)) && std::isnan(get<double>(y, i));
    default:
      return false;
  }
}

TEST(ReduceLevels, EverySupportedLevelAgreesWithScalar) {
  std::mt19937_64 rng(7);
  const std::size_t count = 4099;
  for (DataType type : kAllDataTypes) {
    std::vector<std::uint8_t> a(count * size_of(type)), b(a.size()), scalar_out(a.size()), out(a.size());
    fill_random(a.data(), count, type, rng);
    fill_random(b.data(), count, type, rng);
    for (RedOp op : kAllRedOps) {
      reduce(IsaLevel::scalar, scalar_out.data(), a.data(), b.data(), count, type, op);
      for (IsaLevel level : supported_levels()) {
        std::fill(out.begin(), out.end(), std::uint8_t{0xA5});
        reduce(level, out.data(), a.data(), b.data(), count, type, op);
        for (std::size_t i = 0; i < count; ++i) {
          const std::string why = check_element(type, op, a.data(), b.data(), out.data(), i);
          ASSERT_TRUE(why.empty()) << name_of(level) << " " << name_of(type) << " " << name_of(op) << " element " << i
                                   << ": " << why;
          ASSERT_TRUE(same_element(type, scalar_out.data(), out.data(), i))
              << name_of(level) << " " << name_of(type) << " " << name_of(op) << " element " << i
              << " differs from the scalar level";
        }
      }
    }
  }
}

TEST(ReduceLevels, UnsupportedLevelIsAConfigErrorAndRunsNothing) {
  // Every build lacks some level: x86-64 has no neon, AArch64 no avx2.
  std::vector<std::uint8_t> a(64, 1), b(64, 2), out(64, 0);
  int unsupported = 0;
  for (IsaLevel level : {IsaLevel::scalar, IsaLevel::sse2, IsaLevel::avx2, IsaLevel::avx512, IsaLevel::neon}) {
    if (cpu_supports(level)) continue;
    ++unsupported;
    try {
      reduce(level, out.data(), a.data(), b.data(), 64, DataType::uint8, RedOp::sum);
      ADD_FAILURE() << name_of(level) << " ran on a CPU that lacks it";
    } catch (const Error& e) {
      EXPECT_EQ(e.category(), ErrorCategory::config);
      EXPECT_NE(std::string(e.what()).find(std::string(name_of(level))), std::string::npos) << e.what();
    }
    EXPECT_EQ(out, std::vector<std::uint8_t>(64, 0));
  }
  EXPECT_GT(unsupported, 0);
}

TEST(ReduceLevels, NamesRoundTrip) {
  for (IsaLevel level : {IsaLevel::scalar, IsaLevel::sse2, IsaLevel::avx2, IsaLevel::avx512, IsaLevel::neon}) {
    EXPECT_EQ(parse_isa_level(name_of(level)), level);
  }
  EXPECT_FALSE(parse_isa_level("avx1024").has_value());
  EXPECT_TRUE(cpu_supports(IsaLevel::scalar));
  EXPECT_EQ(supported_levels().front(), IsaLevel::scalar);
  // The default is the best level: the last one supported.
  if (std::getenv("RINGMASTER_CPU_KERNEL") == nullptr) {
    EXPECT_EQ(active_level(), supported_levels().back());
  }
}

TEST(HalfConversion, RoundsToNearestEven) {
  EXPECT_EQ(float_to_half(1.0f), 0x3C00);
  EXPECT_EQ(float_to_half(1.0f + 0x1p-11f), 0x3C00);      // tie, even stays
  EXPECT_EQ(float_to_half(1.0f + 3 * 0x1p-11f), 0x3C02);  // tie, rounds up to even
  EXPECT_EQ(float_to_half(65504.0f), 0x7BFF);             // largest finite
  EXPECT_EQ(float_to_half(65519.99f), 0x7BFF);
  EXPECT_EQ(float_to_half(65520.0f), 0x7C00);  // rounds to infinity
  EXPECT_EQ(float_to_half(0x1p-24f), 0x0001);  // smallest subnormal
  EXPECT_EQ(float_to_half(0x1p-25f), 0x0000);  // tie to even zero
  EXPECT_EQ(float_to_half(-0.0f), 0x8000);
  EXPECT_EQ(float_to_half(INFINITY), 0x7C00);
  EXPECT_TRUE(std::isnan(half_to_float(float_to_half(NAN))));
  for (std::uint32_t h = 0; h < 0x10000; ++h) {
    const double expected = reference_widen(static_cast<std::uint16_t>(h), 10, 5);
    const float got = half_to_float(static_cast<std::uint16_t>(h));
    if (std::isnan(expected)) {
      ASSERT_TRUE(std::isnan(got)) << h;
    } else {
      ASSERT_EQ(static_cast<double>(got), expected) << h;
      ASSERT_EQ(float_to_half(got), h) << "round trip of 0x" << std::hex << h;
    }
  }
}

TEST(HalfConversion, MatchesReferenceRoundingOnRandomFloats) {
  std::mt19937 rng(11);
  for (int i = 0; i < 1'000'000; ++i) {
    const std::uint32_t bits = rng();
    float f;
    std::memcpy(&f, &bits, 4);
    if (std::isnan(f)) continue;
    ASSERT_EQ(float_to_half(f), reference_round(f, 10, 5)) << std::hexfloat << f;
    ASSERT_EQ(float_to_bf16(f), reference_round(f, 7, 8)) << std::hexfloat << f;
  }
  EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(NAN))));
  EXPECT_EQ(float_to_bf16(1.0f + 0x1p-8f), 0x3F80);  // tie, even stays
}

TEST(FinishAvg, DividesOnceAtTheEnd) {
  const int nranks = 3;
  std::vector<float> f = {3.0f, -9.0f, 1.0f};
  finish_avg(f.data(), f.size(), DataType::fp32, nranks);
  EXPECT_EQ(f, (std::vector<float>{1.0f, -3.0f, 1.0f / 3.0f}));

  std::vector<std::int32_t> i = {7, -7, 300};
  finish_avg(i.data(), i.size(), DataType::int32, nranks);
  EXPECT_EQ(i, (std::vector<std::int32_t>{2, -2, 100}));  // truncation toward zero

  std::vector<std::uint8_t> u = {255, 6};
  finish_avg(u.data(), u.size(), DataType::uint8, 300);  // more ranks than the type holds
  EXPECT_EQ(u, (std::vector<std::uint8_t>{0, 0}));

  std::vector<std::uint16_t> h = {float_to_half(3.0f), float_to_bf16(3.0f)};
  finish_avg(h.data(), 1, DataType::fp16, nranks);
  finish_avg(h.data() + 1, 1, DataType::bf16, nranks);
  EXPECT_EQ(half_to_float(h[0]), 1.0f);
  EXPECT_EQ(bf16_to_float(h[1]), 1.0f);
}

TEST(FinishAvg, AvgOverRanksMatchesMean) {
  // Four "ranks" reduced pairwise as a ring would, then one division.
  const std::size_t count = 1000;
  std::mt19937 rng(3);
  std::vector<std::vector<double>> ranks(4, std::vector<double>(count));
  for (auto& r : ranks) {
    for (auto& v : r)
      v = static_cast<double>(rng() % 1000);
  }
  std::vector<double> acc = ranks[0];
  for (int r = 1; r < 4; ++r)
    reduce(acc.data(), acc.data(), ranks[r].data(), count, DataType::fp64, RedOp::avg);
  finish_avg(acc.data(), count, DataType::fp64, 4);
  for (std::size_t i = 0; i < count; ++i) {
    EXPECT_DOUBLE_EQ(acc[i], (ranks[0][i] + ranks[1][i] + ranks[2][i] + ranks[3][i]) / 4);
  }
}

// The CUDA kernels against the same reference, element by element: every
// dtype x op, sizes around the 16-byte vector width, misaligned pointers
// (the element path) and in place. Skipped, with the reason, where no
// device is usable.
class GpuReduceKernel : public testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    if (!gpu::availability().usable) GTEST_SKIP() << "no CUDA device: " << gpu::availability().why;
  }

  void run(std::size_t count, std::size_t misalign, bool in_place) {
    const auto [type, op] = GetParam();
    const std::size_t bytes = count * size_of(type);
    std::mt19937_64 rng(count * 131 + misalign * 7 + (in_place ? 1 : 0));
    std::vector<std::uint8_t> a(bytes), b(bytes), out(bytes);
    fill_random(a.data(), count, type, rng);
    fill_random(b.data(), count, type, rng);
    gpu::DeviceMemory da(bytes + 64), db(bytes + 64), dout(bytes + 64);
    auto* pa = static_cast<std::uint8_t*>(da.data()) + misalign;
    auto* pb = static_cast<std::uint8_t*>(db.data()) + misalign;
    auto* pout = in_place ? pa : static_cast<std::uint8_t*>(dout.data()) + (misalign * 3) % 64;
    gpu::copy_async(pa, a.data(), bytes, nullptr);
    gpu::copy_async(pb, b.data(), bytes, nullptr);
    gpu::reduce(pout, pa, pb, count, type, op, nullptr);
    gpu::copy_async(out.data(), pout, bytes, nullptr);
    gpu::synchronize(nullptr);
    int reported = 0;
    for (std::size_t i = 0; i < count && reported < 5; ++i) {
      const std::string why = check_element(type, op, a.data(), b.data(), out.data(), i);
      if (!why.empty()) {
        ADD_FAILURE() << "CUDA, count " << count << ", misalign " << misalign << (in_place ? ", in place" : "")
                      << ", element " << i << ": " << why;
        ++reported;
      }
    }
  }
};

TEST_P(GpuReduceKernel, MatchesReferenceAtEverySize) {
  for (std::size_t count : {std::size_t{1}, std::size_t{3}, std::size_t{7}, std::size_t{15}, std::size_t{16},
                            std::size_t{17}, std::size_t{1023}, large_count(), std::size_t{16} << 20})
    run(count, 0, false);
}

TEST_P(GpuReduceKernel, PointersOffTheVectorWidth) {
  // Element-aligned but not 16-byte aligned: the element path (a device
  // load must be aligned to its type, as NCCL requires of its buffers).
  for (std::size_t elements : {1u, 3u})
    run(4099, elements * size_of(GetParam().type), false);
}

TEST_P(GpuReduceKernel, InPlace) {
  run(17, 0, true);
  run(large_count(), 0, true);
}

INSTANTIATE_TEST_SUITE_P(GpuTypesAndOps, GpuReduceKernel, testing::ValuesIn(all_cases()), case_name);

bool is_nan(DataType type, const std::uint8_t* p, std::size_t i) {
  switch (type) {
    case DataType::fp16:
      return std::isnan(half_to_float(get<std::uint16_t>(p, i)));
    case DataType::bf16:
      return std::isnan(bf16_to_float(get<std::uint16_t>(p, i)));
    case DataType::fp32:
      return std::isnan(get<float>(p, i));
    case DataType::fp64:
      return std::isnan(get<double>(p, i));
    default:
      return false;
  }
}

// avg on the device: the premultiply and the final division give what the
// CPU's give, bit for bit.
TEST(GpuAvg, PremultiplyAndFinishMatchTheCpu) {
  if (!gpu::availability().usable) GTEST_SKIP() << "no CUDA device: " << gpu::availability().why;
  const std::size_t count = 100003;
  for (DataType type : kAllDataTypes) {
    const std::size_t bytes = count * size_of(type);
    std::mt19937_64 rng(static_cast<unsigned>(type) + 11);
    std::vector<std::uint8_t> in(bytes), cpu(bytes), dev(bytes);
    fill_random(in.data(), count, type, rng);
    gpu::DeviceMemory d_in(bytes), d_out(bytes);
    gpu::copy_async(d_in.data(), in.data(), bytes, nullptr);
    for (int nranks : {3, 8}) {
      if (avg_premultiplies(type)) {
        premultiply_avg(cpu.data(), in.data(), count, type, nranks);
        gpu::premultiply_avg(d_out.data(), d_in.data(), count, type, nranks, nullptr);
      } else {
        cpu = in;
        finish_avg(cpu.data(), count, type, nranks);
        gpu::copy_async(d_out.data(), d_in.data(), bytes, nullptr);
        gpu::finish_avg(d_out.data(), count, type, nranks, nullptr);
      }
      gpu::copy_async(dev.data(), d_out.data(), bytes, nullptr);
      gpu::synchronize(nullptr);
      std::size_t differ = 0;
      for (std::size_t i = 0; i < count; ++i) {
        const bool same =
            std::memcmp(cpu.data() + i * size_of(type), dev.data() + i * size_of(type), size_of(type)) == 0;
        // The GPU's arithmetic returns its canonical NaN where x86 keeps
        // the input's payload: NaN-ness is what must agree.
        if (!same && !(is_nan(type, cpu.data(), i) && is_nan(type, dev.data(), i))) ++differ;
      }
      EXPECT_EQ(differ, 0u) << name_of(type) << " avg over " << nranks << " ranks";
    }
  }
}

#if defined(RINGMASTER_CUDA_MODULE_FILE)
// The CUDA module this build made loads on its own (the CUDA runtime is
// inside it), gives its table at this version, and answers without a
// driver with an error rather than a crash.
TEST(GpuModule, LoadsAndAnswersWithoutADevice) {
  void* handle = ::dlopen(RINGMASTER_CUDA_MODULE_FILE, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(handle, nullptr) << ::dlerror();
  using Entry = const RingmasterCudaApi* (*)();
  auto entry = reinterpret_cast<Entry>(::dlsym(handle, "ringmaster_cuda_api"));
  ASSERT_NE(entry, nullptr);
  const RingmasterCudaApi* api = entry();
  ASSERT_NE(api, nullptr);
  EXPECT_EQ(api->version, kRingmasterCudaApiVersion);
  int runtime = 0;
  EXPECT_EQ(api->runtime_version(&runtime), 0);
  EXPECT_GE(runtime, 12000);
  if (!gpu::availability().usable) {
    int devices = -1;
    const int err = api->device_count(&devices);
    EXPECT_TRUE(err != 0 || devices == 0) << "a device counted where none is usable";
    EXPECT_NE(std::string(api->error_name(err == 0 ? 100 : err)), "");
  }
}
#endif

// Every build answers availability(); where no device is usable the
// reason is named, and asking for device memory is a config error that
// names it too, never a silent success.
TEST(GpuAvailability, NamesWhyWhenNotUsable) {
  const auto& a = gpu::availability();
  if (a.usable) {
    EXPECT_TRUE(a.built);
    EXPECT_GT(a.devices, 0);
    gpu::DeviceMemory memory(64);
    EXPECT_TRUE(gpu::is_device_pointer(memory.data()));
    std::vector<int> host(4);
    EXPECT_FALSE(gpu::is_device_pointer(host.data()));
    return;
  }
  EXPECT_FALSE(a.why.empty());
#if defined(RINGMASTER_HAVE_CUDA)
  EXPECT_TRUE(a.built);
#else
  EXPECT_FALSE(a.built);
  EXPECT_NE(a.why.find("no CUDA"), std::string::npos) << a.why;
#endif
  try {
    gpu::DeviceMemory memory(64);
    ADD_FAILURE() << "device memory was handed out where CUDA is not usable";
  } catch (const Error& e) {
    EXPECT_EQ(e.status().category(), ErrorCategory::config);
    EXPECT_NE(std::string(e.what()).find(a.why), std::string::npos) << e.what();
  }
  std::vector<float> host(4);
  EXPECT_FALSE(gpu::is_device_pointer(host.data()));
}

}  // namespace
}  // namespace ringmaster::kernels

#include "kernels/reduce.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>

#include "base/log.h"
#include "base/params.h"
#include "kernels/elementwise.h"
#include "kernels/reduce_table.h"
#include "ringmaster/status.h"

namespace ringmaster::kernels {
namespace {

constexpr std::array<std::string_view, 5> kLevelNames = {"scalar", "sse2", "avx2", "avx512", "neon"};
constexpr IsaLevel kAllLevels[] = {IsaLevel::scalar, IsaLevel::sse2, IsaLevel::avx2, IsaLevel::avx512, IsaLevel::neon};

// Only ever called for a level cpu_supports() has accepted; the tables are
// constant data, so taking one runs none of its level's code.
const ReduceTable& table_for(IsaLevel level) noexcept {
  switch (level) {
#if defined(RINGMASTER_X86_KERNELS)
    case IsaLevel::sse2:
      return sse2::table;
    case IsaLevel::avx2:
      return avx2::table;
    case IsaLevel::avx512:
      return avx512::table;
#endif
#if defined(RINGMASTER_NEON_KERNELS)
    case IsaLevel::neon:
      return neon::table;
#endif
    default:
      return scalar::table;
  }
}

#if defined(RINGMASTER_X86_KERNELS)
// F16C (CPUID.1:ECX[29]) from CPUID itself: not every compiler's
// __builtin_cpu_supports knows the name.
bool cpu_has_f16c() noexcept {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & (1u << 29)) != 0;
}
#endif

// The features the levels need, as this CPU reports them, for errors.
std::string cpu_description() {
#if defined(RINGMASTER_X86_KERNELS)
  std::string have;
  std::string lack;
  auto note = [&](std::string_view name, bool present) {
    std::string& list = present ? have : lack;
    if (!list.empty()) list += ' ';
    list += name;
  };
  note("sse2", __builtin_cpu_supports("sse2") != 0);
  note("avx2", __builtin_cpu_supports("avx2") != 0);
  note("f16c", cpu_has_f16c());
  note("avx512f", __builtin_cpu_supports("avx512f") != 0);
  note("avx512bw", __builtin_cpu_supports("avx512bw") != 0);
  note("avx512dq", __builtin_cpu_supports("avx512dq") != 0);
  note("avx512vl", __builtin_cpu_supports("avx512vl") != 0);
  return "x86-64 CPU with " + (have.empty() ? std::string("none of") : have) +
         (lack.empty() ? std::string() : "; without " + lack);
#elif defined(RINGMASTER_NEON_KERNELS)
  return "AArch64 CPU: neon and scalar only";
#else
  return "this build has scalar kernels only";
#endif
}

IsaLevel choose_level() {
  if (auto forced = param_env(Param::CpuKernel)) {
    const auto level = parse_isa_level(*forced);
    if (!level) {
      throw Error(ErrorCategory::config, "RINGMASTER_CPU_KERNEL=" + *forced +
                                             " is not a kernel level; use avx512, avx2, sse2, neon or scalar");
    }
    if (!cpu_supports(*level)) {
      throw Error(ErrorCategory::config, "RINGMASTER_CPU_KERNEL=" + *forced + " is not supported by this CPU (" +
                                             cpu_description() + "); unset it to use the best level");
    }
    return *level;
  }
  const auto levels = supported_levels();
  return levels.back();
}

// Loops over the one-element definitions the CUDA kernels share
// (elementwise.h).
template <class T>
void divide_all(void* buffer, std::size_t count, int nranks) {
  auto* p = static_cast<T*>(buffer);
  for (std::size_t i = 0; i < count; ++i) {
    T v;
    std::memcpy(&v, p + i, sizeof(T));
    v = divide_element(v, nranks);
    std::memcpy(p + i, &v, sizeof(T));
  }
}

template <Half kind>
void divide_half_all(void* buffer, std::size_t count, int nranks) {
  auto* p = static_cast<std::uint16_t*>(buffer);
  for (std::size_t i = 0; i < count; ++i) {
    std::uint16_t v;
    std::memcpy(&v, p + i, sizeof(v));
    v = divide_half<kind>(v, nranks);
    std::memcpy(p + i, &v, sizeof(v));
  }
}

template <class T>
void scale_all(void* dst, const void* src, std::size_t count, int nranks) {
  auto* out = static_cast<T*>(dst);
  const auto* in = static_cast<const T*>(src);
  const T s = avg_scale<T>(nranks);
  for (std::size_t i = 0; i < count; ++i) {
    T v;
    std::memcpy(&v, in + i, sizeof(T));
    v *= s;
    std::memcpy(out + i, &v, sizeof(T));
  }
}

template <Half kind>
void scale_half_all(void* dst, const void* src, std::size_t count, int nranks) {
  auto* out = static_cast<std::uint16_t*>(dst);
  const auto* in = static_cast<const std::uint16_t*>(src);
  const float s = avg_scale_half<kind>(nranks);
  for (std::size_t i = 0; i < count; ++i) {
    std::uint16_t v;
    std::memcpy(&v, in + i, sizeof(v));
    v = scale_half<kind>(v, s);
    std::memcpy(out + i, &v, sizeof(v));
  }
}

}  // namespace

void premultiply_avg(void* dst, const void* src, std::size_t count, DataType type, int nranks) {
  if (nranks <= 0) throw Error(ErrorCategory::internal, "premultiply_avg called with nranks=" + std::to_string(nranks));
  switch (type) {
    case DataType::fp16:
      return scale_half_all<Half::fp16>(dst, src, count, nranks);
    case DataType::bf16:
      return scale_half_all<Half::bf16>(dst, src, count, nranks);
    case DataType::fp32:
      return scale_all<float>(dst, src, count, nranks);
    case DataType::fp64:
      return scale_all<double>(dst, src, count, nranks);
    default:
      throw Error(ErrorCategory::internal,
                  "premultiply_avg called for " + std::string(ringmaster::name_of(type)) + ", an integer type");
  }
}

std::size_t streaming_store_bytes() noexcept {
  static const std::size_t bytes = [] {
    try {
      const auto value = param_int(Param::StreamingStoreBytes);
      return value > 0 ? static_cast<std::size_t>(value) : SIZE_MAX;
    } catch (const Error&) {
      return static_cast<std::size_t>(8) << 20;
    }
  }();
  return bytes;
}

std::string_view name_of(IsaLevel level) noexcept {
  return kLevelNames[static_cast<std::size_t>(level)];
}

std::optional<IsaLevel> parse_isa_level(std::string_view name) noexcept {
  for (std::size_t i = 0; i < kLevelNames.size(); ++i) {
    if (kLevelNames[i] == name) return static_cast<IsaLevel>(i);
  }
  return std::nullopt;
}

bool cpu_supports(IsaLevel level) noexcept {
  switch (level) {
    case IsaLevel::scalar:
      return true;
#if defined(RINGMASTER_X86_KERNELS)
    case IsaLevel::sse2:
      return __builtin_cpu_supports("sse2") != 0;
    case IsaLevel::avx2:
      return __builtin_cpu_supports("avx2") && cpu_has_f16c();
    case IsaLevel::avx512:
      return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
#endif
#if defined(RINGMASTER_NEON_KERNELS)
    case IsaLevel::neon:
      return true;  // Advanced SIMD is part of the AArch64 baseline
#endif
    default:
      return false;
  }
}

std::vector<IsaLevel> supported_levels() {
  std::vector<IsaLevel> levels;
  for (auto level : kAllLevels) {
    if (cpu_supports(level)) levels.push_back(level);
  }
  return levels;
}

IsaLevel active_level() {
  static const IsaLevel level = [] {
    const IsaLevel chosen = choose_level();
    RM_INFO(init, "CPU reduction kernels: {} ({}{})", name_of(chosen),
            param_env(Param::CpuKernel) ? "forced by RINGMASTER_CPU_KERNEL; " : "best level; ", cpu_description());
    return chosen;
  }();
  return level;
}

void reduce(IsaLevel level, void* dst, const void* a, const void* b, std::size_t count, DataType type, RedOp op) {
  if (!cpu_supports(level)) {
    throw Error(ErrorCategory::config, "the " + std::string(name_of(level)) +
                                           " kernels are not supported by this CPU (" + cpu_description() + ")");
  }
  if (count == 0) return;
  table_for(level).fn[static_cast<std::size_t>(type)][static_cast<std::size_t>(op)](dst, a, b, count);
}

void reduce(void* dst, const void* a, const void* b, std::size_t count, DataType type, RedOp op) {
  static const ReduceTable& table = table_for(active_level());
  if (count == 0) return;
  table.fn[static_cast<std::size_t>(type)][static_cast<std::size_t>(op)](dst, a, b, count);
}

void finish_avg(void* buffer, std::size_t count, DataType type, int nranks) {
  if (nranks <= 0) throw Error(ErrorCategory::internal, "finish_avg called with nranks=" + std::to_string(nranks));
  if (nranks == 1) return;
  switch (type) {
    case DataType::int8:
      return divide_all<std::int8_t>(buffer, count, nranks);
    case DataType::uint8:
      return divide_all<std::uint8_t>(buffer, count, nranks);
    case DataType::int32:
      return divide_all<std::int32_t>(buffer, count, nranks);
    case DataType::uint32:
      return divide_all<std::uint32_t>(buffer, count, nranks);
    case DataType::int64:
      return divide_all<std::int64_t>(buffer, count, nranks);
    case DataType::uint64:
      return divide_all<std::uint64_t>(buffer, count, nranks);
    case DataType::fp16:
      return divide_half_all<Half::fp16>(buffer, count, nranks);
    case DataType::bf16:
      return divide_half_all<Half::bf16>(buffer, count, nranks);
    case DataType::fp32:
      return divide_all<float>(buffer, count, nranks);
    case DataType::fp64:
      return divide_all<double>(buffer, count, nranks);
  }
}

}  // namespace ringmaster::kernels

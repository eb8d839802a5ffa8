// Element-wise reduction kernels on the CPU.
//
// `reduce(dst, a, b, count, type, op)` computes dst[i] = a[i] op b[i] for
// every dtype x op. dst may equal a or b (in place); pointers need no
// alignment. Integers wrap on overflow. fp16 and bf16 are computed in fp32
// and rounded to nearest even. NaN rule: sum and prod propagate NaN as IEEE
// arithmetic does; max and min also propagate it (if either input is NaN the
// result is NaN, as torch.maximum does), so a NaN produced on one rank is
// never hidden by a reduction.
//
// `avg` reduces as a sum, as NCCL's does. For floating types each rank's
// input is first multiplied by 1/nranks (`premultiply_avg`), so the sums
// along the way cannot overflow (65504 in fp16 averaged on 3 ranks gave
// +inf when divided at the end). Integers are summed, wrapping on
// overflow as NCCL's do, and divided once at the end (`finish_avg`).
//
// The implementation is vectorised per instruction-set level (AVX-512,
// AVX2, SSE2 and scalar on x86-64; NEON and scalar on AArch64) and the
// level is chosen once, at first use: the best the CPU supports, or the one
// named by RINGMASTER_CPU_KERNEL. Thread-safe.
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>
#include <vector>

#include "ringmaster/types.h"

namespace ringmaster::kernels {

// In order of preference within an architecture: the best supported level
// is the last one cpu_supports() accepts.
enum class IsaLevel { scalar, sse2, avx2, avx512, neon };

std::string_view name_of(IsaLevel level) noexcept;
std::optional<IsaLevel> parse_isa_level(std::string_view name) noexcept;

// Whether this CPU (and this build) can run kernels of that level.
bool cpu_supports(IsaLevel level) noexcept;
// Every level this CPU supports, lowest first.
std::vector<IsaLevel> supported_levels();
// The level in use: RINGMASTER_CPU_KERNEL when set (an unknown or
// unsupported name throws Error(config)), else the best supported.
IsaLevel active_level();

void reduce(void* dst, const void* a, const void* b, std::size_t count, DataType type, RedOp op);
// With a level the CPU lacks, throws Error(config) and runs nothing.
void reduce(IsaLevel level, void* dst, const void* a, const void* b, std::size_t count, DataType type, RedOp op);

// Whether avg of `type` is premultiplied (floating types) rather than
// divided at the end (integers).
constexpr bool avg_premultiplies(DataType type) noexcept {
  return is_floating(type);
}

// dst[i] = src[i] * s, with s = 1/nranks rounded to `type` and the product
// rounded once (16-bit floats multiply in fp32): NCCL's avg for floating
// types. dst may equal src. Throws Error(internal) for integer types.
void premultiply_avg(void* dst, const void* src, std::size_t count, DataType type, int nranks);

// Divides every element by nranks, for RedOp::avg of integers (and of
// floats summed without premultiply_avg). Integers divide with truncation
// toward zero; 16-bit floats divide in fp32 and round once.
void finish_avg(void* buffer, std::size_t count, DataType type, int nranks);

}  // namespace ringmaster::kernels

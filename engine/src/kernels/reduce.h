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
// `avg` reduces as a sum; the division by the number of ranks is a separate
// step, `finish_avg`, applied once at the end of a collective so that no
// precision is lost along the way.
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

// Divides every element by nranks, for RedOp::avg. Integers divide with
// truncation toward zero; 16-bit floats divide in fp32 and round once.
void finish_avg(void* buffer, std::size_t count, DataType type, int nranks);

}  // namespace ringmaster::kernels

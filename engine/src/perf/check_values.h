// The values perf fills its buffers with, and the reference it checks
// every received element against (perf.cpp).
#pragma once

#include <cstddef>
#include <vector>

#include "ringmaster/types.h"

namespace ringmaster::perf_values {

// Rank r's input for a given size: values chosen so that the op is exact
// whatever the order (sums of small integers; products only of +-1 and
// +-2). A counter-based hash, not a sequential generator, so building the
// reference from every rank's input stays cheap at large sizes.
void fill(std::vector<std::byte>& buf, std::size_t count, DataType type, RedOp op, int rank, std::size_t bytes);

// The reduction of every rank's input, element by element, in double:
// exact for the inputs fill() makes (small integers; products of +-1 and
// +-2), integers wrapped to their type, avg divided once at the end
// (integers truncating toward zero). `largest` gets each element's largest
// input magnitude (what bounds a floating avg's rounding, see matches).
std::vector<double> reference_reduction(DataType type, RedOp op, int n, std::size_t count, std::size_t total,
                                        std::vector<double>& largest);

// Whether a reduced element matches the reference: exactly, except a
// floating avg. As NCCL does, each of the n inputs is multiplied by 1/n
// (itself rounded to the type) and the products summed, every step rounded
// in the type: at most n units in the last place of the largest input
// (`largest`) apart from the exact average.
bool matches(const std::byte* got, double expected, DataType type, RedOp op, int n, double largest);

}  // namespace ringmaster::perf_values

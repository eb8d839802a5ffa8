// Internal: the table of kernels each instruction-set level provides.
#pragma once

#include <cstddef>
#include <iterator>

#include "ringmaster/types.h"

namespace ringmaster::kernels {

using ReduceFn = void (*)(void* dst, const void* a, const void* b, std::size_t count);

struct ReduceTable {
  ReduceFn fn[std::size(kAllDataTypes)][std::size(kAllRedOps)];
};

// Output size from which kernels use non-temporal stores (read once from
// RINGMASTER_STREAMING_STORE_BYTES).
std::size_t streaming_store_bytes() noexcept;

namespace scalar {
ReduceTable make_table();
}
namespace sse2 {
ReduceTable make_table();
}
namespace avx2 {
ReduceTable make_table();
}
namespace avx512 {
ReduceTable make_table();
}

}  // namespace ringmaster::kernels

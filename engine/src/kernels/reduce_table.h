// Internal: the table of kernels each instruction-set level provides.
//
// Each level's table is constant data, filled in at compile time (constinit
// in reduce_impl.h): reading it runs no code, so nothing compiled with a
// level's instruction-set flags runs before cpu_supports() has said yes for
// that level. Each table is the only symbol its unit defines for other
// units to bind to (kernels_isa_symbols checks that with nm).
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
extern const ReduceTable table;
}
#if defined(RINGMASTER_X86_KERNELS)
namespace sse2 {
extern const ReduceTable table;
}
namespace avx2 {
extern const ReduceTable table;
}
namespace avx512 {
extern const ReduceTable table;
}
#endif
#if defined(RINGMASTER_NEON_KERNELS)
namespace neon {
extern const ReduceTable table;
}
#endif

}  // namespace ringmaster::kernels

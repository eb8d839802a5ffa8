// Reduction kernels for the sse2 level (compiled with that level's flags).
#define RINGMASTER_ISA sse2
#define RINGMASTER_VEC_BYTES 16
#include "kernels/reduce_impl.h"

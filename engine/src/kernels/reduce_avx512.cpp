// Reduction kernels for the avx512 level (compiled with that level's flags).
#define RINGMASTER_ISA avx512
#define RINGMASTER_VEC_BYTES 64
#define RINGMASTER_HAVE_F16C 1
#include "kernels/reduce_impl.h"

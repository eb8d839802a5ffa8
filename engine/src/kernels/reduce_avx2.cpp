// Reduction kernels for the avx2 level (compiled with that level's flags).
#define RINGMASTER_ISA avx2
#define RINGMASTER_VEC_BYTES 32
#define RINGMASTER_HAVE_F16C 1
#include "kernels/reduce_impl.h"

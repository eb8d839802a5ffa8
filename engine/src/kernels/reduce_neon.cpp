// Reduction kernels for the neon level (AArch64 Advanced SIMD, part of the
// AArch64 baseline, so no extra flags).
#define RINGMASTER_ISA neon
#define RINGMASTER_VEC_BYTES 16
#define RINGMASTER_HAVE_NEON 1
#include "kernels/reduce_impl.h"

// Reduction kernels for the scalar level (compiled with that level's flags).
#define RINGMASTER_ISA scalar
#define RINGMASTER_VEC_BYTES 0
#include "kernels/reduce_impl.h"

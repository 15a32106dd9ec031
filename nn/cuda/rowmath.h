// rowmath.h: what the per-row loss headers (surrogate.h, dqnloss.h) need to compile both as CUDA device
// code (kernels.cu) and as host C (surrogate_host.go, whose tests hold them to the learners' Go).
//
// A product that a compiler could fuse with an addition into one rounding (an fma) goes through
// ROW_DMUL, which never fuses, so that device and host round alike; the host side is compiled with
// fp-contract off besides.
#ifndef DISTRL_ROWMATH_H
#define DISTRL_ROWMATH_H

#ifdef __CUDACC__
#define ROW_FN __device__ __forceinline__
#define ROW_DMUL(a, b) __dmul_rn((a), (b))
#else
#include <math.h>
#define ROW_FN static inline
#define ROW_DMUL(a, b) ((a) * (b))
#endif

#endif

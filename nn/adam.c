//go:build !noopenblas

#include <stddef.h>

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#include <immintrin.h>

// ADAM_LOOP is Adam.Update's loop (adamGo in adam.go) over vectors of W
// bits (512 or 256) of LANES floats, operation for operation: each product
// and sum rounded on its own (GCC would fuse the intrinsics' multiplies
// and adds, were contraction not off in the functions below), and vsqrtps
// and vdivps, correctly rounded as SQRTSS and DIVSS are, so that it is bit
// for bit the Go loop's. It returns how many values it did (a multiple of
// LANES).
#define ADAM_LOOP(W, LANES)                                                                                    \
	const __m##W vb1 = _mm##W##_set1_ps(b1), vb2 = _mm##W##_set1_ps(b2);                                       \
	const __m##W vc1 = _mm##W##_set1_ps(1 - b1), vc2 = _mm##W##_set1_ps(1 - b2);                               \
	const __m##W vstep = _mm##W##_set1_ps(step), vinv = _mm##W##_set1_ps(inv_sqrt_c2);                         \
	const __m##W veps = _mm##W##_set1_ps(eps);                                                                 \
	size_t i = 0;                                                                                              \
	for (; i + LANES <= n; i += LANES) {                                                                       \
		__m##W gi = _mm##W##_loadu_ps(g + i);                                                                  \
		__m##W mi = _mm##W##_add_ps(_mm##W##_mul_ps(vb1, _mm##W##_loadu_ps(m + i)), _mm##W##_mul_ps(vc1, gi)); \
		__m##W vi = _mm##W##_add_ps(_mm##W##_mul_ps(vb2, _mm##W##_loadu_ps(v + i)),                            \
		                            _mm##W##_mul_ps(_mm##W##_mul_ps(vc2, gi), gi));                            \
		_mm##W##_storeu_ps(m + i, mi);                                                                         \
		_mm##W##_storeu_ps(v + i, vi);                                                                         \
		__m##W den = _mm##W##_add_ps(_mm##W##_mul_ps(_mm##W##_sqrt_ps(vi), vinv), veps);                       \
		__m##W upd = _mm##W##_div_ps(_mm##W##_mul_ps(vstep, mi), den);                                         \
		_mm##W##_storeu_ps(p + i, _mm##W##_sub_ps(_mm##W##_loadu_ps(p + i), upd));                             \
	}                                                                                                          \
	return i

#define ADAM_ARGS float *p, float *m, float *v, const float *g, size_t n, \
	float b1, float b2, float step, float inv_sqrt_c2, float eps

__attribute__((target("avx512f"), optimize("fp-contract=off")))
static size_t adam_avx512(ADAM_ARGS) { ADAM_LOOP(512, 16); }

__attribute__((target("avx2,fma"), optimize("fp-contract=off")))
static size_t adam_avx2(ADAM_ARGS) { ADAM_LOOP(256, 8); }
#endif

// distrl_adam does one Adam step over the first parameters through the
// vector path of the given lanes, 16 (AVX-512) or 8 (AVX2), which the CPU
// must run (distrl_simd_runs in simd.c), and returns how many it did (0
// for any other lanes); adamGo does the rest. The Go loop, whose square
// roots and divisions run one at a time, was 13% of a DQN update of
// MinAtar's network at batch 64.
size_t distrl_adam(float *p, float *m, float *v, const float *g, size_t n,
                   float b1, float b2, float step, float inv_sqrt_c2, float eps, int lanes) {
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
	if (lanes == 16) {
		return adam_avx512(p, m, v, g, n, b1, b2, step, inv_sqrt_c2, eps);
	}
	if (lanes == 8) {
		return adam_avx2(p, m, v, g, n, b1, b2, step, inv_sqrt_c2, eps);
	}
#endif
	return 0;
}

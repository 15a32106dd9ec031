//go:build !noopenblas

#include <stddef.h>

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#include <immintrin.h>

// adam_avx512 is Adam.Update's loop (adamGo in adam.go) sixteen lanes at a
// time, operation for operation: each product and sum rounded on its own
// (GCC would fuse the intrinsics' multiplies and adds, were contraction
// not off), and vsqrtps and vdivps, correctly rounded as SQRTSS and DIVSS
// are, so that it is bit for bit the Go loop's. It returns how many
// values it did (a multiple of 16).
__attribute__((target("avx512f"), optimize("fp-contract=off")))
static size_t adam_avx512(float *p, float *m, float *v, const float *g, size_t n,
                          float b1, float b2, float step, float inv_sqrt_c2, float eps) {
	const __m512 vb1 = _mm512_set1_ps(b1), vb2 = _mm512_set1_ps(b2);
	const __m512 vc1 = _mm512_set1_ps(1 - b1), vc2 = _mm512_set1_ps(1 - b2);
	const __m512 vstep = _mm512_set1_ps(step), vinv = _mm512_set1_ps(inv_sqrt_c2), veps = _mm512_set1_ps(eps);
	size_t i = 0;
	for (; i + 16 <= n; i += 16) {
		__m512 gi = _mm512_loadu_ps(g + i);
		__m512 mi = _mm512_add_ps(_mm512_mul_ps(vb1, _mm512_loadu_ps(m + i)), _mm512_mul_ps(vc1, gi));
		__m512 vi = _mm512_add_ps(_mm512_mul_ps(vb2, _mm512_loadu_ps(v + i)), _mm512_mul_ps(_mm512_mul_ps(vc2, gi), gi));
		_mm512_storeu_ps(m + i, mi);
		_mm512_storeu_ps(v + i, vi);
		__m512 den = _mm512_add_ps(_mm512_mul_ps(_mm512_sqrt_ps(vi), vinv), veps);
		__m512 upd = _mm512_div_ps(_mm512_mul_ps(vstep, mi), den);
		_mm512_storeu_ps(p + i, _mm512_sub_ps(_mm512_loadu_ps(p + i), upd));
	}
	return i;
}
#endif

// distrl_adam does one Adam step over the first parameters, sixteen lanes
// at a time where the CPU has AVX-512, and returns how many it did (0
// elsewhere); adamGo does the rest. The Go loop, whose square roots and
// divisions run one at a time, was 13% of a DQN update of MinAtar's
// network at batch 64.
size_t distrl_adam(float *p, float *m, float *v, const float *g, size_t n,
                   float b1, float b2, float step, float inv_sqrt_c2, float eps) {
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
	if (__builtin_cpu_supports("avx512f")) {
		return adam_avx512(p, m, v, g, n, b1, b2, step, inv_sqrt_c2, eps);
	}
#endif
	return 0;
}

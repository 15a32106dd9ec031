//go:build !noopenblas

#include <stddef.h>

// The rational approximation of tanh32 (forward.go): p(x²)·x / q(x²) on
// [-TANH_CLAMP, TANH_CLAMP], coefficients from the highest power down. Both
// loops below evaluate it.
#define TANH_CLAMP 7.90531110763549805f
#define TANH_P6 -2.76076847742355e-16f
#define TANH_P5 2.00018790482477e-13f
#define TANH_P4 -8.60467152213735e-11f
#define TANH_P3 5.12229709037114e-08f
#define TANH_P2 1.48572235717979e-05f
#define TANH_P1 6.37261928875436e-04f
#define TANH_P0 4.89352455891786e-03f
#define TANH_Q3 1.19825839466702e-06f
#define TANH_Q2 1.18534705686654e-04f
#define TANH_Q1 2.26843463243900e-03f
#define TANH_Q0 4.89352518554385e-03f

// tanh_loop is tanh32 of forward.go over a slice, in C: the same rational
// approximation, one value at a time. It does the vector paths' remainders
// and whole slices where the CPU has neither. GCC does not vectorise it
// (the clamp's comparisons are control flow to its vectoriser at -O3 too,
// short of AVX-512's masks), hence the explicit paths below. On x86-64 the
// loader picks the clone with FMA where the CPU has it; FMA contraction
// rounds a little differently from tanh32, within its error bound
// (tanh_test.go).
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
__attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#endif
void distrl_tanh_loop(float *y, size_t n) {
	for (size_t i = 0; i < n; i++) {
		float x = y[i];
		// Past the clamp tanh rounds to ±1 in float32 (and tanh32 says
		// so). Comparisons: NaN passes through.
		if (x > TANH_CLAMP) {
			y[i] = 1.0f;
			continue;
		}
		if (x < -TANH_CLAMP) {
			y[i] = -1.0f;
			continue;
		}
		float x2 = x * x;
		float p = TANH_P6;
		p = p * x2 + TANH_P5;
		p = p * x2 + TANH_P4;
		p = p * x2 + TANH_P3;
		p = p * x2 + TANH_P2;
		p = p * x2 + TANH_P1;
		p = p * x2 + TANH_P0;
		float q = TANH_Q3;
		q = q * x2 + TANH_Q2;
		q = q * x2 + TANH_Q1;
		q = q * x2 + TANH_Q0;
		y[i] = x * p / q;
	}
}

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#include <immintrin.h>

// TANH_PQ sets p and q, vectors of W bits (512 or 256), to the numerator's
// and the denominator's polynomial at x2, with FMA, in tanh_loop's order.
#define TANH_PQ(W, x2, p, q)                                              \
	do {                                                                  \
		p = _mm##W##_set1_ps(TANH_P6);                                    \
		p = _mm##W##_fmadd_ps(p, x2, _mm##W##_set1_ps(TANH_P5));          \
		p = _mm##W##_fmadd_ps(p, x2, _mm##W##_set1_ps(TANH_P4));          \
		p = _mm##W##_fmadd_ps(p, x2, _mm##W##_set1_ps(TANH_P3));          \
		p = _mm##W##_fmadd_ps(p, x2, _mm##W##_set1_ps(TANH_P2));          \
		p = _mm##W##_fmadd_ps(p, x2, _mm##W##_set1_ps(TANH_P1));          \
		p = _mm##W##_fmadd_ps(p, x2, _mm##W##_set1_ps(TANH_P0));          \
		q = _mm##W##_set1_ps(TANH_Q3);                                    \
		q = _mm##W##_fmadd_ps(q, x2, _mm##W##_set1_ps(TANH_Q2));          \
		q = _mm##W##_fmadd_ps(q, x2, _mm##W##_set1_ps(TANH_Q1));          \
		q = _mm##W##_fmadd_ps(q, x2, _mm##W##_set1_ps(TANH_Q0));          \
	} while (0)

// tanh_avx512 is the same approximation sixteen lanes at a time with the
// division replaced by a reciprocal estimate and one Newton step (about
// 23 bits, within tanh32's error bound): the division was the loop's
// bottleneck, and this takes a 32768-value slice from 6.5 to 4.2 us on the
// development machine's AMD EPYC. Because the estimate may round 1 to
// 1 - 2^-24, lanes at the clamp are set to ±1 exactly and every lane is
// bounded by 1, as the backward pass's 1 - y² needs. It returns how many
// values it did (a multiple of 16); the rest is tanh_loop's.
__attribute__((target("avx512f")))
static size_t tanh_avx512(float *y, size_t n) {
	const __m512 clamp = _mm512_set1_ps(TANH_CLAMP), one = _mm512_set1_ps(1.0f);
	const __m512i sign = _mm512_set1_epi32((int)0x80000000);
	size_t i = 0;
	for (; i + 16 <= n; i += 16) {
		__m512 v = _mm512_loadu_ps(y + i);
		// min and max return their second operand where either is NaN:
		// NaN passes through, as in tanh_loop.
		__m512 x = _mm512_max_ps(_mm512_sub_ps(_mm512_setzero_ps(), clamp), _mm512_min_ps(clamp, v));
		__m512 x2 = _mm512_mul_ps(x, x);
		__m512 p, q;
		TANH_PQ(512, x2, p, q);
		__m512 r = _mm512_rcp14_ps(q);
		r = _mm512_mul_ps(r, _mm512_fnmadd_ps(q, r, _mm512_set1_ps(2.0f)));
		__m512 t = _mm512_mul_ps(_mm512_mul_ps(x, p), r);
		t = _mm512_max_ps(_mm512_sub_ps(_mm512_setzero_ps(), one), _mm512_min_ps(one, t));
		// |v| >= clamp: ±1 with v's sign (NaN compares false and stays).
		__m512 absv = _mm512_castsi512_ps(_mm512_andnot_si512(sign, _mm512_castps_si512(v)));
		__mmask16 sat = _mm512_cmp_ps_mask(absv, clamp, _CMP_GE_OQ);
		__m512 signed_one = _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(one),
			_mm512_and_si512(sign, _mm512_castps_si512(v))));
		_mm512_storeu_ps(y + i, _mm512_mask_blend_ps(sat, t, signed_one));
	}
	return i;
}

// tanh_avx2 is tanh_loop eight lanes at a time with AVX2 and FMA: the
// same operations in the same order, exact division included (a division
// of eight lanes costs about what one of a single value does), so each
// lane is bit for bit what tanh_loop's FMA clone gives, remainder and all.
// Without it a CPU without AVX-512 ran tanh_loop a value at a time, which
// took 70% of CartPole's forward pass on the development machine's AVX2
// EPYC. min and max pass NaN through as in tanh_avx512; tanh_loop's
// results are within [-1, 1] without a bound. It returns how many values
// it did (a multiple of 8).
__attribute__((target("avx2,fma")))
static size_t tanh_avx2(float *y, size_t n) {
	const __m256 clamp = _mm256_set1_ps(TANH_CLAMP), one = _mm256_set1_ps(1.0f);
	const __m256 neg_clamp = _mm256_set1_ps(-TANH_CLAMP), neg_zero = _mm256_set1_ps(-0.0f);
	size_t i = 0;
	for (; i + 8 <= n; i += 8) {
		__m256 v = _mm256_loadu_ps(y + i);
		__m256 x = _mm256_max_ps(neg_clamp, _mm256_min_ps(clamp, v));
		__m256 x2 = _mm256_mul_ps(x, x);
		__m256 p, q;
		TANH_PQ(256, x2, p, q);
		__m256 t = _mm256_div_ps(_mm256_mul_ps(x, p), q);
		// |v| > clamp: ±1 with v's sign, as tanh_loop (NaN compares false
		// and stays NaN).
		__m256 sign = _mm256_and_ps(v, neg_zero);
		__m256 sat = _mm256_cmp_ps(_mm256_andnot_ps(neg_zero, v), clamp, _CMP_GT_OQ);
		_mm256_storeu_ps(y + i, _mm256_blendv_ps(t, _mm256_or_ps(one, sign), sat));
	}
	return i;
}
#endif

// distrl_tanh_on sets each element of y to its tanh32 through the path of
// the given lanes, which the CPU must run (distrl_simd_runs in simd.c), and
// tanh_loop for what is left: the tests hold every path a CPU runs to the
// same bounds.
void distrl_tanh_on(float *y, size_t n, int lanes) {
	size_t done = 0;
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
	if (lanes == 16) {
		done = tanh_avx512(y, n);
	} else if (lanes == 8) {
		done = tanh_avx2(y, n);
	}
#endif
	distrl_tanh_loop(y + done, n - done);
}

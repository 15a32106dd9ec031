//go:build !noopenblas

#include <stddef.h>

// distrl_tanh is tanh32 of forward.go over a slice, in C so that the
// compiler vectorises it (Go's does not): the same rational approximation,
// eight or sixteen lanes at a time. On x86-64 the loader picks the clone
// for the CPU (AVX-512, AVX2 with FMA, or SSE2); FMA contraction rounds a
// little differently from tanh32, within its error bound (tanh_test.go).
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
__attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#endif
void distrl_tanh(float *y, size_t n) {
	const float clamp = 7.90531110763549805f;
	for (size_t i = 0; i < n; i++) {
		float x = y[i];
		// Comparisons rather than fminf/fmaxf: NaN passes through.
		x = x > clamp ? clamp : x;
		x = x < -clamp ? -clamp : x;
		float x2 = x * x;
		float p = -2.76076847742355e-16f;
		p = p * x2 + 2.00018790482477e-13f;
		p = p * x2 - 8.60467152213735e-11f;
		p = p * x2 + 5.12229709037114e-08f;
		p = p * x2 + 1.48572235717979e-05f;
		p = p * x2 + 6.37261928875436e-04f;
		p = p * x2 + 4.89352455891786e-03f;
		float q = 1.19825839466702e-06f;
		q = q * x2 + 1.18534705686654e-04f;
		q = q * x2 + 2.26843463243900e-03f;
		q = q * x2 + 4.89352518554385e-03f;
		y[i] = x * p / q;
	}
}

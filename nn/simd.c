//go:build !noopenblas

// distrl_simd_runs says whether this CPU runs the vector paths of tanh.c,
// adam.c, elementwise.c and im2col.c of the given lanes: 16 (AVX-512 F), 8
// (AVX2 with FMA) or 1 (no vector path; everywhere). The kernels take the
// widest, and the tests hold every path the CPU runs to the same results.
int distrl_simd_runs(int lanes) {
	switch (lanes) {
	case 1:
		return 1;
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
	case 8:
		return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
	case 16:
		// Not 1: __builtin_cpu_supports returns the feature's bit.
		return __builtin_cpu_supports("avx512f") != 0;
#endif
	}
	return 0;
}

// vectorpaths.h: one C loop compiled for each vector path of simd.c.
//
// GCC's vectoriser turns a plain loop into AVX-512, AVX2 or SSE2 code by
// the target it compiles for; the macro below compiles one body for each,
// so that elementwise.c writes every loop once.
#ifndef DISTRL_VECTORPATHS_H
#define DISTRL_VECTORPATHS_H

// VECTOR_PATHS(NAME, CALL, BODY, PARAMS...) defines NAME_avx512, NAME_avx2
// and NAME_loop, the same BODY compiled for AVX-512, for AVX2 and for the
// baseline, and distrl_NAME(int lanes, PARAMS...), which runs the one of
// the given lanes (16, 8, or anything else: the loop); the caller asks
// distrl_simd_runs (simd.c) first. BODY is one macro argument: no comma
// outside parentheses in it (one declaration a line). Loops stay loops,
// not calls to memcpy and memset (loop distribution off): a short slice
// costs less than the call.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define VECTOR_PATHS(NAME, CALL, BODY, ...)                                                   \
	__attribute__((target("avx512f"), optimize("fp-contract=off", "no-tree-loop-distribute-patterns")))                       \
	static void NAME##_avx512(__VA_ARGS__) BODY                                                 \
	__attribute__((target("avx2,fma"), optimize("fp-contract=off", "no-tree-loop-distribute-patterns")))                            \
	static void NAME##_avx2(__VA_ARGS__) BODY                                                   \
	__attribute__((optimize("fp-contract=off", "no-tree-loop-distribute-patterns"))) static void NAME##_loop(__VA_ARGS__) BODY      \
	void distrl_##NAME(int lanes, __VA_ARGS__) {                                                \
		if (lanes == 16) {                                                                      \
			NAME##_avx512 CALL;                                                                 \
		} else if (lanes == 8) {                                                                \
			NAME##_avx2 CALL;                                                                   \
		} else {                                                                                \
			NAME##_loop CALL;                                                                   \
		}                                                                                       \
	}
#else
#define VECTOR_PATHS(NAME, CALL, BODY, ...)              \
	static void NAME##_loop(__VA_ARGS__) BODY            \
	void distrl_##NAME(int lanes, __VA_ARGS__) { NAME##_loop CALL; }
#endif

#endif

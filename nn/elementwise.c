//go:build !noopenblas

#include <stddef.h>
#include <stdint.h>
#include <string.h>

// The elementwise loops of the forward and backward passes (forward.go's
// activate and activateGrad, backward.go's sumRows), in C so that GCC
// vectorises them: Go runs them a value at a time, and together they were
// a third of a CartPole network's training step at batch 512 and a sixth
// of MinAtar's. Each loop does what its Go original does, operation for
// operation and in the same order (contraction into fused multiply-adds
// off), so the results are the same bits (elementwise_test.go).
//
// GCC's vectoriser turns a plain loop into AVX-512, AVX2 or SSE2 code by
// the target it compiles for; VECTOR_PATHS compiles each body for all three.

// VECTOR_PATHS(NAME, CALL, BODY, PARAMS...) defines NAME_avx512, NAME_avx2
// and NAME_loop, the same BODY compiled for AVX-512, for AVX2 and for the
// baseline, and distrl_NAME(int lanes, PARAMS...), which runs the one of
// the given lanes (16, 8, or anything else: the loop); the caller asks
// distrl_simd_runs (simd.c) first. BODY is one macro argument: no comma
// outside parentheses in it (one declaration a line).
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define VECTOR_PATHS(NAME, CALL, BODY, ...)                                                          \
	__attribute__((target("avx512f"), optimize("fp-contract=off")))                                     \
	static void NAME##_avx512(__VA_ARGS__) BODY                                                         \
	__attribute__((target("avx2,fma"), optimize("fp-contract=off")))                                    \
	static void NAME##_avx2(__VA_ARGS__) BODY                                                           \
	__attribute__((optimize("fp-contract=off"))) static void NAME##_loop(__VA_ARGS__) BODY              \
	void distrl_##NAME(int lanes, __VA_ARGS__) {                                                        \
		if (lanes == 16) {                                                                                 \
			NAME##_avx512 CALL;                                                                               \
		} else if (lanes == 8) {                                                                           \
			NAME##_avx2 CALL;                                                                                 \
		} else {                                                                                           \
			NAME##_loop CALL;                                                                                 \
		}                                                                                                  \
	}
#else
#define VECTOR_PATHS(NAME, CALL, BODY, ...)                                                          \
	static void NAME##_loop(__VA_ARGS__) BODY                                                           \
	void distrl_##NAME(int lanes, __VA_ARGS__) { NAME##_loop CALL; }
#endif

// relu: y = max(y, 0) as Go's max: NaN stays NaN, -0 becomes +0.
VECTOR_PATHS(relu, (y, n), {
	for (size_t i = 0; i < n; i++) {
		float v = y[i];
		y[i] = (v > 0.0f || v != v) ? v : 0.0f;
	}
}, float *restrict y, size_t n)

// tanh_grad: dy *= 1 - y·y, y being tanh's output.
VECTOR_PATHS(tanh_grad, (y, dy, n), {
	for (size_t i = 0; i < n; i++) {
		dy[i] *= 1.0f - y[i] * y[i];
	}
}, const float *restrict y, float *restrict dy, size_t n)

// relu_grad: dy where the unit is on, 0 where it is off. y is ReLU's
// output, never negative nor -0, so its bits are zero exactly where the
// unit is off; the mask keeps dy bit for bit (NaN included) elsewhere.
VECTOR_PATHS(relu_grad, (y, dy, n), {
	for (size_t i = 0; i < n; i++) {
		uint32_t yb;
		uint32_t db;
		memcpy(&yb, &y[i], 4);
		memcpy(&db, &dy[i], 4);
		uint32_t on = (uint32_t)((int32_t)(0u - yb) >> 31);
		db &= on;
		memcpy(&dy[i], &db, 4);
	}
}, const float *restrict y, float *restrict dy, size_t n)

// sum_rows: gb += each row of dy ([rows, out]), the rows in order, so each
// of gb's sums is added up in the order sumRows adds it.
VECTOR_PATHS(sum_rows, (dy, gb, rows, out), {
	for (size_t r = 0; r < rows; r++) {
		const float *d = dy + r * out;
		for (size_t j = 0; j < out; j++) {
			gb[j] += d[j];
		}
	}
}, const float *restrict dy, float *restrict gb, size_t rows, size_t out)

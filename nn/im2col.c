//go:build !noopenblas

#include <stddef.h>
#include <string.h>

// im2col is convGeom.lower's gather (im2col.go, scatter false) in C: the
// same matrix, the same zeros where a window covers padding. Go copies a
// window row (k·inC values: 12 for MinAtar's 3×3 over 4 channels) with a
// call to memmove each, which made lowering a fifth of MinAtar's forward
// pass at batch 64, and a loop GCC vectorises is no faster: 12 values are
// less than one AVX-512 vector, so they went through its scalar
// remainder. Here a run shorter than a vector is one masked load and one
// masked store on AVX-512, and an 8-lane, a 4-lane and single moves on
// AVX2 (BenchmarkIm2col: 2.4-2.6x lower in Go on MinAtar's geometry). The
// values are only copied, so the matrix is the Go one's bits
// (TestIm2colMatchesGo). col2im, lower's scatter (the input gradient of a
// convolution after the first), adds the same way, in lower's order.
//
// IM2COL(NAME, SETUP, COPY_RUN, COPY, ZERO) defines the lowering,
// or with other operations its adjoint: SETUP declares what COPY_RUN(row,
// src) needs to move one window row of run values between col and x
// (computed once: the run is the same for every row), COPY(row, src, n)
// and ZERO(row, n) do the rows of windows that cover padding. Every
// variant has the one signature, lower_fn, so that distrl_lower picks
// among them.
#define IM2COL(NAME, SETUP, COPY_RUN, COPY, ZERO)                                                      \
	static void NAME(float *restrict x, float *restrict col, long n, long in_h, long in_w,             \
	                 long in_c, long out_h, long out_w, long k, long stride, long pad) {                \
		const long run = k * in_c;                                                                      \
		const long in_size = in_h * in_w * in_c;                                                        \
		SETUP                                                                                           \
		float *row = col;                                                                               \
		for (long img = 0; img < n; img++) {                                                            \
			float *xi = x + img * in_size;                                                              \
			for (long oy = 0; oy < out_h; oy++) {                                                       \
				const long iy0 = oy * stride - pad;                                                     \
				for (long ox = 0; ox < out_w; ox++) {                                                   \
					const long ix0 = ox * stride - pad;                                                 \
					/* The window's columns kx in [lo, hi) fall inside the image. */                    \
					const long lo = ix0 < 0 ? -ix0 : 0;                                                 \
					const long hi = in_w - ix0 < k ? in_w - ix0 : k;                                    \
					if (lo == 0 && hi == k && iy0 >= 0 && iy0 + k <= in_h) {                            \
						/* Inside the image: k whole runs, nothing to clear. */                         \
						float *src = xi + (iy0 * in_w + ix0) * in_c;                                    \
						for (long ky = 0; ky < k; ky++, row += run, src += in_w * in_c) {               \
							COPY_RUN(row, src);                                                         \
						}                                                                               \
						continue;                                                                       \
					}                                                                                   \
					for (long ky = 0; ky < k; ky++, row += run) {                                       \
						const long iy = iy0 + ky;                                                       \
						if (iy < 0 || iy >= in_h || lo >= hi) {                                         \
							ZERO(row, run);                                                             \
							continue;                                                                   \
						}                                                                               \
						ZERO(row, lo * in_c);                                                           \
						COPY(row + lo * in_c, xi + (iy * in_w + ix0 + lo) * in_c, (hi - lo) * in_c);   \
						ZERO(row + hi * in_c, (k - hi) * in_c);                                         \
					}                                                                                   \
				}                                                                                       \
			}                                                                                           \
		}                                                                                               \
	}

#define COPY_LOOP(d, s, n) memcpy((d), (s), (size_t)(n) * sizeof(float))
#define ZERO_LOOP(d, n) memset((d), 0, (size_t)(n) * sizeof(float))
#define COPY_RUN_LOOP(d, s) COPY_LOOP(d, s, run)
IM2COL(im2col_loop, , COPY_RUN_LOOP, COPY_LOOP, ZERO_LOOP)

// col2im is the adjoint, lower with scatter true: every element of col
// added into the element of x it was copied from, in lower's order (the
// windows overlap), so each sum is the Go one's bits; padding drops out.
#define ADD_LOOP(r, s, n)                  \
	do {                                   \
		for (long j = 0; j < (n); j++) {   \
			(s)[j] += (r)[j];              \
		}                                  \
	} while (0)
#define ADD_RUN_LOOP(r, s) ADD_LOOP(r, s, run)
#define NOTHING(r, n)
IM2COL(col2im_loop, , ADD_RUN_LOOP, ADD_LOOP, NOTHING)

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#include <immintrin.h>

// Whole vectors, then the rest under a mask: masked-out lanes are neither
// read nor written, so nothing past the run is touched.
__attribute__((target("avx512f"))) static inline void copy_avx512(float *d, const float *s, long n) {
	long j = 0;
	for (; j + 16 <= n; j += 16) {
		_mm512_storeu_ps(d + j, _mm512_loadu_ps(s + j));
	}
	if (j < n) {
		const __mmask16 m = (__mmask16)((1u << (n - j)) - 1);
		_mm512_mask_storeu_ps(d + j, m, _mm512_maskz_loadu_ps(m, s + j));
	}
}

__attribute__((target("avx512f"))) static inline void zero_avx512(float *d, long n) {
	long j = 0;
	for (; j + 16 <= n; j += 16) {
		_mm512_storeu_ps(d + j, _mm512_setzero_ps());
	}
	if (j < n) {
		_mm512_mask_storeu_ps(d + j, (__mmask16)((1u << (n - j)) - 1), _mm512_setzero_ps());
	}
}

// AVX2's masked store is microcoded on AMD's cores (slower there than
// memcpy), so AVX2's tails are a 4-lane move and then single values.
__attribute__((target("avx2"))) static inline void copy_avx2(float *d, const float *s, long n) {
	long j = 0;
	for (; j + 8 <= n; j += 8) {
		_mm256_storeu_ps(d + j, _mm256_loadu_ps(s + j));
	}
	if (j + 4 <= n) {
		_mm_storeu_ps(d + j, _mm_loadu_ps(s + j));
		j += 4;
	}
	for (; j < n; j++) {
		d[j] = s[j];
	}
}

__attribute__((target("avx2"))) static inline void zero_avx2(float *d, long n) {
	long j = 0;
	for (; j + 8 <= n; j += 8) {
		_mm256_storeu_ps(d + j, _mm256_setzero_ps());
	}
	if (j + 4 <= n) {
		_mm_storeu_ps(d + j, _mm_setzero_ps());
		j += 4;
	}
	for (; j < n; j++) {
		d[j] = 0.0f;
	}
}

// A whole run: its whole vectors, then its tail under the mask SETUP made.
#define SETUP_AVX512                    \
	const long whole16 = run & ~15L; \
	const __mmask16 tail16 = (__mmask16)((1u << (run & 15)) - 1);
#define COPY_RUN_AVX512(d, s)                                                       \
	do {                                                                            \
		long j = 0;                                                                 \
		for (; j < whole16; j += 16) {                                              \
			_mm512_storeu_ps((d) + j, _mm512_loadu_ps((s) + j));                    \
		}                                                                           \
		if (tail16) {                                                               \
			_mm512_mask_storeu_ps((d) + j, tail16, _mm512_maskz_loadu_ps(tail16, (s) + j)); \
		}                                                                           \
	} while (0)
// A whole run on AVX2 is copy_avx2 (the run is short: its branches are
// predicted).
#define SETUP_AVX2
#define COPY_RUN_AVX2(d, s) copy_avx2((d), (s), run)

// Loop distribution off: GCC would make the whole vectors' copy loops
// calls to memcpy, slower than the loop for a run of a vector or two.
__attribute__((target("avx512f"), optimize("no-tree-loop-distribute-patterns")))
IM2COL(im2col_avx512, SETUP_AVX512, COPY_RUN_AVX512, copy_avx512, zero_avx512)
__attribute__((target("avx2"), optimize("no-tree-loop-distribute-patterns")))
IM2COL(im2col_avx2, SETUP_AVX2, COPY_RUN_AVX2, copy_avx2, zero_avx2)

// x += r over n values: whole vectors, then the tail (masked on AVX-512;
// on AVX2 a 4-lane add and then single values, as copy_avx2).
__attribute__((target("avx512f"))) static inline void add_avx512(const float *r, float *x, long n) {
	long j = 0;
	for (; j + 16 <= n; j += 16) {
		_mm512_storeu_ps(x + j, _mm512_add_ps(_mm512_loadu_ps(x + j), _mm512_loadu_ps(r + j)));
	}
	if (j < n) {
		const __mmask16 m = (__mmask16)((1u << (n - j)) - 1);
		_mm512_mask_storeu_ps(x + j, m, _mm512_add_ps(_mm512_maskz_loadu_ps(m, x + j), _mm512_maskz_loadu_ps(m, r + j)));
	}
}

__attribute__((target("avx2"))) static inline void add_avx2(const float *r, float *x, long n) {
	long j = 0;
	for (; j + 8 <= n; j += 8) {
		_mm256_storeu_ps(x + j, _mm256_add_ps(_mm256_loadu_ps(x + j), _mm256_loadu_ps(r + j)));
	}
	if (j + 4 <= n) {
		_mm_storeu_ps(x + j, _mm_add_ps(_mm_loadu_ps(x + j), _mm_loadu_ps(r + j)));
		j += 4;
	}
	for (; j < n; j++) {
		x[j] += r[j];
	}
}

#define ADD_RUN_AVX512(r, s) add_avx512((r), (s), run)
#define ADD_RUN_AVX2(r, s) add_avx2((r), (s), run)
__attribute__((target("avx512f"), optimize("no-tree-loop-distribute-patterns")))
IM2COL(col2im_avx512, , ADD_RUN_AVX512, add_avx512, NOTHING)
__attribute__((target("avx2"), optimize("no-tree-loop-distribute-patterns")))
IM2COL(col2im_avx2, , ADD_RUN_AVX2, add_avx2, NOTHING)
#endif

// distrl_lower is lower through the path of the given lanes (16:
// AVX-512, 8: AVX2, which the CPU must run: distrl_simd_runs; anything
// else: memcpy, memset and plain loops): im2col, col from x, or with
// scatter col2im, col added into x.
typedef void lower_fn(float *x, float *col, long n, long in_h, long in_w, long in_c, long out_h, long out_w, long k,
                      long stride, long pad);

void distrl_lower(int lanes, int scatter, float *x, float *col, long n, long in_h, long in_w, long in_c, long out_h,
                  long out_w, long k, long stride, long pad) {
	lower_fn *f = scatter ? col2im_loop : im2col_loop;
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
	if (lanes == 16) {
		f = scatter ? col2im_avx512 : im2col_avx512;
	} else if (lanes == 8) {
		f = scatter ? col2im_avx2 : im2col_avx2;
	}
#endif
	f(x, col, n, in_h, in_w, in_c, out_h, out_w, k, stride, pad);
}

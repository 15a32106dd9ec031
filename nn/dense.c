//go:build !noopenblas

#include <stddef.h>
#include <string.h>

void distrl_tanh_on(float *y, size_t n, int lanes);
void distrl_relu(int lanes, float *y, size_t n);

// A dense layer of a small batch, y = act(x·W + b), in one call: what an
// actor's policy runs for every step of its ring (CartPole's batch of 8
// through 4-64-64), where one OpenBLAS GEMM per layer, a bias fill and an
// activation, each its own cgo call, cost more than the arithmetic
// (OpenBLAS packs both operands for every product, and a call's fixed
// costs are a few hundred nanoseconds). Here the weights are read where
// they lie, R rows of x at a time against NV vectors of W's columns held
// in registers, and the bias and the activation follow in the same call.
// It is faster at any batch, too, for weights that fit the L1 cache (a
// convolution's, a row a pixel), where OpenBLAS's packing buys nothing.
//
// Each output is the multiply-adds of its row of x and column of W in k's
// order, fused, from zero, and then its bias: every path the same bits, and
// the GEMMs' results to float32 rounding (OpenBLAS's and gonum's each sum
// in an order of their own; dense_test.go).

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#include <immintrin.h>

// DENSE_PATH(W, LANES, NV, TARGET, MASK_T, MASK_OF, LOADM, STOREM) defines
// dense_W: x ([rows, in]) times w ([in, out]) plus b into y ([rows, out]),
// through vectors of W bits, NV of them across a block of columns, 4 rows
// a block and one at a time for the rest (4·NV vectors a block for those,
// as far as the columns go). The last block of columns is masked (LOADM,
// STOREM), the others are not; the layer's own register blocks are
// compiled once per shape of row block and of column block (dense_block is
// inlined with constants).
#define DENSE_PATH(W, LANES, NV, TARGET, MASK_T, MASK_OF, LOADM, STOREM)                                       \
	TARGET static inline __attribute__((always_inline)) void dense_block_##W(                                  \
	    const float *restrict x, const float *restrict w, const float *restrict b, float *restrict y,            \
	    size_t in, size_t out, size_t j, const int R, const int nv, const int masked, const MASK_T *mask) {                     \
		__m##W acc[4 * NV];                                                                                     \
		_Pragma("GCC unroll 4") for (int r = 0; r < R; r++) {                                                   \
			_Pragma("GCC unroll 16") for (int v = 0; v < nv; v++) acc[r * nv + v] = _mm##W##_setzero_ps();        \
		}                                                                                                       \
		for (size_t k = 0; k < in; k++) {                                                                       \
			const float *wk = w + k * out + j;                                                                  \
			__m##W wv[4 * NV];                                                                                  \
			_Pragma("GCC unroll 16") for (int v = 0; v < nv; v++) {                                              \
				wv[v] = masked ? LOADM(wk + v * LANES, mask[v]) : _mm##W##_loadu_ps(wk + v * LANES);             \
			}                                                                                                   \
			_Pragma("GCC unroll 4") for (int r = 0; r < R; r++) {                                               \
				__m##W xv = _mm##W##_set1_ps(x[r * in + k]);                                                   \
				_Pragma("GCC unroll 16") for (int v = 0; v < nv; v++) {                                          \
					acc[r * nv + v] = _mm##W##_fmadd_ps(xv, wv[v], acc[r * nv + v]);                            \
				}                                                                                               \
			}                                                                                                   \
		}                                                                                                       \
		_Pragma("GCC unroll 16") for (int v = 0; v < nv; v++) {                                                  \
			__m##W bv = masked ? LOADM(b + j + v * LANES, mask[v]) : _mm##W##_loadu_ps(b + j + v * LANES);      \
			_Pragma("GCC unroll 4") for (int r = 0; r < R; r++) {                                               \
				float *yr = y + r * out + j + v * LANES;                                                        \
				__m##W sum = _mm##W##_add_ps(acc[r * nv + v], bv);                                              \
				if (masked) {                                                                                   \
					STOREM(yr, mask[v], sum);                                                                   \
				} else {                                                                                        \
					_mm##W##_storeu_ps(yr, sum);                                                                \
				}                                                                                               \
			}                                                                                                   \
		}                                                                                                       \
	}                                                                                                           \
	TARGET static inline __attribute__((always_inline)) void dense_rows_##W(const float *restrict x, const float *restrict w, const float *restrict b, \
	                                 float *restrict y, size_t in, size_t out, const int R) {                    \
		const size_t block = NV * LANES;                                                                        \
		size_t j = 0;                                                                                           \
		/* A single row has one chain of multiply-adds per vector: four */                                     \
		/* times the vectors keep as many in flight as 4 rows do. */                                            \
		if (R == 1) {                                                                                           \
			for (; j + 4 * block <= out; j += 4 * block) {                                                      \
				dense_block_##W(x, w, b, y, in, out, j, 1, 4 * NV, 0, NULL);                                    \
			}                                                                                                   \
		}                                                                                                       \
		for (; j + block <= out; j += block) {                                                                  \
			dense_block_##W(x, w, b, y, in, out, j, R, NV, 0, NULL);                                            \
		}                                                                                                       \
		if (j == out) {                                                                                         \
			return;                                                                                             \
		}                                                                                                       \
		/* The last block: as many vectors as its columns fill, masked. */                                      \
		MASK_T mask[NV];                                                                                        \
		const int nv = (int)((out - j + LANES - 1) / LANES);                                                    \
		for (int v = 0; v < nv; v++) {                                                                          \
			long left = (long)(out - j) - (long)v * LANES;                                                     \
			mask[v] = MASK_OF(left > LANES ? LANES : left);                                                     \
		}                                                                                                       \
		switch (nv) {                                                                                           \
		case 1:                                                                                                 \
			dense_block_##W(x, w, b, y, in, out, j, R, 1, 1, mask);                                             \
			break;                                                                                              \
		case 2:                                                                                                 \
			dense_block_##W(x, w, b, y, in, out, j, R, 2 < NV ? 2 : NV, 1, mask);                               \
			break;                                                                                              \
		case 3:                                                                                                 \
			dense_block_##W(x, w, b, y, in, out, j, R, 3 < NV ? 3 : NV, 1, mask);                               \
			break;                                                                                              \
		default:                                                                                                \
			dense_block_##W(x, w, b, y, in, out, j, R, NV, 1, mask);                                            \
		}                                                                                                       \
	}                                                                                                           \
	TARGET static void dense_##W(const float *x, const float *w, const float *b, float *y, size_t rows,         \
	                             size_t in, size_t out) {                                                        \
		size_t r = 0;                                                                                           \
		for (; r + 4 <= rows; r += 4) {                                                                         \
			dense_rows_##W(x + r * in, w, b, y + r * out, in, out, 4);                                          \
		}                                                                                                       \
		for (; r < rows; r++) {                                                                                 \
			dense_rows_##W(x + r * in, w, b, y + r * out, in, out, 1);                                          \
		}                                                                                                       \
	}

// AVX-512: masked loads and stores are as cheap as plain ones.
#define MASK16(n) ((__mmask16)((1u << (n)) - 1u))
#define LOAD16(p, m) _mm512_maskz_loadu_ps((m), (p))
#define STORE16(p, m, v) _mm512_mask_storeu_ps((p), (m), (v))
DENSE_PATH(512, 16, 4, __attribute__((target("avx512f"))), __mmask16, MASK16, LOAD16, STORE16)

// AVX2: vmaskmovps is microcoded on AMD's cores, its stores worst, so the
// last block's weights and bias are loaded masked (once a row of W) and its
// sums go out a value at a time.
static inline __attribute__((always_inline, target("avx2,fma"))) __m256i mask8(long n) {
	return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}
static inline __attribute__((always_inline, target("avx2,fma"))) void store8(float *p, __m256i m, __m256 v) {
	float lanes[8];
	_mm256_storeu_ps(lanes, v);
	int on = _mm256_movemask_ps(_mm256_castsi256_ps(m));
	for (int i = 0; i < 8; i++) {
		if (on >> i & 1) {
			p[i] = lanes[i];
		}
	}
}
#define LOAD8(p, m) _mm256_maskload_ps((p), (m))
DENSE_PATH(256, 8, 2, __attribute__((target("avx2,fma"))), __m256i, mask8, LOAD8, store8)

// A head of fewer than 8 columns (a policy's few actions, a value) would
// fill one vector of a row mostly with empty lanes: there each output is
// a dot product instead, of its row of x and its column of W, copied
// contiguous (NARROW_MAX_W floats at most, on the stack). Lane l of the
// accumulator sums the products of k = l, l+8, l+16, ... in that order,
// and the lanes are added in one fixed order, ((0+4)+(2+6))+((1+5)+(3+7)):
// both vector paths run this code, so they give the same bits (other than
// the block path's k order, and the GEMMs', to float32 rounding).
#define NARROW_MAX_W 4096

__attribute__((target("avx2,fma"))) static inline __attribute__((always_inline)) float hsum8(__m256 v) {
	__m128 s4 = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
	__m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
	return _mm_cvtss_f32(_mm_add_ss(s2, _mm_shuffle_ps(s2, s2, 1)));
}

// narrow_block sets column j of R rows of y (R a constant: 4, or 1 for a
// row left over) to the dot products of those rows of x (in values each)
// with wj (the column, in8 values, zero past in), plus bias; the rows
// share each chunk of the column, R chains in flight. The last chunk of
// x is loaded masked (tail), so that nothing past a row is read.
__attribute__((target("avx2,fma"))) static inline __attribute__((always_inline)) void
narrow_block(const float *x, const float *wj, float bias, float *y, size_t in, size_t out, size_t j, __m256i tail,
             const int R) {
	__m256 acc[4];
	_Pragma("GCC unroll 4") for (int i = 0; i < R; i++) acc[i] = _mm256_setzero_ps();
	size_t k = 0;
	for (; k + 8 <= in; k += 8) {
		__m256 wv = _mm256_loadu_ps(wj + k);
		_Pragma("GCC unroll 4") for (int i = 0; i < R; i++) {
			acc[i] = _mm256_fmadd_ps(_mm256_loadu_ps(x + i * in + k), wv, acc[i]);
		}
	}
	if (k < in) {
		__m256 wv = _mm256_loadu_ps(wj + k);
		_Pragma("GCC unroll 4") for (int i = 0; i < R; i++) {
			acc[i] = _mm256_fmadd_ps(_mm256_maskload_ps(x + i * in + k, tail), wv, acc[i]);
		}
	}
	_Pragma("GCC unroll 4") for (int i = 0; i < R; i++) y[i * out + j] = hsum8(acc[i]) + bias;
}

// dense_narrow is x·W + b for out < 8; 0, having done nothing, where the
// block path is faster (BenchmarkDenseLayer: a head of 3 to 7 columns
// below 16 rows, where copying its columns costs more than the lanes it
// saves) or W is larger than NARROW_MAX_W floats. A single column (a
// value head) is W as it lies, copied rather than gathered.
__attribute__((target("avx2,fma"))) static int dense_narrow(const float *x, const float *w, const float *b, float *y,
                                                             size_t rows, size_t in, size_t out) {
	const size_t in8 = (in + 7) & ~(size_t)7;
	if (out == 0 || out >= 8 || (out > 2 && rows < 16) || in8 * out > NARROW_MAX_W) {
		return 0;
	}
	const __m256i tail = mask8((long)(in & 7));
	float wt[NARROW_MAX_W];
	if (out == 1) {
		// Zeros past in: the column's last chunk, masked.
		size_t k = in & ~(size_t)7;
		memcpy(wt, w, k * sizeof(float));
		if (k < in) {
			_mm256_storeu_ps(wt + k, _mm256_maskload_ps(w + k, tail));
		}
	} else {
		for (size_t j = 0; j < out; j++) {
			for (size_t k = 0; k < in8; k++) {
				wt[j * in8 + k] = k < in ? w[k * out + j] : 0.0f;
			}
		}
	}
	size_t r = 0;
	for (; r + 4 <= rows; r += 4) {
		for (size_t j = 0; j < out; j++) {
			narrow_block(x + r * in, wt + j * in8, b[j], y + r * out, in, out, j, tail, 4);
		}
	}
	for (; r < rows; r++) {
		for (size_t j = 0; j < out; j++) {
			narrow_block(x + r * in, wt + j * in8, b[j], y + r * out, in, out, j, tail, 1);
		}
	}
	return 1;
}
#endif

// distrl_dense runs a dense layer of rows rows through the vector path of
// the given lanes (16 or 8; the CPU must run it: distrl_simd_runs) and then
// its activation (act: 0 none, 1 tanh, 2 ReLU, as tanh.c's and
// elementwise.c's loops do it), and returns 1; 0, having done nothing, for
// any other lanes.
int distrl_dense(int lanes, const float *x, const float *w, const float *b, float *y, size_t rows, size_t in,
                 size_t out, int act) {
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
	if (lanes != 16 && lanes != 8) {
		return 0;
	}
	if (!dense_narrow(x, w, b, y, rows, in, out)) {
		if (lanes == 16) {
			dense_512(x, w, b, y, rows, in, out);
		} else {
			dense_256(x, w, b, y, rows, in, out);
		}
	}
	switch (act) {
	case 1:
		distrl_tanh_on(y, rows * out, lanes);
		break;
	case 2:
		distrl_relu(lanes, y, rows * out);
		break;
	}
	return 1;
#else
	return 0;
#endif
}

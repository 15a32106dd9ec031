//go:build !noopenblas

package nn

// #cgo LDFLAGS: -lopenblas
// #cgo CFLAGS: -O3
// #include <stdlib.h>
// #include <cblas.h>
// void openblas_set_num_threads(int);
// char *openblas_get_corename(void);
// int distrl_openblas_recore(void);
// int distrl_openblas_use_core(const char *name);
// int distrl_simd_runs(int lanes);
// void distrl_tanh_on(float *y, size_t n, int lanes);
// void distrl_relu(int lanes, float *y, size_t n);
// void distrl_tanh_grad(int lanes, const float *y, float *dy, size_t n);
// void distrl_relu_grad(int lanes, const float *y, float *dy, size_t n);
// void distrl_sum_rows(int lanes, const float *dy, float *gb, size_t rows, size_t out);
// int distrl_dense(int lanes, const float *x, const float *w, const float *b, float *y, size_t rows, size_t in, size_t out, int act);
// void distrl_lower(int lanes, int scatter, float *x, float *col, long n, long in_h, long in_w, long in_c, long out_h, long out_w, long k, long stride, long pad);
// size_t distrl_adam(float *p, float *m, float *v, const float *g, size_t n, float b1, float b2, float step, float inv_sqrt_c2, float eps, int lanes);
import "C"

import (
	"os"
	"unsafe"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"
)

// nativeKernels are OpenBLAS (Debian's libopenblas-dev, which make deps
// installs), the vectorised tanh of tanh.c, Adam of adam.c and the loops
// of elementwise.c and im2col.c.
var nativeKernels = elementwise{simdLanes}.with(kernels{name: "openblas", blas: openBLAS{}, tanh: tanhSlice, adam: adamSlice})

// OpenBLAS runs one thread per call unless OPENBLAS_NUM_THREADS says
// otherwise: a process of distrl shares the machine with the other workers
// of its node, and OpenBLAS's own default (every core, threads that spin
// while they wait) took the CPU from them.
func init() {
	if os.Getenv("OPENBLAS_NUM_THREADS") == "" {
		C.openblas_set_num_threads(1)
	}
	blasRecored = C.distrl_openblas_recore() == 1
	blasCore = openBLASCoreNow()
}

// openBLASCoreNow names the core whose kernels OpenBLAS runs now.
func openBLASCoreNow() string { return C.GoString(C.openblas_get_corename()) }

// useOpenBLASCore makes OpenBLAS run the kernels of core (an
// OPENBLAS_CORETYPE name) until restore, for benchmarks that hold the
// kernels of two cores against each other in one run; false where the
// library cannot switch or does not have them. No network may be computing
// while either runs.
func useOpenBLASCore(core string) (restore func(), ok bool) {
	name := C.CString(core)
	defer C.free(unsafe.Pointer(name))
	ok = C.distrl_openblas_use_core(name) == 1
	return func() {
		back := C.CString(blasCore)
		defer C.free(unsafe.Pointer(back))
		C.distrl_openblas_use_core(back)
	}, ok
}

// openBLAS is the float32BLAS of cblas, row-major, except for operations
// so small that a cgo call costs more than the arithmetic: those run on
// gonum's kernels (a single row, or fewer than smallOps multiply-adds: on
// the 2-core development machine OpenBLAS took 166 ns for a 1x4x64 GEMM
// that gonum does in 57, and 827 ns for 1x64x64 against 722; from 8x4x64
// on it is faster), unless gonum would split the product over goroutines
// (more rows than serialRows allows), which costs wake-ups and allocations:
// a conv network's 1024-wide features at batch 1 did. Slices of length 0
// are never passed to C: a zero-size operation returns first.
type openBLAS struct{}

// smallOps is the size (multiply-adds) below which gonum's kernels run.
const smallOps = 2048

var small gonum.Implementation

func trans(t blas.Transpose) C.enum_CBLAS_TRANSPOSE {
	if t == blas.NoTrans {
		return C.CblasNoTrans
	}
	return C.CblasTrans
}

func ptr(s []float32) *C.float { return (*C.float)(unsafe.Pointer(unsafe.SliceData(s))) }

func (openBLAS) Sgemm(tA, tB blas.Transpose, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	if m == 0 || n == 0 {
		return
	}
	if (m == 1 || m*n*k < smallOps) && m <= serialRows(n) {
		small.Sgemm(tA, tB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
		return
	}
	C.cblas_sgemm(C.CblasRowMajor, trans(tA), trans(tB), C.blasint(m), C.blasint(n), C.blasint(k),
		C.float(alpha), ptr(a), C.blasint(lda), ptr(b), C.blasint(ldb), C.float(beta), ptr(c), C.blasint(ldc))
}

func (openBLAS) Sgemv(tA blas.Transpose, m, n int, alpha float32, a []float32, lda int, x []float32, incX int, beta float32, y []float32, incY int) {
	if m == 0 || n == 0 {
		return
	}
	if m*n < smallOps {
		small.Sgemv(tA, m, n, alpha, a, lda, x, incX, beta, y, incY)
		return
	}
	C.cblas_sgemv(C.CblasRowMajor, trans(tA), C.blasint(m), C.blasint(n), C.float(alpha), ptr(a), C.blasint(lda),
		ptr(x), C.blasint(incX), C.float(beta), ptr(y), C.blasint(incY))
}

func (openBLAS) Sger(m, n int, alpha float32, x []float32, incX int, y []float32, incY int, a []float32, lda int) {
	if m == 0 || n == 0 {
		return
	}
	if m*n < smallOps {
		small.Sger(m, n, alpha, x, incX, y, incY, a, lda)
		return
	}
	C.cblas_sger(C.CblasRowMajor, C.blasint(m), C.blasint(n), C.float(alpha), ptr(x), C.blasint(incX),
		ptr(y), C.blasint(incY), ptr(a), C.blasint(lda))
}

func (openBLAS) Sscal(n int, alpha float32, x []float32, incX int) {
	if n == 0 {
		return
	}
	if n < smallOps {
		small.Sscal(n, alpha, x, incX)
		return
	}
	C.cblas_sscal(C.blasint(n), C.float(alpha), ptr(x), C.blasint(incX))
}

// simdPaths are the widths, in lanes, of the vector paths of tanh.c,
// adam.c, elementwise.c and im2col.c: AVX-512's and AVX2's (1: none, the
// baseline: a value at a time, or what GCC vectorises with SSE2).
var simdPaths = []int{16, 8}

// simdRuns says whether this CPU runs the vector path of the given lanes.
func simdRuns(lanes int) bool { return C.distrl_simd_runs(C.int(lanes)) == 1 }

// simdLanes is the widest path this CPU runs, the one the kernels take.
var simdLanes = func() int {
	for _, lanes := range simdPaths {
		if simdRuns(lanes) {
			return lanes
		}
	}
	return 1
}()

// elementwise runs the loops of elementwise.c and im2col.c through the path of lanes
// (16, 8 or 1; the CPU must run it: simdRuns), each bit for bit its Go
// original's, which takes slices shorter than vecCallMin (the cgo call
// would cost more than it saves) and sums of fewer than 8 columns (no
// vector lanes to fill: a value head's bias).
type elementwise struct{ lanes int }

func (e elementwise) relu(y []float32) {
	if len(y) < vecCallMin {
		reluGo(y)
		return
	}
	C.distrl_relu(C.int(e.lanes), ptr(y), C.size_t(len(y)))
}

func (e elementwise) tanhGrad(y, dy []float32) {
	if len(y) < vecCallMin {
		tanhGradGo(y, dy)
		return
	}
	dy = dy[:len(y)]
	C.distrl_tanh_grad(C.int(e.lanes), ptr(y), ptr(dy), C.size_t(len(y)))
}

func (e elementwise) reluGrad(y, dy []float32) {
	if len(y) < vecCallMin {
		reluGradGo(y, dy)
		return
	}
	dy = dy[:len(y)]
	C.distrl_relu_grad(C.int(e.lanes), ptr(y), ptr(dy), C.size_t(len(y)))
}

func (e elementwise) sumRows(dy, gb []float32, rows, out int) {
	if out < 8 || rows*out < vecCallMin {
		sumRowsGo(dy, gb, rows, out)
		return
	}
	dy, gb = dy[:rows*out], gb[:out]
	C.distrl_sum_rows(C.int(e.lanes), ptr(dy), ptr(gb), C.size_t(rows), C.size_t(out))
}

// dense runs the layer y = act(x·W + b) of batch rows in dense.c, in one
// call, where that is faster than a GEMM (denseFaster) and the CPU has a
// vector path, and says whether it did; denseLayer runs the others by a
// GEMM.
func (e elementwise) dense(x, w, b, y []float32, batch, in, out int, act Activation) bool {
	return e.lanes > 1 && denseFaster(batch, in, out) && e.denseOn(x, w, b, y, batch, in, out, act)
}

// denseOn is dense whatever the shape, through the path of e's lanes (false:
// the CPU has none, or e.lanes is 1).
func (e elementwise) denseOn(x, w, b, y []float32, batch, in, out int, act Activation) bool {
	if batch == 0 || in == 0 || out == 0 {
		return false
	}
	x, w, b, y = x[:batch*in], w[:in*out], b[:out], y[:batch*out]
	return C.distrl_dense(C.int(e.lanes), ptr(x), ptr(w), ptr(b), ptr(y), C.size_t(batch), C.size_t(in), C.size_t(out), C.int(actCode(act))) == 1
}

// actCode is dense.c's number for an activation (0: none).
func actCode(act Activation) int {
	switch act {
	case Tanh:
		return 1
	case ReLU:
		return 2
	}
	return 0
}

// im2col and col2im are im2col.c's lower, for every size: one call lowers
// a whole chunk.
func (e elementwise) im2col(g convGeom, x []float32, n int, col []float32) {
	e.lower(g, x, n, col, false)
}
func (e elementwise) col2im(g convGeom, x []float32, n int, col []float32) {
	e.lower(g, x, n, col, true)
}

func (e elementwise) lower(g convGeom, x []float32, n int, col []float32, scatter bool) {
	if n == 0 {
		return
	}
	x, col = x[:n*g.inSize()], col[:n*g.pixels()*g.cols()]
	C.distrl_lower(C.int(e.lanes), C.int(boolInt(scatter)), ptr(x), ptr(col), C.long(n), C.long(g.inH), C.long(g.inW),
		C.long(g.inC), C.long(g.outH), C.long(g.outW), C.long(g.k), C.long(g.stride), C.long(g.pad))
}

// boolInt is 1 for true, 0 for false.
func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// tanhSlice sets each element of y to its tanh32.
func tanhSlice(y []float32) {
	if len(y) < vecCallMin {
		tanhGo(y)
		return
	}
	tanhOn(y, simdLanes)
}

// tanhOn is tanhSlice through the path of the given lanes (1: the C loop a
// value at a time), which the CPU must run (simdRuns): the tests and
// benchmarks hold the paths against each other.
func tanhOn(y []float32, lanes int) {
	if len(y) > 0 {
		C.distrl_tanh_on(ptr(y), C.size_t(len(y)), C.int(lanes))
	}
}

// adamSlice is adamGo, through the widest vector path of adam.c the CPU
// runs, bit for bit the same.
func adamSlice(params, m, v, grad []float32, s adamStep) {
	adamOn(params, m, v, grad, s, simdLanes)
}

// adamOn is adamSlice through the path of the given lanes, which the CPU
// must run (simdRuns; 1: adamGo alone).
func adamOn(params, m, v, grad []float32, s adamStep, lanes int) {
	done := 0
	if len(params) >= vecAdamMin {
		m, v, grad = m[:len(params)], v[:len(params)], grad[:len(params)]
		done = int(C.distrl_adam(ptr(params), ptr(m), ptr(v), ptr(grad), C.size_t(len(params)),
			C.float(s.b1), C.float(s.b2), C.float(s.stepSize), C.float(s.invSqrtC2), C.float(s.eps), C.int(lanes)))
	}
	adamGo(params[done:], m[done:], v[done:], grad[done:], s)
}

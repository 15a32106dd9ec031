package nn

import (
	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"
)

// float32BLAS is the part of BLAS the network's passes use. The default is
// OpenBLAS through cgo (blas_openblas.go), several times faster than
// gonum's pure-Go kernels at the small shapes of RL networks; the build tag
// noopenblas keeps gonum's (blas_gonum.go) for a machine without the
// library. Both compute each element by a sum in its own order, so results
// agree to float32 rounding, not bit for bit. The same tag chooses how a
// tanh layer is activated: a loop in C that the compiler vectorises
// (tanh.c) or tanh32 in Go, the same approximation either way.
type float32BLAS interface {
	Sgemm(tA, tB blas.Transpose, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int)
	Sgemv(tA blas.Transpose, m, n int, alpha float32, a []float32, lda int, x []float32, incX int, beta float32, y []float32, incY int)
	Sger(m, n int, alpha float32, x []float32, incX int, y []float32, incY int, a []float32, lda int)
	Sscal(n int, alpha float32, x []float32, incX int)
}

// kernels are the numerics networks run on: a BLAS, whether it fans a large
// product out over goroutines itself, and tanh over a slice.
type kernels struct {
	name string
	blas float32BLAS
	// fansOut: gonum runs a large Sgemm on several goroutines; matMul then
	// hands it row slices that stay on the calling one (serialRows).
	// OpenBLAS keeps to its thread count and takes the batch whole.
	fansOut bool
	tanh    func(y []float32)
	adam    func(params, m, v, grad []float32, s adamStep)
	// The elementwise loops of the passes (forward.go, backward.go).
	relu     func(y []float32)
	tanhGrad func(y, dy []float32)
	reluGrad func(y, dy []float32)
	sumRows  func(dy, gb []float32, rows, out int)
	im2col   func(g convGeom, x []float32, n int, col []float32)
	col2im   func(g convGeom, x []float32, n int, col []float32)
	// dense runs a whole dense layer (bias, product, activation) in one
	// call where that is faster than a GEMM, and says whether it did; nil:
	// never.
	dense func(x, w, b, y []float32, batch, in, out int, act Activation) bool
}

// goKernels are gonum's pure-Go BLAS, called directly rather than through
// blas32's package-level implementation so that another package calling
// blas32.Use cannot change the numerics of this one, and tanh32 in Go.
var goKernels = kernels{name: "gonum", blas: gonum.Implementation{}, fansOut: true, tanh: tanhGo, adam: adamGo,
	relu: reluGo, tanhGrad: tanhGradGo, reluGrad: reluGradGo, sumRows: sumRowsGo, im2col: im2colGo, col2im: col2imGo}

// with is k with its elementwise loops, im2col, col2im and dense layers
// those of e.
func (e elementwise) with(k kernels) kernels {
	k.relu, k.tanhGrad, k.reluGrad, k.sumRows, k.im2col, k.col2im = e.relu, e.tanhGrad, e.reluGrad, e.sumRows, e.im2col, e.col2im
	k.dense = e.dense
	return k
}

// denseFaster says whether a dense layer of this shape runs faster in one
// call of dense.c than as a bias fill, a GEMM and an activation
// (BenchmarkDenseLayer, on AVX2): at any batch while the weights stay in
// the L1 cache (a 64x64 layer 1.2-5x, a MinAtar convolution's 36x16
// 1.6-2.2x), and up to 8 rows beyond (a 512x512 layer 1.25-4.3x; from 32
// rows OpenBLAS's blocking for the caches wins). A head of fewer than 8
// columns (dense.c's dot products, from 16 rows or for 1 or 2 columns)
// from 2 rows at any batch (CartPole's 64x2 and 64x1 1.3-3.6x, MinAtar's
// 128x6 1.7-3x), and at one row from 3 columns (128x6 4x): gonum's dot
// products in Go, without a cgo call, are faster for one row of 1 or 2.
func denseFaster(batch, in, out int) bool {
	switch {
	case out < 8:
		return batch > 1 || out > 2
	case in*out <= 8192:
		return true
	}
	return batch <= 8
}

// vecCallMin is the length from which tanhSlice and elementwise call
// their vectorised C (tanh.c, elementwise.c): below it the cgo call costs
// more than it saves.
const vecCallMin = 64

// active are the kernels in use: nativeKernels (blas_openblas.go), or
// goKernels in a build with the tag noopenblas. The benchmarks swap it to
// hold both against each other in one run.
var active = nativeKernels

// BLAS names the BLAS implementation this build's networks run on:
// "openblas" or "gonum" (built with the tag noopenblas).
func BLAS() string { return active.name }

// BLASCore names the OpenBLAS kernels this process runs ("SkylakeX",
// "Haswell", ...; "" for gonum's) and whether distrl chose them by the CPU's
// features because OpenBLAS did not know the CPU and fell back to its
// Prescott (SSE3) kernels (openblas_core.c; OPENBLAS_CORETYPE overrides).
func BLASCore() (name string, chosenByFeatures bool) {
	if active.name != "openblas" {
		return "", false
	}
	return blasCore, blasRecored
}

// blasCore and blasRecored are BLASCore's answer, set by blas_openblas.go's
// init.
var (
	blasCore    string
	blasRecored bool
)

func tanhGo(y []float32) {
	for i, v := range y {
		y[i] = tanh32(v)
	}
}

// UseGonum makes the networks run on gonum's kernels (on) or on this
// build's own (off) and returns what restores the previous ones: for
// tests and benchmarks that hold two float32 numerics against each other
// in one run (a GPU's gradient against the CPU's, with the CPU's own
// disagreement across BLAS libraries as the yardstick). No network may be
// computing while it runs.
func UseGonum(on bool) (restore func()) {
	prev := active
	if on {
		active = goKernels
	} else {
		active = nativeKernels
	}
	return func() { active = prev }
}

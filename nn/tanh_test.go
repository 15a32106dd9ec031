package nn

import (
	"math"
	"testing"
)

// tanhFuncs are the two ways a forward pass computes tanh: tanh32 one value
// at a time, and the native kernels' over a slice (vectorised C in the
// default build), here over slices long enough to take the vector path.
var tanhFuncs = []struct {
	name string
	f    func(x float32) float32
}{
	{"tanh32", tanh32},
	{"native", func(x float32) float32 { return nativeTanhAt(x, -1) }},
	{"native-lanes", func(x float32) float32 { return nativeTanhAt(x, 5) }},
}

// nativeTanhAt is the native tanh of x in a slice of x's long enough to
// take the vector path, read at element i (-1: the last, in the loop's
// remainder, if any; a small i: in the vector lanes).
func nativeTanhAt(x float32, i int) float32 {
	y := make([]float32, 2*vecTanhLen+3)
	for i := range y {
		y[i] = x
	}
	nativeKernels.tanh(y)
	if i < 0 {
		i = len(y) - 1
	}
	return y[i]
}

// vecTanhLen is a slice length that takes the vector path.
const vecTanhLen = 256

// TestTanh32 sweeps both tanh paths over a dense grid against math.Tanh
// and checks the bound |tanh| <= 1 that the backward pass's 1 - y² relies
// on.
func TestTanh32(t *testing.T) {
	const lo, hi, step = -1_000_000, 1_000_000, 1e-5
	for _, fn := range tanhFuncs {
		t.Run(fn.name, func(t *testing.T) {
			// The grid goes through the native tanh in slices, as activate does.
			xs := make([]float32, 0, hi-lo+1)
			for i := lo; i <= hi; i++ {
				xs = append(xs, float32(i)*step)
			}
			ys := make([]float32, len(xs))
			if fn.name != "tanh32" {
				copy(ys, xs)
				for s := 0; s < len(ys); s += vecTanhLen + 1 { // odd lengths: remainders too
					nativeKernels.tanh(ys[s:min(s+vecTanhLen+1, len(ys))])
				}
			} else {
				for i, x := range xs {
					ys[i] = fn.f(x)
				}
			}
			var worst float64
			for i, x := range xs {
				got := ys[i]
				if got > 1 || got < -1 {
					t.Fatalf("tanh(%v) = %v, outside [-1, 1]", x, got)
				}
				worst = max(worst, math.Abs(float64(got)-math.Tanh(float64(x))))
			}
			if worst > 5e-7 {
				t.Errorf("max |tanh - math.Tanh| = %g, want <= 5e-7", worst)
			}
			for _, c := range []struct{ x, want float32 }{
				{100, 1}, {-100, -1}, {float32(math.Inf(1)), 1}, {float32(math.Inf(-1)), -1}, {0, 0},
			} {
				if got := fn.f(c.x); got != c.want {
					t.Errorf("tanh(%v) = %v, want %v", c.x, got, c.want)
				}
			}
			if got := fn.f(float32(math.NaN())); !math.IsNaN(float64(got)) {
				t.Errorf("tanh(NaN) = %v, want NaN", got)
			}
		})
	}
}

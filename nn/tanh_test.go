package nn

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// tanhSlices are the ways a forward pass computes tanh over a slice:
// tanh32 one value at a time; the native kernels' (vectorised C in the
// default build, through the widest path the CPU runs); and each path of
// tanh.c the CPU runs, so that a machine with AVX-512 tests AVX2's too.
func tanhSlices() []struct {
	name string
	f    func([]float32)
} {
	cases := []struct {
		name string
		f    func([]float32)
	}{{"tanh32", tanhGo}, {"native", nativeKernels.tanh}}
	for _, lanes := range lanesRun() {
		cases = append(cases, struct {
			name string
			f    func([]float32)
		}{fmt.Sprint("lanes=", lanes), func(y []float32) { tanhOn(y, lanes) }})
	}
	return cases
}

// tanhAt is f's tanh of x in a slice of x's long enough to take the
// vector path, read at element i (-1: the last, in the loop's remainder,
// if any; a small i: in the vector lanes).
func tanhAt(f func([]float32), x float32, i int) float32 {
	y := make([]float32, 2*vecTanhLen+3)
	for i := range y {
		y[i] = x
	}
	f(y)
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
	for _, fn := range tanhSlices() {
		t.Run(fn.name, func(t *testing.T) {
			// The grid goes through the path in slices, as activate does;
			// odd lengths, so that the remainders are swept too.
			ys := make([]float32, 0, hi-lo+1)
			for i := lo; i <= hi; i++ {
				ys = append(ys, float32(i)*step)
			}
			xs := slices.Clone(ys)
			for s := 0; s < len(ys); s += vecTanhLen + 1 {
				fn.f(ys[s:min(s+vecTanhLen+1, len(ys))])
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
			for _, at := range []int{5, -1} { // in the lanes, in the remainder
				for _, c := range []struct{ x, want float32 }{
					{100, 1}, {-100, -1}, {float32(math.Inf(1)), 1}, {float32(math.Inf(-1)), -1}, {0, 0},
				} {
					if got := tanhAt(fn.f, c.x, at); got != c.want {
						t.Errorf("tanh(%v) at %d = %v, want %v", c.x, at, got, c.want)
					}
				}
				if got := tanhAt(fn.f, float32(math.NaN()), at); !math.IsNaN(float64(got)) {
					t.Errorf("tanh(NaN) at %d = %v, want NaN", at, got)
				}
			}
		})
	}
}

// TestTanhAVX2MatchesLoop holds tanh.c's AVX2 path to its promise: every
// lane bit for bit what the loop gives the same value (the loop's clone
// for a CPU with FMA), so that a slice's vector part and its remainder
// agree, whatever its length.
func TestTanhAVX2MatchesLoop(t *testing.T) {
	if !simdRuns(8) {
		t.Skip("this CPU has no AVX2 with FMA (or this build no tanh.c)")
	}
	rng := rand.New(rand.NewPCG(3, 4))
	xs := normals(rng, 1<<16)
	for i := range xs[:1<<12] {
		xs[i] *= 8 // around and past the clamp
	}
	vec, loop := slices.Clone(xs), slices.Clone(xs)
	tanhOn(vec, 8)
	tanhOn(loop, 1)
	for i := range xs {
		if math.Float32bits(vec[i]) != math.Float32bits(loop[i]) {
			t.Fatalf("tanh(%v): AVX2 %v, loop %v", xs[i], vec[i], loop[i])
		}
	}
}

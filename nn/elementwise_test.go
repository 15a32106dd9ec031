package nn

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// elementwisePaths are the native kernels' elementwise loops and, in a
// build with C, elementwise.c's through each path the CPU runs, so that a
// machine with AVX-512 tests AVX2's and the baseline's too.
func elementwisePaths() map[string]kernels {
	paths := map[string]kernels{"native": nativeKernels}
	for _, lanes := range lanesRun() {
		paths[fmt.Sprint("lanes=", lanes)] = elementwise{lanes}.with(kernels{})
	}
	return paths
}

// lanesRun are the paths of the C loops this CPU runs, in lanes: the
// vector ones of simdPaths it has and the baseline, 1 (none in a build
// without C).
func lanesRun() []int {
	var out []int
	for _, lanes := range append(slices.Clone(simdPaths), 1) {
		if simdRuns(lanes) {
			out = append(out, lanes)
		}
	}
	return out
}

// specials are the values that a loop written carelessly gets wrong: a NaN,
// both zeros, both infinities, a subnormal, and values either side of 0.
var specials = []float32{float32(math.NaN()), 0, float32(math.Copysign(0, -1)), float32(math.Inf(1)), float32(math.Inf(-1)),
	math.SmallestNonzeroFloat32, -math.SmallestNonzeroFloat32, 1, -1, 0.5, -0.5}

// elementwiseValues is n normal values with the specials spread among
// them, so that they land in the vector lanes and in the remainder.
func elementwiseValues(rng *rand.Rand, n int) []float32 {
	s := normals(rng, n)
	for i := range s {
		if rng.IntN(5) == 0 {
			s[i] = specials[rng.IntN(len(specials))]
		}
	}
	return s
}

// sameBits reports the first index where got and want differ in their
// bits, or -1. A NaN is any NaN: which one a sum of two gives depends on
// the order of the operands in the instruction, not on the arithmetic.
func sameBits(got, want []float32) int {
	for i := range want {
		nan := got[i] != got[i] && want[i] != want[i]
		if !nan && math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			return i
		}
	}
	return -1
}

// TestElementwiseMatchesGo: every path of ReLU, its gradient, tanh's
// gradient and the bias gradient's row sums gives the Go loops' bits, at
// lengths below, at and past the vector threshold, with NaNs, zeros of
// both signs and infinities among the values.
func TestElementwiseMatchesGo(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for name, k := range elementwisePaths() {
		t.Run(name, func(t *testing.T) {
			for _, n := range []int{1, 7, vecCallMin - 1, vecCallMin, vecCallMin + 1, 1000, 4099} {
				x := elementwiseValues(rng, n)
				want, got := slices.Clone(x), slices.Clone(x)
				reluGo(want)
				k.relu(got)
				if i := sameBits(got, want); i >= 0 {
					t.Errorf("relu of %d values: [%d] = %v (bits %#x), want %v (%#x) for %v", n, i, got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]), x[i])
				}
				// The gradients take y as the activations give it: tanh's
				// in [-1, 1] and ReLU's never negative, and any dy.
				y := slices.Clone(want)
				for i, v := range normals(rng, n) {
					if i%3 != 0 {
						y[i] = float32(math.Tanh(float64(v)))
					}
				}
				dy := elementwiseValues(rng, n)
				want, got = slices.Clone(dy), slices.Clone(dy)
				tanhGradGo(y, want)
				k.tanhGrad(y, got)
				if i := sameBits(got, want); i >= 0 {
					t.Errorf("tanh's gradient of %d values: [%d] = %v, want %v (y %v, dy %v)", n, i, got[i], want[i], y[i], dy[i])
				}
				relu := slices.Clone(x)
				reluGo(relu)
				want, got = slices.Clone(dy), slices.Clone(dy)
				reluGradGo(relu, want)
				k.reluGrad(relu, got)
				if i := sameBits(got, want); i >= 0 {
					t.Errorf("ReLU's gradient of %d values: [%d] = %v, want %v (y %v, dy %v)", n, i, got[i], want[i], relu[i], dy[i])
				}
			}
			for _, out := range []int{1, 7, 8, 9, 16, 64, 100} {
				for _, rows := range []int{1, 9, 512} {
					dy := elementwiseValues(rng, rows*out+5)[:rows*out]
					gb := normals(rng, out)
					want, got := slices.Clone(gb), slices.Clone(gb)
					sumRowsGo(dy, want, rows, out)
					k.sumRows(dy, got, rows, out)
					if i := sameBits(got, want); i >= 0 {
						t.Errorf("sums of %d rows of %d: [%d] = %v, want %v", rows, out, i, got[i], want[i])
					}
				}
			}
		})
	}
}

// TestIm2colMatchesGo: every path of im2col.c lowers images to lower's
// matrix, bit for bit, over every element (col starts as NaNs), and adds a
// matrix back into images as lower's scatter does, for
// MinAtar's geometry and ones with padding, strides, windows wider than
// the image and a single channel.
func TestIm2colMatchesGo(t *testing.T) {
	geoms := []struct{ h, w, c, k, stride, pad int }{
		{10, 10, 4, 3, 1, 0}, // MinAtar's
		{7, 5, 3, 3, 2, 1},
		{4, 4, 2, 5, 1, 2},
		{9, 6, 1, 2, 3, 0},
		{6, 6, 16, 3, 1, 1},
		{5, 5, 3, 1, 2, 0},
	}
	rng := rand.New(rand.NewPCG(5, 6))
	for name, k := range elementwisePaths() {
		for _, gc := range geoms {
			g := convGeom{inH: gc.h, inW: gc.w, inC: gc.c, k: gc.k, stride: gc.stride, pad: gc.pad,
				outH: (gc.h+2*gc.pad-gc.k)/gc.stride + 1, outW: (gc.w+2*gc.pad-gc.k)/gc.stride + 1}
			t.Run(fmt.Sprintf("%s/%dx%dx%d,k=%d,stride=%d,pad=%d", name, gc.h, gc.w, gc.c, gc.k, gc.stride, gc.pad), func(t *testing.T) {
				for _, n := range []int{1, 3} {
					x := elementwiseValues(rng, n*g.inSize())
					want := make([]float32, n*g.pixels()*g.cols())
					got := make([]float32, len(want))
					for i := range got {
						want[i], got[i] = float32(math.NaN()), float32(math.NaN())
					}
					g.lower(x, n, want, false)
					k.im2col(g, x, n, got)
					for i := range want {
						if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
							t.Fatalf("%d images: col[%d] = %v, want %v", n, i, got[i], want[i])
						}
					}
					// The adjoint: a random col added into random images.
					col := normals(rng, len(want))
					wantX, gotX := slices.Clone(x), slices.Clone(x)
					g.lower(wantX, n, col, true)
					k.col2im(g, gotX, n, col)
					if i := sameBits(gotX, wantX); i >= 0 {
						t.Fatalf("col2im of %d images: x[%d] = %v, want %v", n, i, gotX[i], wantX[i])
					}
				}
			})
		}
	}
}

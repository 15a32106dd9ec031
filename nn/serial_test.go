package nn

import (
	"math/rand/v2"
	"slices"
	"testing"

	"gonum.org/v1/gonum/blas"
)

// TestSerialRows: the row slices matMul hands to Sgemm stay under gonum's
// threshold for going parallel, for every width that has one.
func TestSerialRows(t *testing.T) {
	for _, tc := range []struct{ out, want int }{
		{5, 192}, {64, 192}, {65, 64}, {128, 64}, {192, 64}, {193, 0}, {1024, 0},
	} {
		if got := serialRows(tc.out); got != tc.want {
			t.Errorf("serialRows(%d) = %d, want %d", tc.out, got, tc.want)
		}
	}
}

// TestMatMulInSlices: matMul's product on gonum, computed in row slices,
// is bit for bit the product of one Sgemm call over the whole batch.
func TestMatMulInSlices(t *testing.T) {
	active = goKernels
	t.Cleanup(func() { active = nativeKernels })
	rng := rand.New(rand.NewPCG(1, 2))
	fill := func(n int) []float32 {
		s := make([]float32, n)
		for i := range s {
			s[i] = rng.Float32()*2 - 1
		}
		return s
	}
	for _, tc := range []struct{ batch, in, out int }{
		{1, 4, 64}, {191, 4, 64}, {193, 64, 64}, {512, 64, 64}, {300, 64, 100}, {257, 8, 256},
	} {
		x, w, bias := fill(tc.batch*tc.in), fill(tc.in*tc.out), fill(tc.batch*tc.out)
		got, want := slices.Clone(bias), slices.Clone(bias)
		matMul(x, w, got, tc.batch, tc.in, tc.out)
		active.blas.Sgemm(blas.NoTrans, blas.NoTrans, tc.batch, tc.out, tc.in, 1, x, tc.in, w, tc.out, 1, want, tc.out)
		if !slices.Equal(got, want) {
			t.Errorf("batch %d, in %d, out %d: the sliced product differs from one Sgemm", tc.batch, tc.in, tc.out)
		}
	}
}

package api

import (
	"math"
	"testing"
)

func TestFirstNonFinite(t *testing.T) {
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	special := []float32{nan, inf, -inf, float32(math.Float32frombits(0x7f800001)), float32(math.Float32frombits(0xffc00000))}
	finite := []float32{0, float32(math.Copysign(0, -1)), 1, -1, math.MaxFloat32, -math.MaxFloat32, math.SmallestNonzeroFloat32,
		float32(math.Float32frombits(0x7f7fffff)), float32(math.Float32frombits(0x00000001)), 1e-40, 3.5}
	for n := range 40 {
		x := make([]float32, n)
		for i := range x {
			x[i] = finite[i%len(finite)]
		}
		if got := FirstNonFinite(x); got != -1 {
			t.Fatalf("len %d of finite values: %d, want -1", n, got)
		}
		for at := range n {
			for _, s := range special {
				y := append([]float32(nil), x...)
				y[at] = s
				if at+1 < n {
					y[n-1] = nan // a later one does not hide the first
				}
				if got := FirstNonFinite(y); got != at {
					t.Fatalf("len %d, %v at %d: %d", n, s, at, got)
				}
				if AllFinite(y) {
					t.Fatalf("len %d, %v at %d: AllFinite", n, s, at)
				}
			}
		}
	}
}

func BenchmarkFirstNonFinite(b *testing.B) {
	x := make([]float32, 25600) // a MinAtar batch of 64 steps
	for i := range x {
		x[i] = float32(i % 2)
	}
	// The loop it replaced, for the ratio.
	byMath := func(x []float32) int {
		for i, v := range x {
			if f := float64(v); math.IsNaN(f) || math.IsInf(f, 0) {
				return i
			}
		}
		return -1
	}
	for _, c := range []struct {
		name string
		f    func([]float32) int
	}{{"bits", FirstNonFinite}, {"math", byMath}} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(4 * len(x)))
			for b.Loop() {
				if c.f(x) >= 0 {
					b.Fatal("non-finite")
				}
			}
		})
	}
}

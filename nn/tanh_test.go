package nn

import (
	"math"
	"testing"
)

// TestTanh32 sweeps tanh32 over a dense grid against math.Tanh and checks
// the bound |tanh| <= 1 that the backward pass's 1 - y² relies on.
func TestTanh32(t *testing.T) {
	var worst float64
	for i := -1_000_000; i <= 1_000_000; i++ {
		x := float32(i) * 1e-5
		got := tanh32(x)
		if got > 1 || got < -1 {
			t.Fatalf("tanh32(%v) = %v, outside [-1, 1]", x, got)
		}
		worst = max(worst, math.Abs(float64(got)-math.Tanh(float64(x))))
	}
	if worst > 5e-7 {
		t.Errorf("max |tanh32 - tanh| = %g, want <= 5e-7", worst)
	}
	for _, c := range []struct{ x, want float32 }{
		{100, 1}, {-100, -1}, {float32(math.Inf(1)), 1}, {float32(math.Inf(-1)), -1}, {0, 0},
	} {
		if got := tanh32(c.x); got != c.want {
			t.Errorf("tanh32(%v) = %v, want %v", c.x, got, c.want)
		}
	}
	if got := tanh32(float32(math.NaN())); !math.IsNaN(float64(got)) {
		t.Errorf("tanh32(NaN) = %v, want NaN", got)
	}
}

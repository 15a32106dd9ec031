package nn

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestExpNegLogAtLeast1 holds the sampler's exp and log to math's over
// their domains (a dense random sweep plus the edges and special values),
// within 1e-14 relative: well inside the 1e-12 by which the inverse-CDF
// test lets a draw fall on either side of a boundary.
func TestExpNegLogAtLeast1(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 3))
	within := func(got, want float64) bool {
		if math.IsNaN(want) {
			return math.IsNaN(got)
		}
		if got == want {
			return true
		}
		return math.Abs(got-want) <= 1e-14*math.Abs(want)
	}
	expCases := []float64{0, math.Copysign(0, -1), -1e-300, -math.Ln2 / 2, -math.Ln2, -1, -20, -87.3, -700, -707.9, -708, -708.1, -745, -746, -1e9,
		math.Inf(-1), math.NaN()}
	for range 200000 {
		expCases = append(expCases, -rng.Float64()*rng.Float64()*720)
	}
	for _, x := range expCases {
		if got, want := expNeg(x), math.Exp(x); !within(got, want) {
			t.Fatalf("expNeg(%v) = %v, math.Exp %v", x, got, want)
		}
	}
	logCases := []float64{1, math.Nextafter(1, 2), math.Sqrt2, math.Nextafter(math.Sqrt2, 2), 2, 3, 18, 1e6, math.MaxFloat64,
		math.Inf(1), 0.5, 0, -1, math.NaN()}
	for range 200000 {
		logCases = append(logCases, 1+rng.Float64()*math.Pow(2, rng.Float64()*20))
	}
	for _, x := range logCases {
		if got, want := logAtLeast1(x), math.Log(x); !within(got, want) {
			t.Fatalf("logAtLeast1(%v) = %v, math.Log %v", x, got, want)
		}
	}
}

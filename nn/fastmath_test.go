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

// logSumExp and the categorical entropy, on expNeg and logAtLeast1, agree
// with the same formulas on math.Exp and math.Log to 1e-13 (relative, or
// absolute near 0), on rows of 1 to 32 logits from -80 to 80, some -Inf.
func TestLogSumExpMatchesMath(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	refLSE := func(l []float32) float64 {
		mx := math.Inf(-1)
		for _, v := range l {
			mx = max(mx, float64(v))
		}
		var s float64
		for _, v := range l {
			s += math.Exp(float64(v) - mx)
		}
		return mx + math.Log(s)
	}
	close := func(got, want float64) bool {
		return math.Abs(got-want) <= 1e-13*max(1, math.Abs(want))
	}
	for range 20000 {
		l := make([]float32, 1+rng.IntN(32))
		scale := []float32{0.01, 1, 10, 80}[rng.IntN(4)]
		for i := range l {
			l[i] = scale * float32(2*rng.Float64()-1)
			if rng.IntN(8) == 0 && i > 0 {
				l[i] = float32(math.Inf(-1))
			}
		}
		want := refLSE(l)
		if got := logSumExp(l); !close(got, want) {
			t.Fatalf("logSumExp(%v) = %v, math gives %v", l, got, want)
		}
		var wantH float64
		for _, v := range l {
			if p := math.Exp(float64(v) - want); p != 0 {
				wantH -= p * (float64(v) - want)
			}
		}
		if got := entropy(l, logSumExp(l)); !close(got, wantH) {
			t.Fatalf("entropy(%v) = %v, math gives %v", l, got, wantH)
		}
	}
	if got := logSumExp([]float32{float32(math.Inf(-1))}); !math.IsInf(got, -1) {
		t.Errorf("logSumExp(-Inf) = %v", got)
	}
	if got := logSumExp([]float32{1, float32(math.NaN())}); !math.IsNaN(got) {
		t.Errorf("logSumExp with a NaN = %v", got)
	}
}

package nn_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/distrl/distrl/nn"
)

func softmax(logits []float32) []float64 {
	mx := math.Inf(-1)
	for _, v := range logits {
		mx = max(mx, float64(v))
	}
	p := make([]float64, len(logits))
	var s float64
	for i, v := range logits {
		p[i] = math.Exp(float64(v) - mx)
		s += p[i]
	}
	for i := range p {
		p[i] /= s
	}
	return p
}

func TestSampleCategoricalFrequencies(t *testing.T) {
	tests := []struct {
		name   string
		logits []float32
		n      int
	}{
		{"uneven", []float32{0, 1, 2, -1}, 4},
		{"masked action", []float32{1, float32(math.Inf(-1)), 1}, 3},
		{"large logits", []float32{1000, 1001, 999}, 3},
		{"prefix of a longer row", []float32{0.5, -0.5, 99}, 2},
	}
	const draws = 100_000
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(11, 12))
			row := tt.logits[:tt.n]
			want := softmax(row)
			counts := make([]int, tt.n)
			for range draws {
				a, lp := nn.SampleCategorical(tt.logits, tt.n, rng)
				if a < 0 || int(a) >= tt.n {
					t.Fatalf("sampled action %d out of [0,%d)", a, tt.n)
				}
				counts[a]++
				if ref := nn.CategoricalLogProb(row, a); lp != ref {
					t.Fatalf("logProb %v for action %d, CategoricalLogProb says %v", lp, a, ref)
				}
			}
			for i, c := range counts {
				got := float64(c) / draws
				// Five standard deviations of a frequency over this many draws.
				if tol := 5 * math.Sqrt(want[i]*(1-want[i])/draws); !near(got, want[i], tol) {
					t.Errorf("action %d: frequency %.4f, want %.4f ± %.4f", i, got, want[i], tol)
				}
			}
		})
	}
}

// TestSampleCategoricalInverseCDF: the action drawn for u is the first
// whose cumulative softmax probability exceeds u, and its log-probability
// is the log-softmax's, for rows narrow and wider than the stack buffer,
// masked actions (-Inf) and large logits, and u at the ends of [0, 1).
func TestSampleCategoricalInverseCDF(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	negInf := float32(math.Inf(-1))
	for trial := range 20000 {
		n := 1 + rng.IntN(48)
		logits := make([]float32, n)
		for i := range logits {
			switch {
			case rng.IntN(10) == 0:
				logits[i] = negInf
			case trial%3 == 0:
				logits[i] = float32(rng.NormFloat64() * 60) // large: exp overflows unshifted
			default:
				logits[i] = float32(rng.NormFloat64() * 3)
			}
		}
		logits[rng.IntN(n)] = float32(rng.NormFloat64()) // one possible action at least
		u := rng.Float64()
		switch trial % 7 {
		case 0:
			u = 0
		case 1:
			u = math.Nextafter(1, 0)
		}
		p := softmax(logits)
		want, c := -1, 0.0
		for i, pi := range p {
			c += pi
			if pi > 0 {
				want = i // the last possible action, if rounding leaves c below u
			}
			if u < c {
				want = i
				break
			}
		}
		a, lp := nn.SampleCategoricalWith(logits, n, u)
		// A u within rounding of a boundary may fall either side of it.
		if int(a) != want && math.Abs(c-u) > 1e-12 && math.Abs(c-p[want]-u) > 1e-12 {
			t.Fatalf("row %v, u %v: action %d, want %d", logits, u, a, want)
		}
		if a < 0 || math.Abs(float64(lp)-math.Log(p[a])) > 1e-5*max(1, math.Abs(math.Log(p[a]))) {
			t.Fatalf("row %v, u %v: action %d with log-prob %v, want %v", logits, u, a, lp, math.Log(p[max(a, 0)]))
		}
	}
}

func TestSampleCategoricalInvalid(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	negInf := float32(math.Inf(-1))
	tests := []struct {
		name   string
		logits []float32
		n      int
		rng    *rand.Rand
	}{
		{"n zero", []float32{1, 2}, 0, rng},
		{"n too large", []float32{1, 2}, 3, rng},
		{"nil rng", []float32{1, 2}, 2, nil},
		{"all masked", []float32{negInf, negInf}, 2, rng},
		{"nan logit", []float32{float32(math.NaN()), 1}, 2, rng},
		{"nan logit last", []float32{1, float32(math.NaN())}, 2, rng},
		{"infinite logit", []float32{float32(math.Inf(1)), 1}, 2, rng},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, lp := nn.SampleCategorical(tt.logits, tt.n, tt.rng)
			if a != -1 || !math.IsNaN(float64(lp)) {
				t.Errorf("got (%d, %v), want (-1, NaN)", a, lp)
			}
		})
	}
}

func TestCategoricalFunctions(t *testing.T) {
	nan := float32(math.NaN())
	tests := []struct {
		name    string
		logits  []float32
		greedy  int32
		entropy float64
	}{
		{"uniform", []float32{3, 3, 3, 3}, 0, math.Log(4)},
		{"peaked", []float32{0, 50, 0}, 1, 0},
		{"two of three", []float32{0, float32(math.Inf(-1)), 0}, 0, math.Log(2)},
		{"nan skipped", []float32{nan, -1, 2}, 2, math.NaN()},
		{"single", []float32{-7}, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if g := nn.GreedyCategorical(tt.logits); g != tt.greedy {
				t.Errorf("GreedyCategorical = %d, want %d", g, tt.greedy)
			}
			h := float64(nn.CategoricalEntropy(tt.logits))
			if math.IsNaN(tt.entropy) != math.IsNaN(h) || !math.IsNaN(h) && !near(h, tt.entropy, 1e-6) {
				t.Errorf("CategoricalEntropy = %v, want %v", h, tt.entropy)
			}
			// log-probabilities must exponentiate to a distribution.
			if !math.IsNaN(tt.entropy) {
				var s float64
				for a := range tt.logits {
					s += math.Exp(float64(nn.CategoricalLogProb(tt.logits, int32(a))))
				}
				if !near(s, 1, 1e-6) {
					t.Errorf("probabilities sum to %v", s)
				}
			}
		})
	}
	if g := nn.GreedyCategorical(nil); g != -1 {
		t.Errorf("GreedyCategorical(nil) = %d, want -1", g)
	}
	for _, a := range []int32{-1, 3} {
		if lp := nn.CategoricalLogProb([]float32{1, 2, 3}, a); !math.IsNaN(float64(lp)) {
			t.Errorf("CategoricalLogProb(action %d of 3) = %v, want NaN", a, lp)
		}
	}
	if h := nn.CategoricalEntropy(nil); !math.IsNaN(float64(h)) {
		t.Errorf("CategoricalEntropy(nil) = %v, want NaN", h)
	}
	// Stability: log-softmax of huge logits must not overflow.
	if lp := nn.CategoricalLogProb([]float32{1e30, 0}, 1); lp != -1e30 {
		t.Errorf("CategoricalLogProb with huge logit = %v, want -1e30", lp)
	}
}

func TestGradHelpersPoisonOnMisuse(t *testing.T) {
	logits := []float32{1, 2}
	tests := []struct {
		name string
		call func(d []float32)
		n    int
	}{
		{"logprob action out of range", func(d []float32) { nn.CategoricalLogProbGrad(logits, 2, 1, d) }, 2},
		{"logprob short grad", func(d []float32) { nn.CategoricalLogProbGrad(logits, 0, 1, d) }, 1},
		{"entropy long grad", func(d []float32) { nn.CategoricalEntropyGrad(logits, 1, d) }, 3},
		{"gaussian short grad", func(d []float32) { nn.GaussianLogProbGrad(logits, logits, logits, 1, d, nil) }, 1},
		{"gaussian entropy", func(d []float32) { nn.GaussianEntropyGrad(logits, 1, d) }, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := make([]float32, tt.n)
			tt.call(d)
			for i, v := range d {
				if !math.IsNaN(float64(v)) {
					t.Errorf("d[%d] = %v, want NaN", i, v)
				}
			}
		})
	}
}

func TestSampleGaussian(t *testing.T) {
	mean := []float32{1, -2}
	logStd := []float32{0, float32(math.Log(0.5))}
	rng := rand.New(rand.NewPCG(21, 22))
	const draws = 50_000
	var sum, sumSq [2]float64
	out := make([]float32, 2)
	for range draws {
		lp := nn.SampleGaussian(mean, logStd, rng, out)
		if ref := nn.GaussianLogProb(mean, logStd, out); !near(float64(lp), float64(ref), 1e-4) {
			t.Fatalf("logProb %v for %v, GaussianLogProb says %v", lp, out, ref)
		}
		for i, v := range out {
			sum[i] += float64(v)
			sumSq[i] += float64(v) * float64(v)
		}
	}
	for i := range mean {
		m := sum[i] / draws
		sd := math.Sqrt(sumSq[i]/draws - m*m)
		wantSD := math.Exp(float64(logStd[i]))
		if !near(m, float64(mean[i]), 5*wantSD/math.Sqrt(draws)) || !near(sd, wantSD, 0.02*wantSD) {
			t.Errorf("dim %d: mean %.4f sd %.4f, want %v and %v", i, m, sd, mean[i], wantSD)
		}
	}
	// The standard normal density at 0 in one dimension.
	if lp := nn.GaussianLogProb([]float32{0}, []float32{0}, []float32{0}); !near(float64(lp), -0.5*math.Log(2*math.Pi), 1e-6) {
		t.Errorf("log N(0; 0, 1) = %v", lp)
	}
	if lp := nn.SampleGaussian(mean, logStd[:1], rng, out); !math.IsNaN(float64(lp)) {
		t.Errorf("SampleGaussian with mismatched lengths = %v, want NaN", lp)
	}
	if lp := nn.GaussianLogProb(mean, logStd, out[:1]); !math.IsNaN(float64(lp)) {
		t.Errorf("GaussianLogProb with mismatched lengths = %v, want NaN", lp)
	}
	if h := nn.GaussianEntropy([]float32{0}); !near(float64(h), 0.5*math.Log(2*math.Pi*math.E), 1e-6) {
		t.Errorf("entropy of N(0, 1) = %v", h)
	}
}

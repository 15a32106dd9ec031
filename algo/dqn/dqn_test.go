package dqn

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/distrl/distrl/nn"
)

func testSpec() nn.Spec {
	return nn.Spec{ObsDim: 3, Hidden: []int{5}, Activation: nn.Tanh, Head: nn.Categorical, ActionDim: 3}
}

// convSpec is a Q network on 4×4×2 images: a padded, strided 3×3
// convolution of 3 filters, then testSpec's hidden layer.
func convSpec() nn.Spec {
	s := testSpec()
	s.ObsDim, s.InputShape = 32, []int{4, 4, 2}
	s.Conv = []nn.ConvLayer{{Filters: 3, Kernel: 3, Stride: 2, Padding: 1}}
	return s
}

func randBatch(r *rand.Rand, n int) *Batch { return randBatchOf(r, n, testSpec().ObsDim) }

// randBatchOf is randBatch for observations of obsDim values.
func randBatchOf(r *rand.Rand, n, obsDim int) *Batch {
	b := &Batch{}
	for i := range n {
		for range obsDim {
			b.Obs = append(b.Obs, float32(r.NormFloat64()))
			b.NextObs = append(b.NextObs, float32(r.NormFloat64()))
		}
		b.Actions = append(b.Actions, int32(r.IntN(3)))
		b.Rewards = append(b.Rewards, float32(r.NormFloat64()*2))
		b.Discounts = append(b.Discounts, []float32{0, 0.9, 0.81}[i%3])
		b.Weights = append(b.Weights, float32(0.2+r.Float64()))
	}
	return b
}

// The gradient against central finite differences of the loss, with and
// without the dueling head, for an MLP and a conv network, samples in the
// Huber loss's quadratic and linear parts.
func TestGradientMatchesFiniteDifferences(t *testing.T) {
	for _, spec := range []nn.Spec{testSpec(), convSpec()} {
		for _, dueling := range []bool{false, true} {
			t.Run(fmt.Sprintf("conv=%v/dueling=%v", spec.Conv, dueling), func(t *testing.T) {
				testGradient(t, spec, dueling)
			})
		}
	}
}

func testGradient(t *testing.T, spec nn.Spec, dueling bool) {
	cfg := DefaultConfig()
	cfg.HuberDelta, cfg.Dueling = 0.5, dueling
	l, err := NewLearner(spec, cfg, 3)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(1, 2))
	// A target network that differs from the online one, and Q-values
	// far enough apart that no step of the check flips an argmax (which
	// moves the target, a jump no gradient has).
	for i := range l.target.Params() {
		l.target.Params()[i] += float32(r.NormFloat64() * 0.5)
		l.online.Params()[i] += float32(r.NormFloat64() * 0.5)
	}
	b := randBatchOf(r, 6, spec.ObsDim)
	if _, _, err := l.lossAndGrad(b, nil, true); err != nil {
		t.Fatal(err)
	}
	grad := append([]float32(nil), l.grad...)
	p := l.online.Params()
	const h = 3e-3
	for k := range 40 {
		i := r.IntN(len(p))
		old := p[i]
		p[i] = old + h
		up, _ := l.Loss(b)
		p[i] = old - h
		down, _ := l.Loss(b)
		p[i] = old
		num := (up - down) / (2 * h)
		if math.Abs(num-float64(grad[i])) > 2e-3+2e-2*math.Abs(num) {
			t.Errorf("param %d (check %d): analytic %v, numeric %v", i, k, grad[i], num)
		}
	}
}

// TD errors against the targets built by hand from the two networks:
// double DQN picks the action with the online network and values it with
// the target network; plain DQN takes the target's max.
func TestTargets(t *testing.T) {
	for _, double := range []bool{true, false} {
		cfg := DefaultConfig()
		cfg.Double = double
		l, _ := NewLearner(testSpec(), cfg, 5)
		r := rand.New(rand.NewPCG(3, 4))
		for i := range l.target.Params() {
			l.target.Params()[i] += float32(r.NormFloat64())
		}
		b := randBatch(r, 8)
		_, td, err := l.lossAndGrad(b, nil, false)
		if err != nil {
			t.Fatal(err)
		}
		ws, out := nn.NewWorkspace(), &nn.Output{}
		q, _ := QValues(l.online, false, b.Obs, 8, ws, out, nil)
		qn, _ := QValues(l.online, false, b.NextObs, 8, ws, out, nil)
		qt, _ := QValues(l.target, false, b.NextObs, 8, ws, out, nil)
		picked := 0
		for i := range 8 {
			pick := Argmax(qt[i*3 : i*3+3])
			if double {
				pick = Argmax(qn[i*3 : i*3+3])
			}
			if pick != Argmax(qt[i*3:i*3+3]) {
				picked++
			}
			y := float64(b.Rewards[i]) + float64(b.Discounts[i])*float64(qt[i*3+pick])
			want := math.Abs(float64(q[i*3+int(b.Actions[i])]) - y)
			if math.Abs(td[i]-want) > 1e-5 {
				t.Errorf("double=%v sample %d: |TD| %v, by hand %v", double, i, td[i], want)
			}
		}
		if double && picked == 0 {
			t.Fatal("the online and target networks agree on every argmax: the test cannot tell double from plain DQN")
		}
	}
}

func TestTargetUpdates(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	b := randBatch(r, 4)
	hard := DefaultConfig()
	hard.TargetUpdateEvery = 3
	l, _ := NewLearner(testSpec(), hard, 1)
	init := append([]float32(nil), l.target.Params()...)
	for u := 1; u <= 3; u++ {
		if _, _, err := l.Update(b, nil); err != nil {
			t.Fatal(err)
		}
		same := equal(l.target.Params(), init)
		if u < 3 && !same {
			t.Fatalf("target changed after update %d of 3", u)
		}
		if u == 3 && !equal(l.target.Params(), l.online.Params()) {
			t.Fatal("target not copied after 3 updates")
		}
	}
	polyak := DefaultConfig()
	polyak.TargetUpdateEvery, polyak.Tau = 0, 0.25
	l, _ = NewLearner(testSpec(), polyak, 1)
	before := append([]float32(nil), l.target.Params()...)
	l.Update(b, nil)
	for i, p := range l.online.Params() {
		want := before[i] + 0.25*(p-before[i])
		if math.Abs(float64(l.target.Params()[i]-want)) > 1e-6 {
			t.Fatalf("param %d: target %v, want %v", i, l.target.Params()[i], want)
		}
	}
}

func equal(a, b []float32) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestApeXEpsilon(t *testing.T) {
	for _, tt := range []struct {
		i, n int
		want float64
	}{{0, 1, 0.4}, {0, 8, 0.4}, {7, 8, math.Pow(0.4, 8)}, {1, 3, math.Pow(0.4, 4.5)}} {
		if got := ApeXEpsilon(tt.i, tt.n); math.Abs(got-tt.want) > 1e-12 {
			t.Errorf("ApeXEpsilon(%d, %d) = %v, want %v", tt.i, tt.n, got, tt.want)
		}
	}
}

func TestBadInput(t *testing.T) {
	l, _ := NewLearner(testSpec(), DefaultConfig(), 1)
	b := randBatch(rand.New(rand.NewPCG(1, 1)), 3)
	b.Actions[1] = 7
	if _, _, err := l.Update(b, nil); err == nil {
		t.Fatal("action out of range accepted")
	}
	b.Actions[1] = 0
	b.Rewards = b.Rewards[:2]
	if _, _, err := l.Update(b, nil); err == nil {
		t.Fatal("short rewards accepted")
	}
	bad := DefaultConfig()
	bad.TargetUpdateEvery, bad.Tau = 0, 0
	if _, err := NewLearner(testSpec(), bad, 1); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("tau 0 without hard updates: %v", err)
	}
	masked := testSpec()
	masked.ActionMask = []int{0, 1, 2}
	if _, err := NewLearner(masked, DefaultConfig(), 1); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("an action mask: %v", err)
	}
}

// A restored learner continues exactly as the original.
func TestStateRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 9))
	b := randBatch(r, 5)
	a, _ := NewLearner(testSpec(), DefaultConfig(), 1)
	a.Update(b, nil)
	c, _ := NewLearner(testSpec(), DefaultConfig(), 2)
	st, err := a.State()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Restore(st); err != nil {
		t.Fatal(err)
	}
	a.Update(b, nil)
	c.Update(b, nil)
	if !equal(a.online.Params(), c.online.Params()) || a.Updates() != c.Updates() {
		t.Fatal("restored learner diverged")
	}
	bad, _ := a.State()
	bad.AdamM = bad.AdamM[1:]
	if err := c.Restore(bad); err == nil {
		t.Fatal("short state accepted")
	}
}

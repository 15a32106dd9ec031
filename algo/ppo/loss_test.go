package ppo

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/distrl/distrl/nn"
)

// refLoss is the PPO loss of mb at net's current parameters, written
// independently of lossAndGrad: log-probabilities, ratios, surrogate,
// value loss and entropy are recomputed here in float64 from the float32
// forward pass.
func refLoss(t *testing.T, net *nn.ActorCritic, mb *samples, cfg Config) float64 {
	t.Helper()
	spec := net.Spec()
	var out nn.Output
	if err := net.Forward(mb.obs, mb.n, nn.NewWorkspace(), &out); err != nil {
		t.Fatal(err)
	}
	logp, ent := refLogProbs(spec, &out, mb)
	e := cfg.ClipEps
	var pol, val, h float64
	for i := range mb.n {
		r := math.Exp(logp[i] - float64(mb.oldLogp[i]))
		adv := float64(mb.adv[i])
		pol += -math.Min(r*adv, math.Max(1-e, math.Min(1+e, r))*adv)
		v, ret := float64(out.Values[i]), float64(mb.returns[i])
		l := (v - ret) * (v - ret)
		if cfg.ClipValueLoss {
			old := float64(mb.oldValues[i])
			vc := old + math.Max(-e, math.Min(e, v-old))
			l = math.Max(l, (vc-ret)*(vc-ret))
		}
		val += 0.5 * l
		h += ent[i]
	}
	n := float64(mb.n)
	return pol/n + cfg.ValueCoef*val/n - cfg.EntropyCoef*h/n
}

// refLogProbs returns each row's log-probability of its action and the
// entropy of its distribution, in float64.
func refLogProbs(spec nn.Spec, out *nn.Output, mb *samples) (logp, ent []float64) {
	a := spec.ActionDim
	logp, ent = make([]float64, mb.n), make([]float64, mb.n)
	for i := range mb.n {
		if spec.Head == nn.Gaussian {
			for j := range a {
				mu, ls := float64(out.Mean[i*a+j]), float64(out.LogStd[j])
				x := float64(mb.cont[i*a+j])
				z := (x - mu) / math.Exp(ls)
				logp[i] += -0.5*z*z - ls - 0.5*math.Log(2*math.Pi)
				ent[i] += ls + 0.5*(1+math.Log(2*math.Pi))
			}
			continue
		}
		row := out.Logits[i*a : (i+1)*a]
		var z float64
		for _, v := range row {
			z += math.Exp(float64(v))
		}
		for j, v := range row {
			lp := float64(v) - math.Log(z)
			if int32(j) == mb.actions[i] {
				logp[i] = lp
			}
			ent[i] -= math.Exp(lp) * lp
		}
	}
	return logp, ent
}

// TestLossGradientFiniteDifferences checks lossAndGrad's gradient against
// central differences of refLoss for every parameter of a small network.
// The old log-probabilities and values are set relative to the network's
// current output so that every ratio (and every new value, for the clipped
// value loss) is well inside or well outside the clip range: the loss has
// kinks at the boundaries, where no finite difference can agree.
func TestLossGradientFiniteDifferences(t *testing.T) {
	tests := []struct {
		name string
		head nn.HeadKind
		// shared selects a shared trunk, conv a convolution in front.
		shared, conv bool
		// clipEps and logRatios: the rows cycle through logRatios as
		// log(new/old) at the starting point.
		clipEps   float64
		logRatios []float64
		// valueOffsets, cycled, set old value = new value - offset.
		clipValue    bool
		valueOffsets []float64
		wantClipFrac float64
	}{
		{name: "categorical unclipped", head: nn.Categorical, clipEps: 10,
			logRatios: []float64{-0.4, -0.1, 0.2, 0.5}, valueOffsets: []float64{0}},
		{name: "categorical clipped", head: nn.Categorical, clipEps: 0.2,
			logRatios: []float64{-0.5, -0.05, 0.05, 0.5}, valueOffsets: []float64{0}, wantClipFrac: 0.5},
		{name: "categorical clipped value", head: nn.Categorical, clipEps: 0.2, clipValue: true,
			logRatios: []float64{-0.5, 0.05}, valueOffsets: []float64{-0.6, -0.05, 0.05, 0.6}, wantClipFrac: 0.5},
		{name: "categorical shared trunk", head: nn.Categorical, shared: true, clipEps: 0.2,
			logRatios: []float64{0.5, 0.05, -0.5, -0.05}, valueOffsets: []float64{0}, wantClipFrac: 0.5},
		{name: "gaussian unclipped", head: nn.Gaussian, clipEps: 10,
			logRatios: []float64{-0.3, 0.3}, valueOffsets: []float64{0}},
		{name: "gaussian clipped", head: nn.Gaussian, clipEps: 0.2, clipValue: true,
			logRatios: []float64{-0.5, -0.05, 0.05, 0.5}, valueOffsets: []float64{0.6, 0.05, -0.6, -0.05}, wantClipFrac: 0.5},
		{name: "categorical conv clipped", head: nn.Categorical, conv: true, clipEps: 0.2, clipValue: true,
			logRatios: []float64{-0.5, 0.05}, valueOffsets: []float64{-0.6, -0.05, 0.05, 0.6}, wantClipFrac: 0.5},
		{name: "categorical conv shared trunk", head: nn.Categorical, conv: true, shared: true, clipEps: 0.2,
			logRatios: []float64{0.5, 0.05, -0.5, -0.05}, valueOffsets: []float64{0}, wantClipFrac: 0.5},
		{name: "gaussian conv", head: nn.Gaussian, conv: true, clipEps: 10,
			logRatios: []float64{-0.3, 0.3}, valueOffsets: []float64{0}},
	}
	const (
		rows = 8
		eps  = 2e-3
		rtol = 1e-2
		atol = 2e-4
	)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(5, 6))
			spec := nn.Spec{ObsDim: 4, Hidden: []int{8}, Activation: nn.Tanh, Head: tt.head, ActionDim: 2, SharedTrunk: tt.shared}
			if tt.conv {
				spec.ObsDim, spec.InputShape, spec.Conv = tinyImage.ObsDim, tinyImage.InputShape, tinyImage.Conv
			}
			cfg := DefaultConfig()
			cfg.ClipEps, cfg.ClipValueLoss, cfg.EntropyCoef = tt.clipEps, tt.clipValue, 0.05
			l := newLearner(t, spec, cfg)
			net := l.Net()
			// Unit-scale parameters: with the 0.01 policy-head init the
			// policy gradient of the hidden layers would be lost in noise.
			fill(rng, net.Params(), 0.6)

			mb := &samples{}
			mb.resize(rows, spec.ObsDim, spec.ActionDim, tt.head == nn.Gaussian)
			fill(rng, mb.obs, 1)
			fill(rng, mb.adv, 1)
			fill(rng, mb.returns, 1)
			if tt.head == nn.Gaussian {
				fill(rng, mb.cont, 1)
			} else {
				for i := range mb.actions {
					mb.actions[i] = rng.Int32N(int32(spec.ActionDim))
				}
			}
			var out nn.Output
			if err := net.Forward(mb.obs, rows, nn.NewWorkspace(), &out); err != nil {
				t.Fatal(err)
			}
			logp, _ := refLogProbs(spec, &out, mb)
			for i := range rows {
				mb.oldLogp[i] = float32(logp[i] - tt.logRatios[i%len(tt.logRatios)])
				mb.oldValues[i] = out.Values[i] - float32(tt.valueOffsets[i%len(tt.valueOffsets)])
				// The clipped value loss has a kink where the clipped and
				// unclipped errors are equal; make sure no row is near it.
				if tt.clipValue {
					v, ret, old := float64(out.Values[i]), float64(mb.returns[i]), float64(mb.oldValues[i])
					vc := old + math.Max(-tt.clipEps, math.Min(tt.clipEps, v-old))
					if gap := math.Abs((v-ret)*(v-ret) - (vc-ret)*(vc-ret)); gap != 0 && gap < 0.05 {
						t.Fatalf("row %d is %.3g from the value-clip kink; pick another seed", i, gap)
					}
				}
			}

			grad := make([]float32, net.NumParams())
			terms, err := l.lossAndGrad(mb, grad)
			if err != nil {
				t.Fatal(err)
			}
			if want := refLoss(t, net, mb, cfg); math.Abs(terms.total-want) > 1e-6*max(1, math.Abs(want)) {
				t.Errorf("loss = %.9g, reference %.9g", terms.total, want)
			}
			if math.Abs(terms.clipFrac-tt.wantClipFrac) > 1e-12 {
				t.Errorf("clip fraction = %v, want %v", terms.clipFrac, tt.wantClipFrac)
			}
			if terms.approxKL < 0 {
				t.Errorf("approx KL = %v, want >= 0", terms.approxKL)
			}

			p := net.Params()
			var gradNorm float64
			failures := 0
			for _, info := range net.Layout() {
				for k := range info.Size() {
					i := info.Offset + k
					orig := p[i]
					plus, minus := orig+eps, orig-eps
					p[i] = plus
					lp := refLoss(t, net, mb, cfg)
					p[i] = minus
					lm := refLoss(t, net, mb, cfg)
					p[i] = orig
					// Divide by the step actually taken after rounding to
					// float32, which removes most of the float32 noise.
					num := (lp - lm) / (float64(plus) - float64(minus))
					got := float64(grad[i])
					gradNorm += got * got
					if math.Abs(got-num) > atol+rtol*max(math.Abs(got), math.Abs(num)) {
						t.Errorf("%s[%d]: analytic %.6g, numeric %.6g", info.Name, k, got, num)
						if failures++; failures >= 10 {
							t.Fatal("too many gradient mismatches")
						}
					}
				}
			}
			// A vanishing gradient would pass trivially.
			if gradNorm < 1e-4 {
				t.Errorf("gradient norm² %v is too small for the check to mean anything", gradNorm)
			}
		})
	}
}

// TestLossThreads checks that a minibatch split over several goroutines
// gives the loss and gradient of one goroutine, for both heads, with an
// entropy bonus, and for minibatches too small to split. They agree to
// float32 rounding, not bit for bit: a BLAS may sum a part's rows in
// another order than the whole's. The clip range is wide enough that no
// row lies near a kink of the loss, where rounding would flip a row's
// gradient between its two sides.
func TestLossThreads(t *testing.T) {
	for _, head := range []nn.HeadKind{nn.Categorical, nn.Gaussian} {
		for _, conv := range []bool{false, true} {
			for _, rows := range []int{8, 127, 128, 301, 1024} {
				for _, threads := range []int{2, 3, 16} {
					t.Run(fmt.Sprintf("%s/conv=%v/rows=%d/threads=%d", head, conv, rows, threads), func(t *testing.T) {
						rng := rand.New(rand.NewPCG(uint64(rows), 9))
						spec := nn.Spec{ObsDim: 5, Hidden: []int{32, 32}, Activation: nn.Tanh, Head: head, ActionDim: 3}
						if conv {
							spec = tinyImage
							spec.Head, spec.ActionDim = head, 3
						}
						cfg := DefaultConfig()
						cfg.ClipEps, cfg.EntropyCoef = 10, 0.01
						one, many := newLearner(t, spec, cfg), newLearner(t, spec, cfg)
						many.SetThreads(threads)
						mb := &samples{}
						mb.resize(rows, spec.ObsDim, spec.ActionDim, head == nn.Gaussian)
						for _, x := range [][]float32{mb.obs, mb.adv, mb.returns, mb.oldValues, mb.cont} {
							fill(rng, x, 1)
						}
						for i := range rows {
							mb.oldLogp[i] = float32(-1 + 0.3*rng.NormFloat64())
						}
						for i := range mb.actions {
							mb.actions[i] = rng.Int32N(int32(spec.ActionDim))
						}
						g1, gn := make([]float32, one.Net().NumParams()), make([]float32, one.Net().NumParams())
						t1, err := one.lossAndGrad(mb, g1)
						if err != nil {
							t.Fatal(err)
						}
						tn, err := many.lossAndGrad(mb, gn)
						if err != nil {
							t.Fatal(err)
						}
						for _, p := range [][2]float64{{t1.total, tn.total}, {t1.policy, tn.policy}, {t1.value, tn.value},
							{t1.entropy, tn.entropy}, {t1.approxKL, tn.approxKL}, {t1.clipFrac, tn.clipFrac}} {
							if math.Abs(p[0]-p[1]) > 1e-6*max(1, math.Abs(p[0])) {
								t.Fatalf("loss terms %+v with one goroutine, %+v with %d", t1, tn, threads)
							}
						}
						var scale float64
						for _, g := range g1 {
							scale = max(scale, math.Abs(float64(g)))
						}
						if scale == 0 {
							t.Fatal("zero gradient")
						}
						for i := range g1 {
							if math.Abs(float64(g1[i]-gn[i])) > 1e-5*scale {
								t.Fatalf("gradient %d: %v with one goroutine, %v with %d (largest %v)", i, g1[i], gn[i], threads, scale)
							}
						}
					})
				}
			}
		}
	}
}

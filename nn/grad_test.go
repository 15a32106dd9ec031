package nn_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/distrl/distrl/nn"
)

// outputLoss is a scalar loss of a forward pass's output, with its
// gradient with respect to that output.
type outputLoss struct {
	name string
	// loss evaluates the loss, in float64 so that the finite differences
	// are limited by the float32 network, not by the summation.
	loss func(out *nn.Output) float64
	// grad returns ∂loss/∂out in Backward's layout.
	grad func(out *nn.Output) *nn.Output
}

// checkGradients compares Backward's gradient of ol with central finite
// differences for every parameter of m. The loss is computed in float64
// from the float32 forward pass, and the difference quotient divides by
// the step actually taken after rounding the perturbed parameter to
// float32, which removes most of the noise of checking a float32 network.
//
// A ReLU network's loss has kinks, where a unit's input crosses zero; a
// convolution's weight feeds every pixel of every row, so a step of eps
// often crosses one, and no central difference across a kink agrees with
// the gradient. A ReLU network's mismatch is then looked at closer, by
// kinkExplains.
func checkGradients(t *testing.T, m *nn.ActorCritic, obs []float32, batch int, ol outputLoss) {
	t.Helper()
	const (
		eps  = 2e-3
		rtol = 1e-2
		atol = 1e-3
	)
	ws, out := forward(t, m, obs, batch)
	grad := make([]float32, m.NumParams())
	if err := m.Backward(ws, batch, ol.grad(out), grad); err != nil {
		t.Fatalf("Backward: %v", err)
	}
	lossAt := func() float64 {
		o := new(nn.Output)
		if err := m.Forward(obs, batch, nn.NewWorkspace(), o); err != nil {
			t.Fatalf("Forward: %v", err)
		}
		return ol.loss(o)
	}
	p := m.Params()
	failures := 0
	for _, info := range m.Layout() {
		for k := range info.Size() {
			i := info.Offset + k
			orig := p[i]
			plus, minus := orig+eps, orig-eps
			p[i] = plus
			lp := lossAt()
			p[i] = minus
			lm := lossAt()
			p[i] = orig
			num := (lp - lm) / (float64(plus) - float64(minus))
			got := float64(grad[i])
			differ := func(a, b float64) bool { return math.Abs(a-b) > atol+rtol*max(math.Abs(a), math.Abs(b)) }
			if differ(got, num) && m.Spec().Activation == nn.ReLU && kinkExplains(p, i, got, lossAt, differ) {
				continue
			}
			if differ(got, num) {
				t.Errorf("%s: %s[%d]: analytic %.6g, numeric %.6g", ol.name, info.Name, k, got, num)
				if failures++; failures >= 10 {
					t.Fatal("too many gradient mismatches")
				}
			}
		}
	}
}

// kinkExplains reports whether the gradient got of parameter i agrees with
// a one-sided difference of a quarter of checkGradients's step, on either
// side: a kink further than that from the parameter's value leaves that
// side's difference clean, while a wrong gradient agrees with neither
// (both are then close to the true derivative).
func kinkExplains(p []float32, i int, got float64, lossAt func() float64, differ func(a, b float64) bool) bool {
	const h = 5e-4
	orig := p[i]
	l0 := lossAt()
	for _, step := range []float32{h, -h} {
		p[i] = orig + step
		l := lossAt()
		p[i] = orig
		if !differ(got, (l-l0)/(float64(orig+step)-float64(orig))) {
			return true
		}
	}
	return false
}

// gradSpecs is every combination of activation, head and trunk sharing,
// on a network small enough to perturb every parameter.
func gradSpecs() []nn.Spec {
	var specs []nn.Spec
	for _, act := range []nn.Activation{nn.Tanh, nn.ReLU} {
		for _, head := range []nn.HeadKind{nn.Categorical, nn.Gaussian} {
			for _, shared := range []bool{false, true} {
				specs = append(specs, nn.Spec{ObsDim: 3, Hidden: []int{5, 4}, Activation: act,
					Head: head, ActionDim: 3, SharedTrunk: shared})
			}
		}
	}
	// Degenerate depth: the heads act on the observations directly.
	specs = append(specs, nn.Spec{ObsDim: 3, Activation: nn.Tanh, Head: nn.Gaussian, ActionDim: 2, SharedTrunk: true})
	// Convolutions (padded and strided, stacked) under every activation,
	// head and trunk; a 1×1 convolution, which skips im2col; and heads
	// right on the convolutions' features.
	for _, act := range []nn.Activation{nn.Tanh, nn.ReLU} {
		for _, head := range []nn.HeadKind{nn.Categorical, nn.Gaussian} {
			for _, shared := range []bool{false, true} {
				specs = append(specs, nn.Spec{ObsDim: 40, InputShape: []int{5, 4, 2},
					Conv:   []nn.ConvLayer{{Filters: 3, Kernel: 3, Stride: 1, Padding: 1}, {Filters: 2, Kernel: 2, Stride: 2}},
					Hidden: []int{4}, Activation: act, Head: head, ActionDim: 3, SharedTrunk: shared})
			}
		}
	}
	specs = append(specs,
		nn.Spec{ObsDim: 27, InputShape: []int{3, 3, 3}, Conv: []nn.ConvLayer{{Filters: 2, Kernel: 1, Stride: 1}, {Filters: 2, Kernel: 2, Stride: 1}},
			Hidden: []int{3}, Activation: nn.Tanh, Head: nn.Categorical, ActionDim: 2},
		nn.Spec{ObsDim: 18, InputShape: []int{3, 3, 2}, Conv: []nn.ConvLayer{{Filters: 2, Kernel: 2, Stride: 1, Padding: 1}},
			Activation: nn.Tanh, Head: nn.Categorical, ActionDim: 2, SharedTrunk: true})
	return specs
}

func specName(s nn.Spec) string {
	name := fmt.Sprintf("%s/%s/shared=%v/hidden=%v", s.Activation, s.Head, s.SharedTrunk, s.Hidden)
	if len(s.Conv) > 0 {
		name += fmt.Sprintf("/input=%v/conv=%v", s.InputShape, s.Conv)
	}
	return name
}

// gradModel builds a network for gradient checks. Its parameters are
// replaced by draws that keep every layer's output of order 1
// (setUnitParams): with the 0.01 policy-head init, the gradients of the
// policy's hidden layers would be too small to tell apart from
// finite-difference noise, and with larger weights the outputs of stacked
// convolutions grow until the float32 loss's rounding is that noise.
func gradModel(t *testing.T, spec nn.Spec, rng *rand.Rand) *nn.ActorCritic {
	t.Helper()
	m := newModel(t, spec, 1)
	setUnitParams(t, m, rng)
	return m
}

// headOut returns the policy head's output: logits or mean.
func headOut(o *nn.Output) []float32 {
	if len(o.Logits) > 0 {
		return o.Logits
	}
	return o.Mean
}

func TestGradientLinearLoss(t *testing.T) {
	const batch = 4
	for _, spec := range gradSpecs() {
		t.Run(specName(spec), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(3, 4))
			m := gradModel(t, spec, rng)
			obs := randVec(rng, batch*spec.ObsDim, 1)
			w1 := randVec(rng, batch*spec.ActionDim, 1)
			w2 := randVec(rng, batch, 1)
			w3 := randVec(rng, spec.ActionDim, 1)
			gaussian := spec.Head == nn.Gaussian
			checkGradients(t, m, obs, batch, outputLoss{
				name: "sum(w1·head) + sum(w2·values) + sum(w3·logstd)",
				loss: func(o *nn.Output) float64 {
					var l float64
					for i, v := range headOut(o) {
						l += float64(w1[i]) * float64(v)
					}
					for i, v := range o.Values {
						l += float64(w2[i]) * float64(v)
					}
					for i, v := range o.LogStd {
						l += float64(w3[i]) * float64(v)
					}
					return l
				},
				grad: func(*nn.Output) *nn.Output {
					if gaussian {
						return &nn.Output{Mean: w1, LogStd: w3, Values: w2}
					}
					return &nn.Output{Logits: w1, Values: w2}
				},
			})
		})
	}
}

// TestGradientPolicyLoss checks the gradient helpers and Backward together
// on the pieces of a PPO loss: advantage-weighted log-probabilities plus
// an entropy bonus plus a value term.
func TestGradientPolicyLoss(t *testing.T) {
	const batch = 5
	for _, spec := range gradSpecs() {
		t.Run(specName(spec), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(5, 6))
			m := gradModel(t, spec, rng)
			n := spec.ActionDim
			obs := randVec(rng, batch*spec.ObsDim, 1)
			adv := randVec(rng, batch, 1)
			wv := randVec(rng, batch, 1)
			const entCoef = 0.3
			actions := make([]int32, batch)
			for i := range actions {
				actions[i] = int32(rng.IntN(n))
			}
			contActions := randVec(rng, batch*n, 1)

			var ol outputLoss
			if spec.Head == nn.Categorical {
				ol = outputLoss{
					name: "categorical logprob + entropy",
					loss: func(o *nn.Output) float64 {
						var l float64
						for b := range batch {
							row := o.Logits[b*n : (b+1)*n]
							l += float64(adv[b])*float64(nn.CategoricalLogProb(row, actions[b])) +
								entCoef*float64(nn.CategoricalEntropy(row))
							l += float64(wv[b]) * float64(o.Values[b])
						}
						return l
					},
					grad: func(o *nn.Output) *nn.Output {
						d := &nn.Output{Logits: make([]float32, batch*n), Values: wv}
						for b := range batch {
							row, drow := o.Logits[b*n:(b+1)*n], d.Logits[b*n:(b+1)*n]
							nn.CategoricalLogProbGrad(row, actions[b], adv[b], drow)
							nn.CategoricalEntropyGrad(row, entCoef, drow)
						}
						return d
					},
				}
			} else {
				ol = outputLoss{
					name: "gaussian logprob + entropy",
					loss: func(o *nn.Output) float64 {
						l := entCoef * float64(nn.GaussianEntropy(o.LogStd))
						for b := range batch {
							l += float64(adv[b]) * float64(nn.GaussianLogProb(o.Mean[b*n:(b+1)*n], o.LogStd, contActions[b*n:(b+1)*n]))
							l += float64(wv[b]) * float64(o.Values[b])
						}
						return l
					},
					grad: func(o *nn.Output) *nn.Output {
						// Per-row log-std gradients, which Backward sums.
						d := &nn.Output{Mean: make([]float32, batch*n), LogStd: make([]float32, batch*n), Values: wv}
						for b := range batch {
							nn.GaussianLogProbGrad(o.Mean[b*n:(b+1)*n], o.LogStd, contActions[b*n:(b+1)*n],
								adv[b], d.Mean[b*n:(b+1)*n], d.LogStd[b*n:(b+1)*n])
						}
						nn.GaussianEntropyGrad(o.LogStd, entCoef, d.LogStd[:n])
						return d
					},
				}
			}
			checkGradients(t, m, obs, batch, ol)
		})
	}
}

// TestBackwardAccumulates checks that Backward adds to grad, leaves the
// Workspace reusable and dOut untouched, and that leaving out a part of
// dOut is the same as passing zeros for it.
func TestBackwardAccumulates(t *testing.T) {
	const batch = 3
	for _, spec := range gradSpecs() {
		t.Run(specName(spec), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(7, 8))
			m := gradModel(t, spec, rng)
			ws, _ := forward(t, m, randVec(rng, batch*spec.ObsDim, 1), batch)
			dHead := randVec(rng, batch*spec.ActionDim, 1)
			dV := randVec(rng, batch, 1)
			full, pol, val := &nn.Output{Values: dV}, &nn.Output{}, &nn.Output{Values: dV}
			zeros := make([]float32, len(dHead))
			if spec.Head == nn.Gaussian {
				full.Mean, pol.Mean, val.Mean = dHead, dHead, zeros
			} else {
				full.Logits, pol.Logits, val.Logits = dHead, dHead, zeros
			}
			backward := func(d *nn.Output, times int) []float32 {
				g := make([]float32, m.NumParams())
				for range times {
					if err := m.Backward(ws, batch, d, g); err != nil {
						t.Fatal(err)
					}
				}
				return g
			}
			once, twice := backward(full, 1), backward(full, 2)
			for i := range once {
				if !near(float64(twice[i]), 2*float64(once[i]), 1e-5*(1+math.Abs(float64(once[i])))) {
					t.Fatalf("grad[%d]: twice %v, once %v", i, twice[i], once[i])
				}
			}
			gp, gv := backward(pol, 1), backward(val, 1)
			for i := range once {
				if !near(float64(gp[i]+gv[i]), float64(once[i]), 1e-5*(1+math.Abs(float64(once[i])))) {
					t.Fatalf("grad[%d]: policy-only %v + value-only %v != joint %v", i, gp[i], gv[i], once[i])
				}
			}
			for i, v := range dHead {
				if v != headOut(full)[i] {
					t.Fatal("Backward modified dOut")
				}
			}
		})
	}
}

// TestGaussianGrads checks GaussianLogProbGrad and GaussianEntropyGrad
// against finite differences of GaussianLogProb and GaussianEntropy.
func TestGaussianGrads(t *testing.T) {
	mean := []float32{0.3, -1.2, 2}
	logStd := []float32{-0.5, 0.2, 0.9}
	action := []float32{0.1, -0.4, 3.5}
	const scale, eps = 1.7, 1e-3
	dMean, dLogStd := make([]float32, 3), make([]float32, 3)
	nn.GaussianLogProbGrad(mean, logStd, action, scale, dMean, dLogStd)
	dEnt := make([]float32, 3)
	nn.GaussianEntropyGrad(logStd, scale, dEnt)
	numeric := func(v []float32, i int, f func() float32) float64 {
		orig := v[i]
		v[i] = orig + eps
		hi, vp := f(), v[i]
		v[i] = orig - eps
		lo, vm := f(), v[i]
		v[i] = orig
		return scale * float64(hi-lo) / float64(vp-vm)
	}
	lp := func() float32 { return nn.GaussianLogProb(mean, logStd, action) }
	ent := func() float32 { return nn.GaussianEntropy(logStd) }
	for i := range mean {
		for _, c := range []struct {
			name string
			got  float32
			want float64
		}{
			{"d logp/d mean", dMean[i], numeric(mean, i, lp)},
			{"d logp/d logstd", dLogStd[i], numeric(logStd, i, lp)},
			{"d H/d logstd", dEnt[i], numeric(logStd, i, ent)},
		} {
			if !near(float64(c.got), c.want, 1e-2*math.Abs(c.want)+1e-3) {
				t.Errorf("%s[%d] = %v, numeric %v", c.name, i, c.got, c.want)
			}
		}
	}
}

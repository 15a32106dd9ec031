package ppo

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/distrl/distrl/api"
	"github.com/distrl/distrl/internal/testsupport/enginetest"
	"github.com/distrl/distrl/nn"
	"github.com/distrl/distrl/nn/cuda"
)

// The GPU engine runs PPO's minibatch steps whole (stepEngine), with the
// loss of kernels.cu's ppo_loss (nn/cuda's surrogate.h). Without a GPU,
// these tests hold that loss, compiled for the host, to rowsLoss, and run
// the learner's whole-step path on the CPU engine through hostSteps,
// which takes the GPU's steps in the GPU's order with that same loss.

// hostSteps is a stepEngine on an nn.Engine: each step's forward pass,
// backward pass, clipping and Adam's step on the engine, its loss by
// surrogate.h compiled for the host, and, as on the GPU, no step applied
// from the first whose norm or loss is not finite.
type hostSteps struct {
	nn.Engine
	actions  int
	rows, mb nn.SurrogateRows
	out, d   nn.Output
}

func hostStepsOn(open nn.OpenEngine) nn.OpenEngine {
	return func(net *nn.ActorCritic, opt *nn.Adam) (nn.Engine, error) {
		e, err := open(net, opt)
		if err != nil {
			return nil, err
		}
		return &hostSteps{Engine: e, actions: net.Spec().ActionDim}, nil
	}
}

func (h *hostSteps) StageSurrogate(r nn.SurrogateRows) error {
	h.rows = nn.SurrogateRows{Actions: slices.Clone(r.Actions), OldLogp: slices.Clone(r.OldLogp),
		OldValues: slices.Clone(r.OldValues), Adv: slices.Clone(r.Adv), Returns: slices.Clone(r.Returns)}
	return nil
}

func (h *hostSteps) SurrogateSteps(idx []int32, bounds []int, loss nn.SurrogateLoss, maxNorm, lr float32, out []nn.SurrogateStep) (int, error) {
	applied := len(out)
	for m := range out {
		rows := idx[bounds[m]:bounds[m+1]]
		if err := h.ForwardRows(0, rows, &h.out); err != nil {
			return 0, err
		}
		pick := func(dst *[]float32, src []float32) {
			*dst = (*dst)[:0]
			for _, r := range rows {
				*dst = append(*dst, src[r])
			}
		}
		h.mb.Actions = h.mb.Actions[:0]
		for _, r := range rows {
			h.mb.Actions = append(h.mb.Actions, h.rows.Actions[r])
		}
		pick(&h.mb.OldLogp, h.rows.OldLogp)
		pick(&h.mb.OldValues, h.rows.OldValues)
		pick(&h.mb.Adv, h.rows.Adv)
		pick(&h.mb.Returns, h.rows.Returns)
		h.d.Logits = grow(h.d.Logits, len(h.out.Logits))
		h.d.Values = grow(h.d.Values, len(rows))
		st, err := cuda.SurrogateRowsHost(h.out.Logits, h.out.Values, h.actions, h.mb, loss, h.d.Logits, h.d.Values)
		if err != nil {
			return 0, err
		}
		if err := h.ZeroGrad(); err != nil {
			return 0, err
		}
		if err := h.Backward(0, len(rows), &h.d); err != nil {
			return 0, err
		}
		if st.Norm, err = h.ClipGradNorm(maxNorm); err != nil {
			return 0, err
		}
		out[m] = st
		inv := 1 / float64(len(rows))
		total := st.Policy*inv + loss.ValueCoef*(st.Value*inv) - loss.EntropyCoef*(st.Entropy*inv)
		if f := float64(st.Norm); applied == len(out) && (math.IsNaN(f) || math.IsInf(f, 0) || math.IsNaN(total)) {
			applied = m
		}
		if applied == len(out) {
			if err := h.Step(lr); err != nil {
				return 0, err
			}
		}
	}
	return applied, nil
}

// TestSurrogateKernelMatchesRowsLoss: surrogate.h's loss (the GPU's),
// compiled for the host, gives rowsLoss's terms and gradient for the same
// outputs and rows, with value clipping on and off, with and without the
// entropy bonus, with ratios inside and outside the clip range, large
// logits and advantages, and one action or several.
func TestSurrogateKernelMatchesRowsLoss(t *testing.T) {
	type tcase struct {
		name      string
		actions   int
		clipValue bool
		entCoef   float64
		logScale  float64 // logits' spread
		ratioLog  float64 // spread of log(new/old)
	}
	var cases []tcase
	for _, a := range []int{1, 2, 6, 18} {
		for _, clip := range []bool{false, true} {
			for _, ent := range []float64{0, 0.01} {
				for _, spread := range []struct{ logits, ratio float64 }{{1, 0.05}, {30, 1}} {
					cases = append(cases, tcase{fmt.Sprintf("actions=%d/clip=%v/ent=%v/logits=%v", a, clip, ent, spread.logits),
						a, clip, ent, spread.logits, spread.ratio})
				}
			}
		}
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(i), 7))
			const n = 97
			cfg := DefaultConfig()
			cfg.ClipValueLoss, cfg.EntropyCoef = c.clipValue, c.entCoef
			spec := nn.Spec{ObsDim: 3, Hidden: []int{4}, Activation: nn.Tanh, Head: nn.Categorical, ActionDim: c.actions}
			l := newLearner(t, spec, cfg)
			mb := &samples{}
			mb.resize(n, spec.ObsDim, c.actions, false)
			sh := &shard{}
			sh.out.Logits = make([]float32, n*c.actions)
			sh.out.Values = make([]float32, n)
			for r := range n {
				row := sh.out.Logits[r*c.actions : (r+1)*c.actions]
				for j := range row {
					row[j] = float32(rng.NormFloat64() * c.logScale)
				}
				act := int32(rng.IntN(c.actions))
				mb.actions[r] = act
				// The behaviour policy's log-probability: the new one off by the ratio's log.
				mb.oldLogp[r] = float32(float64(nn.CategoricalLogProb(row, act)) - rng.NormFloat64()*c.ratioLog)
				mb.oldValues[r] = float32(rng.NormFloat64())
				sh.out.Values[r] = mb.oldValues[r] + float32(rng.NormFloat64()*0.3)
				mb.adv[r] = float32(rng.NormFloat64() * 3)
				mb.returns[r] = float32(rng.NormFloat64() * 2)
			}
			l.rowsLoss(sh, mb, 0, n)
			rows := nn.SurrogateRows{Actions: mb.actions, OldLogp: mb.oldLogp, OldValues: mb.oldValues, Adv: mb.adv, Returns: mb.returns}
			loss := nn.SurrogateLoss{ClipEps: cfg.ClipEps, ValueCoef: cfg.ValueCoef, EntropyCoef: cfg.EntropyCoef, ClipValue: cfg.ClipValueLoss}
			dl, dv := make([]float32, n*c.actions), make([]float32, n)
			got, err := cuda.SurrogateRowsHost(sh.out.Logits, sh.out.Values, c.actions, rows, loss, dl, dv)
			if err != nil {
				t.Fatal(err)
			}
			want := sh.t
			for _, term := range []struct {
				name      string
				got, want float64
			}{{"policy", got.Policy, want.policy}, {"value", got.Value, want.value}, {"entropy", got.Entropy, want.entropy},
				{"approx_kl", got.ApproxKL, want.approxKL}, {"clip_frac", got.ClipFrac, want.clipFrac}} {
				if d := math.Abs(term.got - term.want); d > 1e-9*max(1, math.Abs(term.want)) || math.IsNaN(term.got) {
					t.Errorf("%s: %v, rowsLoss %v", term.name, term.got, term.want)
				}
			}
			if c.ratioLog == 1 && want.clipFrac == 0 {
				t.Error("no row clipped: the clipped branch is not compared")
			}
			for _, g := range []struct {
				name      string
				got, want []float32
			}{{"logits", dl, sh.dOut.Logits}, {"values", dv, sh.dOut.Values}} {
				worst, scale := 0.0, 0.0
				for i := range g.want {
					worst = max(worst, math.Abs(float64(g.got[i])-float64(g.want[i])))
					scale = max(scale, math.Abs(float64(g.want[i])))
				}
				if worst > 1e-6*scale || math.IsNaN(worst) {
					t.Errorf("gradient of the %s off by %.3g (largest %.3g)", g.name, worst, scale)
				}
				if scale == 0 && (g.name == "values" || c.actions > 1) { // one action's logit has no gradient
					t.Errorf("gradient of the %s is zero: nothing compared", g.name)
				}
			}
		})
	}
}

// TestSurrogateKernelNonFinite: a NaN logit makes the row's loss NaN, as
// in rowsLoss, so that the step's guard stops it.
func TestSurrogateKernelNonFinite(t *testing.T) {
	logits := []float32{0.1, float32(math.NaN()), 0.3}
	rows := nn.SurrogateRows{Actions: []int32{0}, OldLogp: []float32{-1}, OldValues: []float32{0}, Adv: []float32{1}, Returns: []float32{1}}
	st, err := cuda.SurrogateRowsHost(logits, []float32{0.5}, 3, rows, nn.SurrogateLoss{ClipEps: 0.2, ValueCoef: 0.5, EntropyCoef: 0.01}, make([]float32, 3), make([]float32, 1))
	if err != nil {
		t.Fatal(err)
	}
	if !math.IsNaN(st.Policy) || !math.IsNaN(st.Entropy) {
		t.Errorf("a NaN logit gave policy %v, entropy %v; want NaN", st.Policy, st.Entropy)
	}
	if _, err := cuda.SurrogateRowsHost(logits, []float32{0.5}, 3, nn.SurrogateRows{Actions: []int32{3}, OldLogp: []float32{-1},
		OldValues: []float32{0}, Adv: []float32{1}, Returns: []float32{1}}, nn.SurrogateLoss{}, make([]float32, 3), make([]float32, 1)); !errors.Is(err, nn.ErrShape) {
		t.Errorf("an action outside the head: %v, want ErrShape", err)
	}
}

// TestWholeSteps: a learner on an engine that takes whole steps trains
// as the CPU learner does (its loss is surrogate.h's, whose exp and log
// differ from nn's by 1e-14, so within float32 rounding rather than bit
// for bit), with TargetKL stopping it after an epoch or not, and its
// stats are the CPU learner's.
func TestWholeSteps(t *testing.T) {
	checkWholeSteps(t, hostStepsOn(nn.NewCPUEngine), 1e-4)
}

// checkWholeSteps runs 4 updates of 3 epochs on a CPU learner and on one
// on open, which must take whole steps, and compares their stats and
// parameters within tol relative.
func checkWholeSteps(t *testing.T, open nn.OpenEngine, tol float64) {
	for _, c := range []struct {
		name     string
		spec     nn.Spec
		targetKL float64
	}{{"cartpole", cartPoleSpec, 0}, {"cartpole/target-kl", cartPoleSpec, 1e-4}, {"tiny-image", tinyImage, 0}} {
		t.Run(c.name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.Epochs, cfg.MinibatchSize, cfg.MaxGradNorm, cfg.TargetKL = 3, 48, 0.5, c.targetKL
			cfg.ClipValueLoss, cfg.EntropyCoef = true, 0.01
			cpu, eng := enginePair(t, c.spec, cfg, open)
			if _, ok := eng.eng.(stepEngine); !ok {
				t.Fatalf("%T does not take whole steps", eng.eng)
			}
			rng := rand.New(rand.NewPCG(5, 5))
			stopped := false
			for u := range 4 {
				b := randBatch(rng, c.spec, batchSpec{t: 150, truncated: []int{149}, terminated: []int{60}})
				ws, err := cpu.Update([]*api.SampleBatch{b})
				if err != nil {
					t.Fatal(err)
				}
				gs, err := eng.Update([]*api.SampleBatch{b})
				if err != nil {
					t.Fatal(err)
				}
				if gs.Epochs != ws.Epochs || gs.Minibatches != ws.Minibatches {
					t.Fatalf("update %d: %d epochs of %d steps, the CPU's %d of %d", u, gs.Epochs, gs.Minibatches, ws.Epochs, ws.Minibatches)
				}
				stopped = stopped || ws.Epochs < cfg.Epochs
				for _, s := range []struct {
					name      string
					got, want float64
				}{{"policy_loss", gs.PolicyLoss, ws.PolicyLoss}, {"value_loss", gs.ValueLoss, ws.ValueLoss}, {"entropy", gs.Entropy, ws.Entropy},
					{"approx_kl", gs.ApproxKL, ws.ApproxKL}, {"clip_frac", gs.ClipFrac, ws.ClipFrac}, {"grad_norm", gs.GradNorm, ws.GradNorm}} {
					if d := math.Abs(s.got - s.want); d > tol*max(math.Abs(s.want), 1e-3) || math.IsNaN(s.got) {
						t.Errorf("update %d: %s %v, the CPU's %v", u, s.name, s.got, s.want)
					}
				}
			}
			if c.targetKL > 0 && !stopped {
				t.Error("TargetKL never stopped an update: the early stop is not compared")
			}
			if r, p := enginetest.RelDiff(cpu.net.Layout(), eng.Params(), cpu.Params()); r > tol || math.IsNaN(r) {
				t.Errorf("parameters of %s off by %.3g relative", p, r)
			} else {
				t.Logf("parameters within %.3g relative after %d steps (worst %s)", r, cpu.opt.Step, p)
			}
			if eng.opt.Step != cpu.opt.Step {
				t.Errorf("Adam step %d, the CPU's %d", eng.opt.Step, cpu.opt.Step)
			}
		})
	}
}

// TestWholeStepsStopAtNonFinite: where a step's gradient overflows, the
// whole-step path reports ErrNonFinite at the same epoch and minibatch as
// the CPU learner and leaves the same state: the steps before it applied,
// none from it on, Adam's step counter where the CPU's stopped.
func TestWholeStepsStopAtNonFinite(t *testing.T) {
	checkWholeStepsStopAtNonFinite(t, hostStepsOn(nn.NewCPUEngine), 1e-5)
}

// checkWholeStepsStopAtNonFinite is that test on open's engine, its
// parameters within tol relative of the CPU's.
func checkWholeStepsStopAtNonFinite(t *testing.T, open nn.OpenEngine, tol float64) {
	cfg := DefaultConfig()
	cfg.NormalizeAdvantages = false
	cfg.MinibatchSize = 4
	cpu, eng := enginePair(t, cartPoleSpec, cfg, open)
	b := randBatch(rand.New(rand.NewPCG(4, 4)), cartPoleSpec, batchSpec{t: 16, terminated: []int{15}})
	// Rows whose behaviour log-probability is so low that their ratio
	// overflows, with a negative advantage: an infinite gradient in
	// whichever minibatch the shuffle puts the first of them.
	for i := range b.LogProbs.Data {
		b.Values.Data[i] = 0
		b.Rewards.Data[i] = 0
		if i == 11 {
			b.LogProbs.Data[i], b.Rewards.Data[i] = -1e30, -100
		}
	}
	_, werr := cpu.Update([]*api.SampleBatch{b})
	_, gerr := eng.Update([]*api.SampleBatch{b})
	if !errors.Is(werr, ErrNonFinite) || !errors.Is(gerr, ErrNonFinite) {
		t.Fatalf("CPU: %v; whole steps: %v; want ErrNonFinite from both", werr, gerr)
	}
	if werr.Error() != gerr.Error() {
		t.Errorf("whole steps: %v\nCPU:         %v", gerr, werr)
	}
	if eng.opt.Step != cpu.opt.Step {
		t.Errorf("Adam step %d, the CPU's %d", eng.opt.Step, cpu.opt.Step)
	}
	if cpu.opt.Step == 0 {
		t.Error("the first step failed: no step before it is compared")
	}
	if r, p := enginetest.RelDiff(cpu.net.Layout(), eng.Params(), cpu.Params()); r > tol || math.IsNaN(r) {
		t.Errorf("parameters of %s off by %.3g relative", p, r)
	}
}

package dqn

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/distrl/distrl/internal/testsupport/enginetest"
	"github.com/distrl/distrl/nn"
	"github.com/distrl/distrl/nn/cuda"
)

// The GPU engine runs a DQN update whole (updateEngine), with the loss of
// kernels.cu's dqn_loss (nn/cuda's dqnloss.h). Without a GPU, these tests
// hold that loss, compiled for the host, to lossAndGrad, and run the
// learner's whole-update path on the CPU engine through hostUpdates,
// which makes the GPU's update in the GPU's order with that same loss.

// hostUpdates is an updateEngine on an nn.Engine: the target's forward
// pass here, the online network's passes, clipping and Adam's step on the
// engine, the loss by dqnloss.h compiled for the host, and, as on the GPU,
// no step where the loss or the norm is not finite.
type hostUpdates struct {
	nn.Engine
	target            *nn.ActorCritic
	ws                *nn.Workspace
	online, next, tgt nn.Output
	d                 nn.Output
	dValues           []float32
}

func hostUpdatesOn(open nn.OpenEngine) nn.OpenEngine {
	return func(net *nn.ActorCritic, opt *nn.Adam) (nn.Engine, error) {
		e, err := open(net, opt)
		if err != nil {
			return nil, err
		}
		return &hostUpdates{Engine: e, target: net.Clone(), ws: nn.NewWorkspace()}, nil
	}
}

func (h *hostUpdates) SetTarget(params []float32) error { return h.target.SetParams(params) }

func (h *hostUpdates) DQNUpdate(b nn.DQNBatch, loss nn.DQNLoss, maxNorm, lr float32, td []float64) (nn.DQNStep, bool, error) {
	n, a := len(b.Actions), h.target.Spec().ActionDim
	if err := h.target.Forward(b.NextObs, n, h.ws, &h.tgt); err != nil {
		return nn.DQNStep{}, false, err
	}
	if loss.Double {
		if err := h.Forward(1, b.NextObs, n, &h.next); err != nil {
			return nn.DQNStep{}, false, err
		}
	}
	if err := h.Forward(0, b.Obs, n, &h.online); err != nil {
		return nn.DQNStep{}, false, err
	}
	h.d.Logits = slices.Grow(h.d.Logits[:0], n*a)[:n*a]
	h.dValues = slices.Grow(h.dValues[:0], n)[:n]
	st, err := cuda.DQNRowsHost(outputs(h.online), outputs(h.next), outputs(h.tgt), a, b, loss, h.d.Logits, h.dValues, td)
	if err != nil {
		return st, false, err
	}
	h.d.Values = nil
	if loss.Dueling {
		h.d.Values = h.dValues
	}
	if err := h.ZeroGrad(); err != nil {
		return st, false, err
	}
	if err := h.Backward(0, n, &h.d); err != nil {
		return st, false, err
	}
	if st.Norm, err = h.ClipGradNorm(maxNorm); err != nil {
		return st, false, err
	}
	if f := float64(st.Norm); math.IsNaN(st.Loss) || math.IsInf(st.Loss, 0) || math.IsNaN(f) || math.IsInf(f, 0) {
		return st, false, nil
	}
	return st, true, h.Step(lr)
}

func outputs(o nn.Output) cuda.DQNOutputs { return cuda.DQNOutputs{Logits: o.Logits, Values: o.Values} }

// TestDQNKernelMatchesLoss: dqnloss.h's loss (the GPU's), compiled for
// the host, gives lossAndGrad's stats, |TD errors| and gradient with
// respect to the outputs, double or not, dueling or not, with and without
// importance weights, errors inside and beyond the Huber loss's delta.
func TestDQNKernelMatchesLoss(t *testing.T) {
	for _, double := range []bool{false, true} {
		for _, dueling := range []bool{false, true} {
			for _, weighted := range []bool{false, true} {
				cfg := DefaultConfig()
				cfg.Double, cfg.Dueling, cfg.HuberDelta = double, dueling, 0.5
				name := map[bool]string{false: "single", true: "double"}[double] + "/" + map[bool]string{false: "plain", true: "dueling"}[dueling] +
					"/" + map[bool]string{false: "unweighted", true: "weighted"}[weighted]
				t.Run(name, func(t *testing.T) {
					spec := testSpec()
					l, err := NewLearner(spec, cfg, 3)
					if err != nil {
						t.Fatal(err)
					}
					// A target other than the online network, so that the two
					// choices of the greedy action differ.
					tp := l.target.Params()
					for i := range tp {
						tp[i] *= 1.5
					}
					b := engineBatch(rand.New(rand.NewPCG(11, 3)), spec, 97)
					for i := range b.Rewards {
						b.Rewards[i] *= 3 // errors on both sides of delta
					}
					weights := b.Weights
					if !weighted {
						b.Weights = nil
					}
					st, td, err := l.lossAndGrad(b, nil, false)
					if err != nil {
						t.Fatal(err)
					}
					n, a := b.Len(), spec.ActionDim
					if !weighted {
						weights = make([]float32, n)
						for i := range weights {
							weights[i] = 1
						}
					}
					dl, dv, gotTD := make([]float32, n*a), make([]float32, n), make([]float64, n)
					got, err := cuda.DQNRowsHost(outputs(l.out), outputs(l.outNext), outputs(l.tgt), a,
						nn.DQNBatch{Actions: b.Actions, Rewards: b.Rewards, Discounts: b.Discounts, Weights: weights},
						nn.DQNLoss{HuberDelta: cfg.HuberDelta, Double: double, Dueling: dueling}, dl, dv, gotTD)
					if err != nil {
						t.Fatal(err)
					}
					for _, s := range []struct {
						name      string
						got, want float64
					}{{"loss", got.Loss, st.Loss}, {"mean Q", got.MeanQ, st.MeanQ}, {"mean |TD|", got.MeanTD, st.MeanTD}} {
						if math.Abs(s.got-s.want) > 1e-12*max(1, math.Abs(s.want)) || math.IsNaN(s.got) {
							t.Errorf("%s %v, lossAndGrad's %v", s.name, s.got, s.want)
						}
					}
					inside := 0
					for i := range td {
						if td[i] != gotTD[i] {
							t.Fatalf("|TD error| %d: %v, lossAndGrad's %v", i, gotTD[i], td[i])
						}
						if td[i] <= cfg.HuberDelta {
							inside++
						}
					}
					if inside == 0 || inside == n {
						t.Errorf("%d of %d errors inside delta: one of the Huber loss's parts is not compared", inside, n)
					}
					if !slices.Equal(dl, l.dOut.Logits) {
						t.Error("the gradient of the logits differs from lossAndGrad's")
					}
					if dueling && !slices.Equal(dv, l.dOut.Values) {
						t.Error("the gradient of the values differs from lossAndGrad's")
					}
				})
			}
		}
	}
}

// TestWholeUpdates: a learner on an engine that takes whole updates
// trains as the CPU learner does, the target copied every 3 updates or
// moved by Polyak steps, and returns its stats and priorities; a state
// moves to a CPU learner and back.
func TestWholeUpdates(t *testing.T) {
	checkWholeUpdates(t, hostUpdatesOn(nn.NewCPUEngine), 1e-6)
}

// checkWholeUpdates runs 9 updates on a CPU learner and on one on open,
// which must take whole updates, and compares stats, priorities and
// parameters within tol relative.
func checkWholeUpdates(t *testing.T, open nn.OpenEngine, tol float64) {
	for _, c := range []struct {
		name   string
		spec   nn.Spec
		polyak bool
	}{{"mlp", testSpec(), false}, {"mlp/polyak", testSpec(), true}, {"conv", convSpec(), false}} {
		t.Run(c.name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.Dueling, cfg.HuberDelta, cfg.TargetUpdateEvery = true, 0.5, 3
			if c.polyak {
				cfg.TargetUpdateEvery, cfg.Tau = 0, 0.1
			}
			cpu, eng := enginePair(t, c.spec, cfg, open)
			if eng.whole == nil {
				t.Fatalf("%T does not take whole updates", eng.eng)
			}
			rng := rand.New(rand.NewPCG(7, 7))
			for u := range 9 {
				b := engineBatch(rng, c.spec, 64)
				if u%2 == 1 {
					b.Weights = nil
				}
				ws, wtd, err := cpu.Update(b, nil)
				if err != nil {
					t.Fatal(err)
				}
				gs, gtd, err := eng.Update(b, nil)
				if err != nil {
					t.Fatal(err)
				}
				for _, s := range []struct {
					name      string
					got, want float64
				}{{"loss", gs.Loss, ws.Loss}, {"mean Q", gs.MeanQ, ws.MeanQ}, {"mean |TD|", gs.MeanTD, ws.MeanTD}, {"grad norm", gs.GradNorm, ws.GradNorm}} {
					if math.Abs(s.got-s.want) > tol*max(1, math.Abs(s.want)) || math.IsNaN(s.got) {
						t.Errorf("update %d: %s %v, the CPU's %v", u, s.name, s.got, s.want)
					}
				}
				if len(gtd) != len(wtd) {
					t.Fatalf("update %d: %d priorities, the CPU's %d", u, len(gtd), len(wtd))
				}
				for i := range wtd {
					if math.Abs(gtd[i]-wtd[i]) > tol*max(1, wtd[i]) {
						t.Fatalf("update %d: |TD error| %d %v, the CPU's %v", u, i, gtd[i], wtd[i])
					}
				}
			}
			layout := cpu.online.Layout()
			if err := eng.Sync(); err != nil {
				t.Fatal(err)
			}
			if r, p := enginetest.RelDiff(layout, eng.online.Params(), cpu.online.Params()); r > tol || math.IsNaN(r) {
				t.Errorf("online parameters of %s off by %.3g relative", p, r)
			}
			if r, p := enginetest.RelDiff(layout, eng.target.Params(), cpu.target.Params()); r > tol || math.IsNaN(r) {
				t.Errorf("target parameters of %s off by %.3g relative", p, r)
			}
			// Another learner's state restored on both (the engine's copy of
			// the target included): the next update is the CPU's.
			other, err := NewLearner(c.spec, cfg, 99)
			if err != nil {
				t.Fatal(err)
			}
			if _, _, err := other.Update(engineBatch(rng, c.spec, 64), nil); err != nil {
				t.Fatal(err)
			}
			ost, err := other.State()
			if err != nil {
				t.Fatal(err)
			}
			for i := range ost.Target {
				ost.Target[i] *= 0.5 // a target other than the online network
			}
			if err := cpu.Restore(ost); err != nil {
				t.Fatal(err)
			}
			if err := eng.Restore(ost); err != nil {
				t.Fatal(err)
			}
			b := engineBatch(rng, c.spec, 64)
			ws, _, err := cpu.Update(b, nil)
			if err != nil {
				t.Fatal(err)
			}
			gs, _, err := eng.Update(b, nil)
			if err != nil {
				t.Fatal(err)
			}
			if math.Abs(gs.Loss-ws.Loss) > tol*max(1, ws.Loss) {
				t.Errorf("after a restore: loss %v, the CPU's %v", gs.Loss, ws.Loss)
			}
		})
	}
}

// TestWholeUpdateNonFinite: a batch whose loss is NaN is refused as the
// CPU learner refuses it, and nothing changes.
func TestWholeUpdateNonFinite(t *testing.T) {
	checkWholeUpdateNonFinite(t, hostUpdatesOn(nn.NewCPUEngine))
}

func checkWholeUpdateNonFinite(t *testing.T, open nn.OpenEngine) {
	cfg := DefaultConfig()
	cfg.Dueling = true
	cpu, eng := enginePair(t, testSpec(), cfg, open)
	b := engineBatch(rand.New(rand.NewPCG(2, 2)), testSpec(), 16)
	b.Rewards[5] = float32(math.NaN())
	_, _, werr := cpu.Update(b, nil)
	_, _, gerr := eng.Update(b, nil)
	if werr == nil || gerr == nil || werr.Error() != gerr.Error() {
		t.Fatalf("CPU: %v; whole update: %v; want the same error", werr, gerr)
	}
	if eng.Updates() != 0 {
		t.Error("the update was counted")
	}
	if err := eng.Sync(); err != nil {
		t.Fatal(err)
	}
	if !equal(eng.online.Params(), cpu.online.Params()) {
		t.Error("the refused step changed the parameters")
	}
	st, err := eng.State()
	if err != nil {
		t.Fatal(err)
	}
	if st.Step != 0 {
		t.Errorf("Adam's step %d after a refused update", st.Step)
	}
}

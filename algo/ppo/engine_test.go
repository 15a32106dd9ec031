package ppo

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/distrl/distrl/api"
	"github.com/distrl/distrl/internal/testsupport/enginetest"
	"github.com/distrl/distrl/nn"
)

// The engine tests run a learner on the CPU as ever and one on an engine
// from the same start, and compare: here the CPU engine, which must agree
// bit for bit (the same code in the same order); engine_cuda_test.go runs
// the same checks on a GPU within the tolerances.

// engineMinibatch fills l's minibatch with n random rows of spec, as an
// update's first minibatch is filled (GAE, standardised advantages,
// observations staged on an engine), in their order or reversed.
func engineMinibatch(t testing.TB, l *Learner, spec nn.Spec, n int, seed uint64, reversed bool) *samples {
	t.Helper()
	b := randBatch(rand.New(rand.NewPCG(seed, 9)), spec, batchSpec{t: n, terminated: []int{n / 2}})
	if _, err := l.flatten([]*api.SampleBatch{b}, n); err != nil {
		t.Fatal(err)
	}
	if _, _, err := l.standardize(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	if err := l.stage(); err != nil {
		t.Fatal(err)
	}
	idx := make([]int, n)
	for i := range idx {
		idx[i] = i
		if reversed {
			idx[i] = n - 1 - i
		}
	}
	l.mb.gather(&l.all, idx, l.obsDim, l.actDim, l.gaussian, l.eng == nil)
	return &l.mb
}

// roundingFloor is how far the CPU's own gradient of a minibatch moves
// when it is computed along another float32 path: its rows in the reverse
// order (the same sums, rounded in another order), and gonum's kernels in
// place of OpenBLAS (another order inside every product, so that a ReLU
// unit at its kink may be off in one and just on in the other: one such
// unit with a large gradient moves a weight gradient by 1e-4 of its
// largest element). The GPU's gradient is a third path; a difference of
// this size is rounding, not a fault.
func roundingFloor(t *testing.T, spec nn.Spec, cfg Config, n int, want []float32) float64 {
	t.Helper()
	floor := 0.0
	for _, path := range []struct {
		reversed, gonum bool
	}{{true, false}, {false, true}} {
		restore := nn.UseGonum(path.gonum)
		l := newLearner(t, spec, cfg)
		alt := make([]float32, len(want))
		_, err := l.lossAndGrad(engineMinibatch(t, l, spec, n, uint64(n), path.reversed), alt)
		restore()
		if err != nil {
			t.Fatal(err)
		}
		r, _ := enginetest.RelDiff(l.net.Layout(), alt, want)
		floor = max(floor, r)
	}
	return floor
}

// enginePair is a CPU learner and one on open, from the same network.
func enginePair(t testing.TB, spec nn.Spec, cfg Config, open nn.OpenEngine) (cpu, eng *Learner) {
	t.Helper()
	cpu = newLearner(t, spec, cfg)
	eng = newLearner(t, spec, cfg)
	enginetest.Use(t, eng.SetEngine, eng.Close, open)
	return cpu, eng
}

// checkEngineGradients compares the PPO loss's gradient on the engine
// with the CPU's, for every spec and minibatch size: within tol relative,
// per tensor, or within three times the CPU's own rounding across row
// orders and BLAS libraries where that is larger (roundingFloor; both are
// logged).
func checkEngineGradients(t *testing.T, open nn.OpenEngine, specs map[string]nn.Spec, sizes []int, tol float64) {
	cfg := DefaultConfig()
	cfg.ClipValueLoss, cfg.EntropyCoef = true, 0.01
	for name, spec := range specs {
		for _, n := range sizes {
			t.Run(fmt.Sprintf("%s/rows=%d", name, n), func(t *testing.T) {
				cpu, eng := enginePair(t, spec, cfg, open)
				want := make([]float32, cpu.net.NumParams())
				got := make([]float32, len(want))
				tw, err := cpu.lossAndGrad(engineMinibatch(t, cpu, spec, n, uint64(n), false), want)
				if err != nil {
					t.Fatal(err)
				}
				tg, err := eng.lossAndGrad(engineMinibatch(t, eng, spec, n, uint64(n), false), got)
				if err != nil {
					t.Fatal(err)
				}
				if err := eng.eng.Grad(got); err != nil {
					t.Fatal(err)
				}
				if enginetest.Norm(want) == 0 {
					t.Fatal("the CPU's gradient is zero: nothing compared")
				}
				if d := math.Abs(tg.total - tw.total); d > tol*max(1, math.Abs(tw.total)) {
					t.Errorf("loss %v, want %v", tg.total, tw.total)
				}
				floor := roundingFloor(t, spec, cfg, n, want)
				bound := max(tol, 3*floor)
				if r, p := enginetest.RelDiff(cpu.net.Layout(), got, want); r > bound || math.IsNaN(r) {
					t.Errorf("gradient of %s off by %.3g relative (tolerance %g; the CPU's own rounding across row orders and BLAS libraries %.3g)", p, r, tol, floor)
				} else {
					t.Logf("gradient within %.3g relative (worst %s; the CPU's own rounding across row orders and BLAS libraries %.3g)", r, p, floor)
				}
			})
		}
	}
}

// checkEngineUpdates runs updates PPO updates on the same batches on both
// learners and compares their parameters, within tol relative, then moves
// the engine learner's state to a CPU learner and back.
func checkEngineUpdates(t *testing.T, open nn.OpenEngine, spec nn.Spec, updates int, tol float64) {
	cfg := DefaultConfig()
	cfg.Epochs, cfg.MinibatchSize, cfg.MaxGradNorm = 2, 64, 0.5
	cpu, eng := enginePair(t, spec, cfg, open)
	rng := rand.New(rand.NewPCG(4, 4))
	steps := 0
	for range updates {
		b := randBatch(rng, spec, batchSpec{t: 128, truncated: []int{127}})
		ws, err := cpu.Update([]*api.SampleBatch{b})
		if err != nil {
			t.Fatal(err)
		}
		gs, err := eng.Update([]*api.SampleBatch{b})
		if err != nil {
			t.Fatal(err)
		}
		if ws.Minibatches != gs.Minibatches {
			t.Fatalf("%d minibatches on the engine, %d on the CPU", gs.Minibatches, ws.Minibatches)
		}
		steps += ws.Minibatches
	}
	layout := cpu.net.Layout()
	if r, p := enginetest.RelDiff(layout, eng.Params(), cpu.Params()); r > tol || math.IsNaN(r) {
		t.Errorf("after %d Adam steps, parameters of %s off by %.3g relative (tolerance %g)", steps, p, r, tol)
	} else {
		t.Logf("after %d Adam steps, parameters within %.3g relative (worst %s)", steps, r, p)
	}
	// The engine's checkpoint resumes on the CPU, and the CPU's on the
	// engine: the same state either way.
	st := eng.State()
	back := newLearner(t, spec, cfg)
	if err := back.Restore(st); err != nil {
		t.Fatal(err)
	}
	if r, _ := enginetest.RelDiff(layout, back.Params(), st.Params); r != 0 || back.opt.Step != st.AdamStep {
		t.Errorf("the engine's state restored on the CPU differs")
	}
	cst := cpu.State()
	if err := eng.Restore(cst); err != nil {
		t.Fatal(err)
	}
	got := make([]float32, len(cst.Params))
	if err := eng.eng.Params(got); err != nil {
		t.Fatal(err)
	}
	m, v := make([]float32, len(got)), make([]float32, len(got))
	step, err := eng.eng.AdamState(m, v)
	if err != nil {
		t.Fatal(err)
	}
	if r, _ := enginetest.RelDiff(layout, got, cst.Params); r != 0 || step != cst.AdamStep {
		t.Errorf("the CPU's state restored on the engine differs")
	}
	if r, _ := enginetest.RelDiff(layout, v, cst.AdamV); r != 0 {
		t.Errorf("the CPU's Adam state restored on the engine differs")
	}
}

// TestCPUEngine: on the CPU engine, the gradients and the updates are the
// CPU learner's, bit for bit, and states move between the two.
func TestCPUEngine(t *testing.T) {
	specs := map[string]nn.Spec{"cartpole": cartPoleSpec, "tiny-image": tinyImage}
	checkEngineGradients(t, nn.NewCPUEngine, specs, []int{1, 7, 64, 300}, 0)
	for name, spec := range specs {
		t.Run("updates/"+name, func(t *testing.T) { checkEngineUpdates(t, nn.NewCPUEngine, spec, 5, 0) })
	}
}

// TestEngineRefusesGaussian: engines run categorical heads only.
func TestEngineRefusesGaussian(t *testing.T) {
	spec := cartPoleSpec
	spec.Head = nn.Gaussian
	l := newLearner(t, spec, DefaultConfig())
	if err := l.SetEngine(nn.NewCPUEngine); err == nil {
		t.Fatal("SetEngine took a Gaussian head")
	}
}

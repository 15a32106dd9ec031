package dqn

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/distrl/distrl/internal/testsupport/enginetest"
	"github.com/distrl/distrl/nn"
)

// The engine tests run a learner on the CPU as ever and one on an engine
// from the same start, and compare: here the CPU engine, which must agree
// bit for bit; engine_cuda_test.go runs the same checks on a GPU within
// the tolerances.

// engineBatch is n random transitions of spec.
func engineBatch(rng *rand.Rand, spec nn.Spec, n int) *Batch {
	b := &Batch{Obs: make([]float32, n*spec.ObsDim), NextObs: make([]float32, n*spec.ObsDim)}
	for i := range b.Obs {
		b.Obs[i], b.NextObs[i] = float32(rng.NormFloat64()), float32(rng.NormFloat64())
	}
	for i := range n {
		b.Actions = append(b.Actions, rng.Int32N(int32(spec.ActionDim)))
		b.Rewards = append(b.Rewards, float32(rng.NormFloat64()))
		b.Discounts = append(b.Discounts, []float32{0, 0.99, 0.98}[i%3])
		b.Weights = append(b.Weights, float32(0.2+rng.Float64()))
	}
	return b
}

// reversedBatch is b with its transitions in the reverse order.
func reversedBatch(b *Batch, obsDim int) *Batch {
	n := b.Len()
	r := &Batch{Obs: make([]float32, 0, len(b.Obs)), NextObs: make([]float32, 0, len(b.NextObs))}
	for i := n - 1; i >= 0; i-- {
		r.Obs = append(r.Obs, b.Obs[i*obsDim:(i+1)*obsDim]...)
		r.NextObs = append(r.NextObs, b.NextObs[i*obsDim:(i+1)*obsDim]...)
		r.Actions = append(r.Actions, b.Actions[i])
		r.Rewards = append(r.Rewards, b.Rewards[i])
		r.Discounts = append(r.Discounts, b.Discounts[i])
		r.Weights = append(r.Weights, b.Weights[i])
	}
	return r
}

// enginePair is a CPU learner and one on open, from the same seed.
func enginePair(t *testing.T, spec nn.Spec, cfg Config, open nn.OpenEngine) (cpu, eng *Learner) {
	t.Helper()
	var err error
	if cpu, err = NewLearner(spec, cfg, 5); err != nil {
		t.Fatal(err)
	}
	if eng, err = NewLearner(spec, cfg, 5); err != nil {
		t.Fatal(err)
	}
	enginetest.Use(t, eng.SetEngine, eng.Close, open)
	return cpu, eng
}

// checkEngine compares, for every spec (dueling and double, the Huber
// loss's both parts), the loss's gradient on the engine with the CPU's at
// every batch size within gradTol relative (or three times the CPU's own
// rounding across row orders and BLAS libraries, where that is larger:
// see ppo's roundingFloor), then updates steps on the
// same batches (the target copied every 3) within paramTol of the CPU on
// OpenBLAS or on gonum, then moves
// the state from the engine to a CPU learner and back.
func checkEngine(t *testing.T, open nn.OpenEngine, specs map[string]nn.Spec, sizes []int, gradTol float64, steps int, paramTol float64) {
	cfg := DefaultConfig()
	cfg.Dueling, cfg.HuberDelta, cfg.TargetUpdateEvery = true, 0.5, 3
	for name, spec := range specs {
		for _, n := range sizes {
			t.Run(fmt.Sprintf("%s/gradient/rows=%d", name, n), func(t *testing.T) {
				cpu, eng := enginePair(t, spec, cfg, open)
				b := engineBatch(rand.New(rand.NewPCG(uint64(n), 1)), spec, n)
				ws, _, err := cpu.lossAndGrad(b, nil, true)
				if err != nil {
					t.Fatal(err)
				}
				gs, _, err := eng.lossAndGrad(b, nil, true)
				if err != nil {
					t.Fatal(err)
				}
				got := make([]float32, cpu.online.NumParams())
				if err := eng.eng.Grad(got); err != nil {
					t.Fatal(err)
				}
				want := cpu.grad[:len(got)]
				if enginetest.Norm(want) == 0 {
					t.Fatal("the CPU's gradient is zero: nothing compared")
				}
				if math.Abs(gs.Loss-ws.Loss) > gradTol*max(1, math.Abs(ws.Loss)) {
					t.Errorf("loss %v, want %v", gs.Loss, ws.Loss)
				}
				want = append([]float32(nil), want...)
				// The CPU's own rounding along other float32 paths: the rows
				// reversed, and gonum's kernels (see ppo's roundingFloor).
				floor := 0.0
				for _, alt := range []struct {
					b     *Batch
					gonum bool
				}{{reversedBatch(b, spec.ObsDim), false}, {b, true}} {
					restore := nn.UseGonum(alt.gonum)
					_, _, err := cpu.lossAndGrad(alt.b, nil, true)
					restore()
					if err != nil {
						t.Fatal(err)
					}
					r, _ := enginetest.RelDiff(cpu.online.Layout(), cpu.grad[:len(got)], want)
					floor = max(floor, r)
				}
				bound := max(gradTol, 3*floor)
				if r, p := enginetest.RelDiff(cpu.online.Layout(), got, want); r > bound || math.IsNaN(r) {
					t.Errorf("gradient of %s off by %.3g relative (tolerance %g; the CPU's own rounding across row orders and BLAS libraries %.3g)", p, r, gradTol, floor)
				} else {
					t.Logf("gradient within %.3g relative (worst %s; the CPU's own rounding across row orders and BLAS libraries %.3g)", r, p, floor)
				}
			})
		}
		t.Run(name+"/updates", func(t *testing.T) {
			cpu, eng := enginePair(t, spec, cfg, open)
			// The CPU on gonum's kernels too: Adam's first steps divide
			// each gradient by its own size, so a parameter whose gradient
			// is near zero takes a whole step either way on rounding alone.
			// On OpenBLAS's Haswell and Zen kernels the CPU's two paths end
			// 3.4e-3 apart on MinAtar's conv.0.b after 20 steps, while their
			// gradients agree within 2e-6; the engine must be within
			// paramTol of one of them.
			gonum, err := NewLearner(spec, cfg, 5)
			if err != nil {
				t.Fatal(err)
			}
			rng := rand.New(rand.NewPCG(7, 7))
			for range steps {
				b := engineBatch(rng, spec, 64)
				if _, _, err := cpu.Update(b, nil); err != nil {
					t.Fatal(err)
				}
				if _, _, err := eng.Update(b, nil); err != nil {
					t.Fatal(err)
				}
				if paramTol > 0 {
					restore := nn.UseGonum(true)
					_, _, err := gonum.Update(b, nil)
					restore()
					if err != nil {
						t.Fatal(err)
					}
				}
			}
			layout := cpu.online.Layout()
			if err := eng.Sync(); err != nil {
				t.Fatal(err)
			}
			r, p := enginetest.RelDiff(layout, eng.online.Params(), cpu.online.Params())
			if paramTol > 0 {
				rg, pg := enginetest.RelDiff(layout, eng.online.Params(), gonum.online.Params())
				own, _ := enginetest.RelDiff(layout, gonum.online.Params(), cpu.online.Params())
				t.Logf("after %d updates, the CPU's two BLAS paths %.3g apart; the engine %.3g from OpenBLAS's (worst %s), %.3g from gonum's (worst %s)", steps, own, r, p, rg, pg)
				if rg < r {
					r, p = rg, pg
				}
			}
			if r > paramTol || math.IsNaN(r) {
				t.Errorf("after %d updates, parameters of %s off by %.3g relative (tolerance %g)", steps, p, r, paramTol)
			} else {
				t.Logf("after %d updates, parameters within %.3g relative (worst %s)", steps, r, p)
			}
			st, err := eng.State()
			if err != nil {
				t.Fatal(err)
			}
			back, err := NewLearner(spec, cfg, 9)
			if err != nil {
				t.Fatal(err)
			}
			if err := back.Restore(st); err != nil {
				t.Fatal(err)
			}
			if bs, _ := back.State(); !equal(bs.Online, st.Online) || !equal(bs.Target, st.Target) || !equal(bs.AdamV, st.AdamV) || bs.Step != st.Step {
				t.Error("the engine's state restored on the CPU differs")
			}
			cst, _ := cpu.State()
			if err := eng.Restore(cst); err != nil {
				t.Fatal(err)
			}
			// The next step from the same state is the same on both.
			b := engineBatch(rng, spec, 64)
			if _, _, err := cpu.Update(b, nil); err != nil {
				t.Fatal(err)
			}
			if _, _, err := eng.Update(b, nil); err != nil {
				t.Fatal(err)
			}
			if err := eng.Sync(); err != nil {
				t.Fatal(err)
			}
			if r, p := enginetest.RelDiff(layout, eng.online.Params(), cpu.online.Params()); r > paramTol || math.IsNaN(r) {
				t.Errorf("a step from the CPU's state restored on the engine: %s off by %.3g relative", p, r)
			}
		})
	}
}

// TestCPUEngine: on the CPU engine, gradients, updates and states are the
// CPU learner's, bit for bit.
func TestCPUEngine(t *testing.T) {
	checkEngine(t, nn.NewCPUEngine, map[string]nn.Spec{"mlp": testSpec(), "conv": convSpec()}, []int{1, 5, 64, 200}, 0, 7, 0)
}
